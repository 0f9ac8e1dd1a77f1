// A build without NCCL: device communicators on a GPU refuse, naming the build option (the simulated device's need
// no NCCL).
#include "optimus/core/error.hpp"
#include "optimus/cuda/device.hpp"

namespace optimus {

std::unique_ptr<DeviceCollectives> nccl_collectives(Communicator&, DeviceRuntime& device) {
  OPTIMUS_FAIL("a device communicator on ", device.name(), ": Optimus was built without NCCL (OPTIMUS_WITH_NCCL=OFF, "
               "or NCCL >= 2.18 was not found)");
}

}  // namespace optimus
