// optimus::Grid: a world of dp*pp*q*q ranks seen as dp replicas of a pipeline of pp stages, each stage a q x q
// process grid (docs/design.md, "Grid"; pp = 1 without a pipeline).
//
// World rank r has data-parallel index r / (pp*q*q), stage (r / (q*q)) % pp, grid row i = (r % (q*q)) / q and grid
// column j = r % q.
// For q = 2, dp = 1:      column 0   column 1         with pp = 2, stage 1 is ranks 4 .. 7, laid out the same:
//               row 0     rank 0     rank 1           rank (i, j) of stage 0 exchanges activation and gradient
//               row 1     rank 2     rank 3           blocks with rank (i, j) of stage 1 (its `pipe` peer)
//
// A Grid is a cheap handle (like an MPI communicator handle) to state it shares with every copy, and with every
// matrix and layer built on it: the state lives as long as the last of them, so moving, copying or destroying the
// Grid a model was built from never leaves the model dangling. A moved-from Grid is empty, and using it throws
// optimus::Error. The shared state:
//   * the topology, fixed by create(): q, dp, pp, this rank's (i, j), replica and stage, and the communicators — row
//     (the q ranks of its stage's grid with the same i, ranked by j), column (same j, ranked by i), grid (the q*q
//     ranks of its replica's stage, ranked i*q + j), data-parallel (same stage and (i, j), ranked by replica) and
//     pipeline (same replica and (i, j), ranked by stage: q*q pipelines side by side, so no block is gathered) — and
//     this rank's MemoryTracker;
//   * where matrices live (device, queue), set once by place_on, which refuses a grid that already holds matrices.
// Each handle also holds its Execution (grid/execution.hpp: SUMMA's overlap, the GEMM math, the finite checks, the
// timeline), a value fixed when the handle is made: create() gives the defaults, with() a handle of the same grid
// executing otherwise, and copies keep their source's. Matrices, layers and models keep the handle they were made
// with, so they execute as it says whatever other handles do. Saved state records what it depends on (the device and
// the GEMM math), and backward refuses a context saved under others (layers/context.hpp).
#pragma once

#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/timeline.hpp"
#include "optimus/grid/execution.hpp"
#include "optimus/grid/mesh.hpp"

namespace optimus {

class Grid {
 public:
  // Collective over `world`: create(world, q, 1).
  static Grid create(Communicator& world, int q);
  // Collective over `world`. Throws optimus::Error on every rank if world.size() is not dp*pp*q*q, or if a rank cannot
  // have the CPU GEMM backend's working memory (cpu::prepare_gemm, which it takes here, before any work).
  static Grid create(Communicator& world, int q, int pp);
  // The check create() makes first: q, pp >= 1 and a world of dp*pp*q*q ranks, or optimus::Error naming them.
  static void check_world_size(int world_size, int q);
  static void check_world_size(int world_size, int q, int pp);

  // Copies share the grid; a moved-from Grid is empty (every accessor below throws optimus::Error).
  Grid(const Grid&) = default;
  Grid& operator=(const Grid&) = default;
  Grid(Grid&& other) noexcept = default;
  Grid& operator=(Grid&& other) noexcept = default;
  ~Grid() = default;

  bool empty() const { return state_ == nullptr; }
  // Whether two handles name the same grid.
  bool same(const Grid& other) const { return state_ == other.state_; }

  // The topology: the grid's mesh (its replicas, stages and q; grid/mesh.hpp) and this rank's place in it.
  const Mesh& mesh() const;
  int q() const;
  int dp() const;
  int row_index() const;  // i
  int col_index() const;  // j
  int dp_index() const;
  int pp() const;     // pipeline stages
  int stage() const;  // this rank's, in [0, pp)
  // Communicating does not change the grid; these are handles, like MPI communicators.
  Communicator& row() const;
  Communicator& col() const;
  Communicator& grid() const;
  Communicator& dp_comm() const;
  Communicator& pipe() const;  // pipeline: rank s is (i, j) of stage s in this replica
  // The tracker of this rank's DistMatrix memory (and of everything the layers allocate on this grid).
  MemoryTracker& memory() const;
  // How tensors of `kind` made for this grid are counted and placed.
  MemoryTag tag(MemoryKind kind) const;

  // A handle of this grid whose work executes as `execution` says (every rank of the grid must use the same); this
  // handle and its copies keep theirs.
  Grid with(const Execution& execution) const;
  const Execution& execution() const { return execution_; }
  // This handle's execution, each setting resolved (grid/execution.hpp).
  bool overlap() const { return execution_.overlap; }
  bool check_finite() const { return execution_.check_finite; }
  Timeline* timeline() const { return execution_.timeline; }
  ops::GemmMath gemm_math() const;
  // Places the matrices and layer workspaces made on this grid in `device` (null: host memory), with their local work
  // ordered on `queue` (its stream and GEMM engine: RankDevice::queue()). Both must outlive their use. Refused, with
  // optimus::Error, once the grid holds matrices (place it before building on it), and when the grid's communicators
  // cannot move buffers there (Communicator::takes_buffers_on: an in-process world stages on the device only if
  // set_in_process_staging was called before Grid::create; RankDevice::grid does both).
  void place_on(DeviceMemory* device, const ops::Queue& queue) const;
  DeviceMemory* device() const;
  // Where this handle's local work runs: the placed queue in this handle's GEMM math, recording into its timeline.
  ops::Queue queue() const;

 private:
  struct State;
  explicit Grid(std::shared_ptr<State> state) : state_(std::move(state)) {}
  State& state() const;  // throws if empty

  std::shared_ptr<State> state_;
  Execution execution_;
};

}  // namespace optimus
