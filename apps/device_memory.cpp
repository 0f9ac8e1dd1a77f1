// A run's device memory (device_memory.hpp).
#include "device_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "optimus/core/error.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/pipeline/partition.hpp"
#include "optimus/plan/memory_model.hpp"

namespace optimus::apps {
namespace {

using u64 = std::uint64_t;

// What one device holds with the `k` members of the largest steps in flight at once: per device, the largest need
// over the ranks that have one each, or the sum over every slot's ranks for a shared one. Each slot's k largest steps
// are summed apart (an upper bound: every member's step at its peak on every slot at once).
u64 device_need(const std::vector<MemberDeviceBytes>& members, const SlotDevices& d, std::size_t k) {
  u64 shared = 0, largest = 0;
  for (int s = 0; s < d.slots; ++s) {
    const auto slot = static_cast<std::size_t>(s);
    std::vector<u64> steps;
    u64 need = d.per_rank;
    for (const MemberDeviceBytes& m : members) {
      need += m.resident[slot];
      steps.push_back(m.step[slot]);
    }
    std::sort(steps.begin(), steps.end(), std::greater<>());
    need = std::accumulate(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(std::min(k, steps.size())), need);
    shared += need * static_cast<u64>(d.slot_ranks);
    largest = std::max(largest, need);
  }
  return d.shared ? shared : largest;
}

std::string mib(u64 bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

MemberDeviceBytes member_device_bytes(const Setup& setup) {
  plan::Layout layout = setup.run.layout;
  if (!setup.planned) layout.recompute.assign(static_cast<std::size_t>(setup.config.layers), setup.recompute);
  const plan::Workload workload = workload_of(setup);
  MemberDeviceBytes out{.resident = {}, .step = {}, .spilled = spill_of(layout.offload) != Spill::none};
  if (!plan::shape_error(layout, workload).empty()) return out;  // train_gpt's own checks name it, as it starts
  const u64 block = static_cast<u64>(plan::block_parameters(layout, setup.config)) * 4;
  for (const plan::MemoryPrediction& p : plan::predict_memory_by_stage(layout, workload)) {
    const plan::KindBytes& d = p.device;
    u64 buffers = 0;  // a spilled member's blocks on the device while its step runs: two at most, values and gradients
    if (out.spilled) {
      const pipeline::LayerRange range = pipeline::layers_of(setup.schedule, setup.config.layers, p.stage);
      buffers = 2 * static_cast<u64>(std::min<std::int64_t>(range.count, 2)) * block;
    }
    out.step.push_back(d.activations + d.workspace + buffers);
    out.resident.push_back(d.total() - out.step.back());
  }
  return out;
}

int admitted_in_flight(const std::string& where, const std::vector<std::string>& names,
                       const std::vector<MemberDeviceBytes>& members, const SlotDevices& devices, int in_flight) {
  std::vector<MemberDeviceBytes> known;  // (a member whose shape is wrong is refused as it starts)
  for (const MemberDeviceBytes& m : members) {
    if (static_cast<int>(m.step.size()) == devices.slots) known.push_back(m);
  }
  const u64 usable = devices.capacity - devices.capacity / kDeviceReserveShare;
  const std::string device = devices.shared ? "the in-process ranks' device" : "a rank's device";
  // What the need counts, and what the device has.
  const std::string counted = " (the memory model's: every member's parameters, gradients and optimizer states, the "
                              "activations, workspace and spilled blocks' buffers of each step in flight, and each "
                              "rank's GEMM workspace)";
  const std::string has = " and " + device + " has " + mib(devices.capacity) + " (--device-memory), of which " +
                          mib(usable) + " for the members (1/16 kept back for what the model does not count)";
  std::size_t fit = 0;
  while (fit < known.size() && device_need(known, devices, fit + 1) <= usable) ++fit;
  if (fit == 0) {
    // Not even one step: the member that alone does not fit, or the residents of all together.
    for (std::size_t m = 0; m < members.size(); ++m) {
      if (static_cast<int>(members[m].step.size()) != devices.slots) continue;
      const u64 alone = device_need({members[m]}, devices, 1);
      OPTIMUS_CHECK(alone <= usable, where, ": member '", names[m], "' needs ", mib(alone), " on ", device,
                    " with its step in flight", counted, has, ": it does not fit even alone; ",
                    members[m].spilled
                        ? "give the sweep more slots or a larger device"
                        : "spill it (--offload spill+activations), give the sweep more slots or a larger device");
    }
    OPTIMUS_FAIL(where, ": the ", members.size(), " members need ", mib(device_need(known, devices, 1)), " on ",
                 device, " with one step in flight", counted, has, ": fewer members, spilled ones (--offload "
                 "spill+activations), more slots or a larger device");
  }
  const auto given = static_cast<std::size_t>(in_flight);
  OPTIMUS_CHECK(in_flight == 0 || given <= fit, where, ": --in-flight ", in_flight, " needs ",
                mib(device_need(known, devices, given)), " on ", device, counted, has, ": at most ", fit, " fit");
  if (in_flight > 0) return in_flight;
  return fit == known.size() ? 0 : static_cast<int>(fit);
}

void check_device_memory(const Setup& setup, std::uint64_t capacity, bool shared, std::uint64_t per_rank) {
  const MemberDeviceBytes bytes = member_device_bytes(setup);
  const plan::Layout& layout = setup.run.layout;
  if (bytes.step.empty()) return;  // a shape the run's own checks name
  SlotDevices devices{.capacity = capacity, .slots = layout.pp, .slot_ranks = layout.tp * layout.dp, .shared = shared,
                      .per_rank = per_rank};
  const u64 need = device_need({bytes}, devices, 1);
  devices.shared = false;
  const u64 largest = device_need({bytes}, devices, 1);
  OPTIMUS_CHECK(need <= capacity, "not enough device memory: ",
                shared && layout.ranks() > 1 ? "the " + std::to_string(layout.ranks()) + " ranks' device needs "
                                             : "each rank's device needs ",
                mib(need), " (a rank's model as laid out, by the planner's memory model, and its GEMM engine's ",
                per_rank, " bytes of workspace; up to ", mib(largest), " each) and --device-memory gives ",
                mib(capacity), ": a larger device, more ranks, micro-batches, recomputation or offload");
}

}  // namespace optimus::apps
