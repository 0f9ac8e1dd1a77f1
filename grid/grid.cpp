// Grid::create: checks the world size, then splits the world into row, column, grid and data-parallel
// communicators.
#include "optimus/grid/grid.hpp"

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

}  // namespace optimus
