// A build without CUDA (OPTIMUS_WITH_CUDA=OFF, or no toolkit): the CUDA backend's entry points refuse, naming the
// option, so that `--device cuda` stops with one clear line instead of failing to link or running host code on device
// pointers.
#include "optimus/core/error.hpp"
#include "optimus/cuda/device.hpp"

namespace optimus {
namespace {

[[noreturn]] void without_cuda(const char* what) {
  OPTIMUS_FAIL(what, ": Optimus was built without CUDA (OPTIMUS_WITH_CUDA=OFF, or no CUDA toolkit was found)");
}

}  // namespace

std::unique_ptr<DeviceRuntime> open_cuda_device(int ordinal) {
  without_cuda(detail::concat("CUDA device ", ordinal).c_str());
}
int cuda_device_count() noexcept { return 0; }
std::string cuda_unavailable_reason() { return "Optimus was built without CUDA"; }

}  // namespace optimus
