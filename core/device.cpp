// Parsing of device names (used by command-line programs).
#include "optimus/core/device.hpp"

#include <string>

#include "optimus/core/error.hpp"

namespace optimus {

Device parse_device(std::string_view text) {
  for (Device d : {Device::cpu, Device::sim, Device::cuda}) {
    if (text == name_of(d)) return d;
  }
  OPTIMUS_FAIL("unknown device '", std::string(text), "' (expected cpu, sim or cuda)");
}

}  // namespace optimus
