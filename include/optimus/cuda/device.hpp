// The CUDA backend's entry points for code that does not include CUDA headers (the backend itself:
// optimus/cuda/runtime.hpp). In a build without CUDA they refuse, naming the build option (cuda/absent.cpp).
#pragma once

#include <memory>
#include <string>

#include "optimus/comm/communicator.hpp"
#include "optimus/comm/device_collectives.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

// CUDA device `ordinal` as a DeviceRuntime; throws optimus::Error when Optimus was built without CUDA or the device
// does not exist.
std::unique_ptr<DeviceRuntime> open_cuda_device(int ordinal);
// The CUDA devices present (0 in a build without CUDA, without a driver or without a GPU), and why there are none.
int cuda_device_count() noexcept;
std::string cuda_unavailable_reason();

// NCCL communicators over `bootstrap` (one rank per bootstrap rank) on CUDA device `device`; refused in a build
// without NCCL. The first opens NCCL (it is not linked: cuda/nccl_library.hpp).
std::unique_ptr<DeviceCollectives> nccl_collectives(Communicator& bootstrap, DeviceRuntime& device);

}  // namespace optimus
