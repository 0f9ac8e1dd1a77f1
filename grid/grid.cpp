// Grid::create: checks the world size, takes the CPU GEMM backend's working memory (agreed over the world), then
// splits the world into row, column, grid, data-parallel and pipeline communicators. The state behind the handle: the
// topology (fixed) and the placement; each handle holds its own Execution.
#include "optimus/grid/grid.hpp"

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/device_memory.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/grid/mesh.hpp"

namespace optimus {
namespace {

// What create() fixes.
struct Topology {
  Mesh mesh;  // the grid's dimensions: its replicas, stages and q
  int row_index = 0;  // i
  int col_index = 0;  // j
  int dp_index = 0;
  int stage = 0;
  std::unique_ptr<Communicator> row, col, grid, dp_comm, pipe;
};

// Where the grid's matrices live, set once by place_on.
struct Settings {
  DeviceMemory* device = nullptr;  // where matrices and workspaces live (null: host memory)
  ops::Queue queue;                // where their local work runs on the device
};

}  // namespace

struct Grid::State {
  Topology topology;
  MemoryTracker memory;  // counts this rank's tensors made on the grid
  Settings settings;
};

Grid::State& Grid::state() const {
  OPTIMUS_CHECK(state_ != nullptr, "Grid: this handle is empty (moved from); use the Grid it was moved to");
  return *state_;
}

const Mesh& Grid::mesh() const { return state().topology.mesh; }
int Grid::q() const { return state().topology.mesh.side; }
int Grid::dp() const { return state().topology.mesh.dp; }
int Grid::row_index() const { return state().topology.row_index; }
int Grid::col_index() const { return state().topology.col_index; }
int Grid::dp_index() const { return state().topology.dp_index; }
int Grid::pp() const { return state().topology.mesh.pp; }
int Grid::stage() const { return state().topology.stage; }
Communicator& Grid::row() const { return *state().topology.row; }
Communicator& Grid::col() const { return *state().topology.col; }
Communicator& Grid::grid() const { return *state().topology.grid; }
Communicator& Grid::dp_comm() const { return *state().topology.dp_comm; }
Communicator& Grid::pipe() const { return *state().topology.pipe; }
MemoryTracker& Grid::memory() const { return state().memory; }
MemoryTag Grid::tag(MemoryKind kind) const {
  State& s = state();
  return {.tracker = &s.memory, .kind = kind, .device = s.settings.device};
}

Grid Grid::with(const Execution& execution) const {
  Grid out(state_);
  state();  // an empty handle stays refused
  out.execution_ = execution;
  return out;
}
ops::GemmMath Grid::gemm_math() const { return execution_.gemm_math.value_or(state().settings.queue.math); }
DeviceMemory* Grid::device() const { return state().settings.device; }
ops::Queue Grid::queue() const {
  ops::Queue q = state().settings.queue;
  q.math = gemm_math();
  q.timeline = execution_.timeline;  // the grid's operations on the CPU record into it too
  return q;
}

void Grid::check_world_size(int world_size, int q) { check_world_size(world_size, q, 1); }

void Grid::check_world_size(int world_size, int q, int pp) {
  OPTIMUS_CHECK(q >= 1, "Grid::create: q must be at least 1, got q = ", q);
  OPTIMUS_CHECK(pp >= 1, "Grid::create: pp (pipeline stages) must be at least 1, got pp = ", pp);
  const int p = q * q;
  if (pp == 1) {
    OPTIMUS_CHECK(world_size % p == 0, "Grid::create: world size ", world_size, " is not dp*q*q for q = ", q,
                  " (q*q = ", p, "); launch a multiple of ", p, " ranks");
  }
  OPTIMUS_CHECK(world_size % (pp * p) == 0, "Grid::create: world size ", world_size, " is not dp*pp*q*q for q = ", q,
                " and pp = ", pp, " (pp*q*q = ", pp * p, "); launch a multiple of ", pp * p, " ranks");
}

Grid Grid::create(Communicator& world, int q) { return create(world, q, 1); }

Grid Grid::create(Communicator& world, int q, int pp) {
  check_world_size(world.size(), q, pp);
  prepare_gemm_together(world);  // before any work, so that running out of memory later is an error
  const int p = q * q;
  auto s = std::make_shared<State>();
  Topology& t = s->topology;
  t.mesh = Mesh{.dp = world.size() / (pp * p), .pp = pp, .tensor = TensorParallel::two_d, .side = q};
  const Mesh::Coordinates at = t.mesh.of(world.rank());
  t.dp_index = at.replica;
  t.stage = at.stage;
  t.row_index = at.tensor_rank / q;
  t.col_index = at.tensor_rank % q;
  const int i = t.row_index, j = t.col_index;
  const int grid_id = t.dp_index * pp + t.stage;  // one q x q grid per replica and stage
  t.row = world.split(grid_id * q + i, j);
  t.col = world.split(grid_id * q + j, i);
  t.grid = world.split(grid_id, i * q + j);
  t.dp_comm = world.split(t.stage * p + i * q + j, t.dp_index);
  t.pipe = world.split(t.dp_index * p + i * q + j, t.stage);
  Grid grid(std::move(s));
  grid.state().settings.queue.scratch = grid.tag(MemoryKind::workspace);
  return grid;
}

void Grid::place_on(DeviceMemory* device, const ops::Queue& queue) const {
  State& s = state();
  const Device where = device_of(device);
  const std::pair<const char*, const Communicator*> comms[] = {
      {"row", s.topology.row.get()}, {"column", s.topology.col.get()}, {"grid", s.topology.grid.get()},
      {"data-parallel", s.topology.dp_comm.get()}, {"pipeline", s.topology.pipe.get()}};
  for (const auto& [name, comm] : comms) {
    OPTIMUS_CHECK(comm->takes_buffers_on(where), "Grid::place_on: the grid's ", name, " communicator (",
                  comm->backend(), ") cannot move ", name_of(where), " buffers; for an in-process world set its "
                  "staging on the device before Grid::create (RankDevice::grid does), or use device communicators "
                  "(distributed_grid)");
  }
  OPTIMUS_CHECK(where == Device::cpu || (queue.stream != nullptr && queue.stream->device() == where),
                "Grid::place_on: matrices on ", name_of(where), " need a ", name_of(where), " stream in the queue");
  OPTIMUS_CHECK(s.memory.current_total() == 0, "Grid::place_on: the grid already holds ", s.memory.current_total(),
                " bytes of matrices in ", name_of(device_of(s.settings.device)),
                " memory; place the grid before building matrices or layers on it");
  s.settings.device = device;
  s.settings.queue = queue;
  s.settings.queue.scratch = tag(MemoryKind::workspace);
}

}  // namespace optimus
