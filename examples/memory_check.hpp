// train_gpt's memory check: before anything large is allocated, what the run will need on this host against what the
// host has, so that a run too large for the machine stops with one line naming the bytes instead of meeting the
// kernel's OOM killer minutes later (a device's own allocator already refuses with the request and what is free).
#pragma once

#include <cstdint>

#include "optimus/comm/communicator.hpp"
#include "optimus/plan/layout.hpp"

namespace optimus::examples {

// Bytes this process may still allocate: /proc/meminfo's MemAvailable, or less where its cgroup (v2) limits it.
std::uint64_t host_memory_available();

// Collective over `world`: throws the same optimus::Error on every rank where the ranks on this host need more than
// it has. Their need: each rank's host bytes by the planner's memory model (plan/memory_model.hpp) for `training`,
// and for the first step's fp64 check of `check_layers` blocks (reference_check.hpp) laid out as `training` without
// offload or recomputation, that on every rank plus the whole check model unsharded on rank 0 (the reference),
// whichever phase is larger. A layout with a device counts its host-side bytes only.
void check_host_memory(Communicator& world, const plan::Layout& training, const plan::Workload& workload,
                       std::int64_t check_layers, bool has_device);

// A simulated device's capacity (--device-memory) against what the run needs there, before the first large
// allocation, so that a device too small is named with the model's bytes (it failed on the first buffer, "requested 8
// bytes ... 0 bytes free"): each rank's device bytes by the planner's memory model for `training` and its GEMM engine's
// `per_rank` workspace; every rank's on one device where `shared` (in-process ranks), else each rank's on its own.
// Throws the same optimus::Error on every rank where the need is above `capacity`. A guard, not a promise: what the
// model does not count (the caching pool's rounding, exchanges' staging) is the device's to refuse as it runs.
void check_device_memory(const plan::Layout& training, const plan::Workload& workload, std::uint64_t capacity,
                         bool shared, std::uint64_t per_rank);

}  // namespace optimus::examples
