// A program's choice of device, as its options give it: `--device cpu|sim|cuda` and, for the simulated device,
// `--device-memory SIZE` (its capacity, e.g. 512MiB; unlimited unless given) and `--device-bandwidth GB/s` (how fast
// its copy engines move bytes between host and device; unthrottled unless given). train_gpt and optimus-bench read them
// alike through this header.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optimus/programs/cli.hpp"
#include "optimus/core/device.hpp"
#include "optimus/core/device_runtime.hpp"

namespace optimus {

struct DeviceChoice {
  Device kind;
  std::uint64_t sim_capacity;  // bytes of the simulated device (unlimited: the largest value)
  double sim_bandwidth;        // bytes per second of its host<->device copies (unthrottled: infinity)
};

// The three options' Specs, for a program's option table.
std::vector<cli::Spec> device_options();

// The choice `options` make; --device-memory or --device-bandwidth with another device than sim is an optimus::Error.
DeviceChoice choose_device(const cli::Options& options);

// The runtime of `choice`: the simulated device (ordinal 0, its capacity) or CUDA device `gpu`; null for the CPU.
std::unique_ptr<DeviceRuntime> open_device(const DeviceChoice& choice, int gpu);

}  // namespace optimus
