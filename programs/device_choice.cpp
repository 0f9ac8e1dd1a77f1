// A program's choice of device (optimus/programs/device_choice.hpp).
#include "optimus/programs/device_choice.hpp"

#include <limits>

#include "optimus/core/error.hpp"
#include "optimus/cuda/device.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus {

std::vector<cli::Spec> device_options() {
  return {cli::choice("device", {"cpu", "sim", "cuda"}, "where each rank computes (default cpu)"),
          cli::bytes("device-memory", "the simulated device's capacity (--device sim; default unlimited)"),
          cli::real("device-bandwidth", 1e-3, 1e6,
                    "GB/s of the simulated device's host<->device copies (--device sim; default unthrottled)")};
}

DeviceChoice choose_device(const cli::Options& options) {
  const DeviceChoice choice{
      .kind = parse_device(options.text("device", "cpu")),
      .sim_capacity = options.bytes("device-memory", std::numeric_limits<std::uint64_t>::max()),
      .sim_bandwidth = options.has("device-bandwidth") ? options.real("device-bandwidth", 0) * 1e9
                                                       : std::numeric_limits<double>::infinity()};
  OPTIMUS_CHECK(!options.has("device-memory") || choice.kind == Device::sim,
                "--device-memory sets the simulated device's memory: it needs --device sim");
  OPTIMUS_CHECK(!options.has("device-bandwidth") || choice.kind == Device::sim,
                "--device-bandwidth sets the simulated device's copy bandwidth: it needs --device sim");
  return choice;
}

std::unique_ptr<DeviceRuntime> open_device(const DeviceChoice& choice, int gpu) {
  switch (choice.kind) {
    case Device::sim:
      return std::make_unique<sim::Runtime>(sim::Options{.capacity = static_cast<std::size_t>(choice.sim_capacity),
                                                         .copy_bandwidth = choice.sim_bandwidth});
    case Device::cuda: return open_cuda_device(gpu);
    case Device::cpu: break;
  }
  return nullptr;
}

}  // namespace optimus
