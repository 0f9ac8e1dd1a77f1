// Grid::create: checks the world size, then splits the world into row, column, grid and data-parallel
// communicators.
#include "optimus/grid/grid.hpp"

#include "optimus/core/device_memory.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

void Grid::check_world_size(int world_size, int q) {
  OPTIMUS_CHECK(q >= 1, "Grid::create: q must be at least 1, got q = ", q);
  const int p = q * q;
  OPTIMUS_CHECK(world_size % p == 0, "Grid::create: world size ", world_size, " is not dp*q*q for q = ", q,
                " (q*q = ", p, "); launch a multiple of ", p, " ranks");
}

Grid Grid::create(Communicator& world, int q) {
  check_world_size(world.size(), q);
  const int p = q * q;
  const int n = world.size();
  auto s = std::make_unique<detail::GridState>();
  const int r = world.rank();
  s->q = q;
  s->dp = n / p;
  s->dp_index = r / p;
  s->row_index = (r % p) / q;
  s->col_index = r % q;
  const int i = s->row_index;
  const int j = s->col_index;
  s->row = world.split(s->dp_index * q + i, j);
  s->col = world.split(s->dp_index * q + j, i);
  s->grid = world.split(s->dp_index, i * q + j);
  s->dp_comm = world.split(i * q + j, s->dp_index);
  s->memory = std::make_unique<MemoryTracker>();
  s->queue.scratch = s->tag(MemoryKind::workspace);
  return Grid(std::move(s));
}

void Grid::place_on(DeviceMemory* device, const ops::Queue& queue) {
  const Device where = device_of(device);
  const std::pair<const char*, const Communicator*> comms[] = {
      {"row", state_->row.get()}, {"column", state_->col.get()}, {"grid", state_->grid.get()},
      {"data-parallel", state_->dp_comm.get()}};
  for (const auto& [name, comm] : comms) {
    OPTIMUS_CHECK(comm->takes_buffers_on(where), "Grid::place_on: the grid's ", name, " communicator (",
                  comm->backend(), ") cannot move ", name_of(where), " buffers; for an in-process world set its "
                  "staging on the device before Grid::create (RankDevice::grid does), or use device communicators "
                  "(distributed_grid)");
  }
  OPTIMUS_CHECK(where == Device::cpu || (queue.stream != nullptr && queue.stream->device() == where),
                "Grid::place_on: matrices on ", name_of(where), " need a ", name_of(where), " stream in the queue");
  state_->device = device;
  state_->queue = queue;
  state_->queue.scratch = state_->tag(MemoryKind::workspace);
}

}  // namespace optimus
