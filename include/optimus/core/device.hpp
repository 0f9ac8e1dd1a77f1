// Where memory lives and work runs: the host (cpu); the simulated accelerator (sim, optimus/sim/runtime.hpp), a
// stand-in for a GPU that runs on any machine — its memory cannot be touched by host code, its work is queued on
// streams — so that every device path of Optimus runs in tests and CI; or an NVIDIA GPU (cuda,
// optimus/cuda/runtime.hpp). sim and cuda are the accelerators: the same code drives both.
#pragma once

#include <string_view>

namespace optimus {

enum class Device { cpu, sim, cuda };

constexpr std::string_view name_of(Device device) {
  switch (device) {
    case Device::cpu: return "cpu";
    case Device::sim: return "sim";
    case Device::cuda: return "cuda";
  }
  return "?";
}

// Parses "cpu", "sim" or "cuda"; throws optimus::Error naming the text otherwise.
Device parse_device(std::string_view text);

}  // namespace optimus
