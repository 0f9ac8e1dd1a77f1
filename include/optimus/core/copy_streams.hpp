// Two copy streams of one device — host to device ("up") and device to host ("down"), as a GPU's two copy engines run
// side by side — and an exact count of the bytes given to each: what the offload engines move
// (layers/optimizer_offload.hpp, layers/spill.hpp), for their transfer formulas. Host memory on the other side of a
// copy should be page-locked (PinnedHostMemory, PinnedMemoryPool): then the copy is asynchronous and reads or writes it
// when it runs, so the caller orders any host access after it (an event, or synchronize()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "optimus/core/device_runtime.hpp"

namespace optimus {

// Bytes copied host to device and device to host.
struct TransferBytes {
  std::uint64_t host_to_device = 0;
  std::uint64_t device_to_host = 0;

  friend bool operator==(const TransferBytes&, const TransferBytes&) = default;
  TransferBytes& operator+=(const TransferBytes& o) {
    host_to_device += o.host_to_device;
    device_to_host += o.device_to_host;
    return *this;
  }
};

class CopyStreams {
 public:
  // `runtime` must outlive the streams.
  explicit CopyStreams(DeviceRuntime& runtime);
  CopyStreams(const CopyStreams&) = delete;
  CopyStreams& operator=(const CopyStreams&) = delete;

  DeviceRuntime& runtime() const { return *runtime_; }
  DeviceStream& up() const { return *up_; }
  DeviceStream& down() const { return *down_; }
  // device_dst <- host_src on up(), host_dst <- device_src on down(): `bytes` each, counted.
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  void download(void* host_dst, const void* device_src, std::size_t bytes);
  // Everything given so far (exact).
  TransferBytes moved() const { return moved_; }
  // The host waits for both streams' work (throws optimus::Error if device work failed).
  void synchronize();

 private:
  DeviceRuntime* runtime_;
  std::unique_ptr<DeviceStream> up_, down_;
  TransferBytes moved_;
};

}  // namespace optimus
