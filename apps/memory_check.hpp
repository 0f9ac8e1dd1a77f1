// train_gpt's memory check: before anything large is allocated, what the run will need on this host against what the
// host has, so that a run too large for the machine stops with one line naming the bytes instead of meeting the
// kernel's OOM killer minutes later (a device's own allocator already refuses with the request and what is free).
#pragma once

#include <cstdint>

#include "optimus/comm/communicator.hpp"
#include "optimus/plan/layout.hpp"

namespace optimus::apps {

// Bytes this process may still allocate: /proc/meminfo's MemAvailable, or less where its cgroup (v2) limits it.
std::uint64_t host_memory_available();

// Collective over `world`: throws the same optimus::Error on every rank where the ranks on this host need more than
// it has. Their need: each rank's host bytes by the planner's memory model (plan/memory_model.hpp) for `training`,
// and for the first step's fp64 check of `check_layers` blocks (reference_check.hpp) laid out as `training` without
// offload or recomputation, that on every rank plus the whole check model unsharded on rank 0 (the reference),
// whichever phase is larger. A layout with a device counts its host-side bytes only.
void check_host_memory(Communicator& world, const plan::Layout& training, const plan::Workload& workload,
                       std::int64_t check_layers, bool has_device);

}  // namespace optimus::apps
