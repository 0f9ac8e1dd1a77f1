// A run's device memory, checked before anything large is allocated on a simulated device: what each model (a run's
// one, a sweep's members) holds on a rank's device for good and what a step of it in flight adds, summed over what
// shares the device, against its capacity. For a sweep it admits only what then fits: where every member in flight at
// once would not, it bounds how many are (--in-flight), and where one alone would not, it refuses, naming the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training_loop.hpp"

namespace optimus::apps {

// A member's device bytes per rank on each slot (stage s of its pipeline), by the planner's memory model
// (plan/memory_model.hpp) for its layout and offload: `resident` — its parameters, gradients and optimizer states, less
// the buffers of spilled blocks — held from its start to the sweep's end; `step` — the activations, the workspace and
// a spilled member's two block buffers (parameters and gradients) — held while a step of it is in flight.
struct MemberDeviceBytes {
  std::vector<std::uint64_t> resident, step;  // [slot]
  bool spilled = false;                       // its blocks wait in host memory (--offload spill...)
};
MemberDeviceBytes member_device_bytes(const Setup& setup);

// The slots' devices: `slots` slots of `slot_ranks` ranks, on one device of `capacity` bytes for them all (`shared`:
// in-process ranks share one simulated device) or one each (a process each), each rank's holding `per_rank` bytes
// before any member (its GEMM engine's workspace).
struct SlotDevices {
  std::uint64_t capacity = 0;
  int slots = 1, slot_ranks = 1;
  bool shared = false;
  std::uint64_t per_rank = 0;
};

// What a device keeps back from the members for what the memory model does not count — the caching pool's rounding
// of each buffer, the in-process exchanges' staging areas, the collectives' buffers —: 1/16 of its capacity.
inline constexpr std::uint64_t kDeviceReserveShare = 16;

// The most members a sweep may have with a step in flight at once (LoopOptions::in_flight, >= 1) so that its devices
// hold what they need — the members' resident bytes and the largest steps in flight on each slot (each slot's summed
// apart: an upper bound), the ranks' own bytes, within the capacity less its reserve —: `in_flight` where given (> 0)
// and it fits, else the most that fit (every member where all do, 0 returned as "all"). optimus::Error naming the sweep
// file (`where`), the bytes and the capacity where a given --in-flight does not fit (and how many do), or where not
// even one member's step fits beside every member's resident bytes (then spill, more slots or a larger device).
int admitted_in_flight(const std::string& where, const std::vector<std::string>& names,
                       const std::vector<MemberDeviceBytes>& members, const SlotDevices& devices, int in_flight);

// train_gpt's run of `setup` on a simulated device of `capacity` bytes (--device-memory), its ranks' on one device
// where `shared` (in-process), else each rank's on its own, each rank's GEMM engine holding `per_rank` bytes: throws
// the same optimus::Error on every rank, naming the bytes, where the run with its step in flight needs more (it failed
// on its first buffer: "requested 8 bytes ... 0 bytes free"). A guard, not a promise: what the model does not count
// (the caching pool's rounding, the exchanges' staging) is the device's to refuse as it runs.
void check_device_memory(const Setup& setup, std::uint64_t capacity, bool shared, std::uint64_t per_rank);

}  // namespace optimus::apps
