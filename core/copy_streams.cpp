// A device's two copy streams and what they moved (copy_streams.hpp).
#include "optimus/core/copy_streams.hpp"

namespace optimus {

CopyStreams::CopyStreams(DeviceRuntime& runtime)
    : runtime_(&runtime), up_(runtime.create_stream()), down_(runtime.create_stream()) {}

void CopyStreams::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  runtime_->copy_async(device_dst, host_src, bytes, *up_);
  moved_.host_to_device += bytes;
}

void CopyStreams::download(void* host_dst, const void* device_src, std::size_t bytes) {
  runtime_->copy_async(host_dst, device_src, bytes, *down_);
  moved_.device_to_host += bytes;
}

void CopyStreams::synchronize() {
  up_->synchronize();
  down_->synchronize();
}

}  // namespace optimus
