// optimus::Grid: a world of dp*q*q ranks seen as dp replicas of a q x q process grid (DESIGN.md section 3).
//
// World rank r has data-parallel index r / (q*q), grid row i = (r % (q*q)) / q and grid column j = r % q.
// For q = 2, dp = 1:      column 0   column 1
//               row 0     rank 0     rank 1
//               row 1     rank 2     rank 3
// The Grid owns its communicators: row (the q ranks with the same i, ranked by j), column (same j, ranked
// by i), grid (the q*q ranks of one replica, ranked i*q + j) and data-parallel (same (i, j), ranked by
// replica), and the MemoryTracker of this rank. It is move-only; its state lives on the heap, so moving a Grid
// keeps matrices built on it valid.
#pragma once

#include <memory>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/timeline.hpp"

namespace optimus {

namespace detail {
struct GridState {
  int q = 1;
  int dp = 1;
  int row_index = 0;  // i
  int col_index = 0;  // j
  int dp_index = 0;
  std::unique_ptr<Communicator> row;
  std::unique_ptr<Communicator> col;
  std::unique_ptr<Communicator> grid;
  std::unique_ptr<Communicator> dp_comm;
  std::unique_ptr<MemoryTracker> memory;  // counts this rank's tensors made on the grid
  bool overlap = true;                     // SUMMA overlaps communication with computation
  Timeline* timeline = nullptr;            // where SUMMA records its GEMMs and waits, if anywhere
  DeviceMemory* device = nullptr;          // where matrices and workspaces live (null: host memory)
  ops::Queue queue;                        // where their local work runs on the device

  // The tag of this rank's tensors of `kind`: counted by `memory`, placed on `device`.
  MemoryTag tag(MemoryKind kind) const { return {memory.get(), kind, device}; }
};
}  // namespace detail

class Grid {
 public:
  // Collective over `world`. Throws optimus::Error on every rank if world.size() is not dp*q*q.
  static Grid create(Communicator& world, int q);
  // The check create() makes first: q >= 1 and a world of dp*q*q ranks, or optimus::Error naming both.
  static void check_world_size(int world_size, int q);

  Grid(Grid&&) noexcept = default;
  Grid& operator=(Grid&&) noexcept = default;
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;
  ~Grid() = default;

  int q() const { return state_->q; }
  int dp() const { return state_->dp; }
  int row_index() const { return state_->row_index; }
  int col_index() const { return state_->col_index; }
  int dp_index() const { return state_->dp_index; }

  // Communicating does not change the grid; these are handles, like MPI communicators.
  Communicator& row() const { return *state_->row; }
  Communicator& col() const { return *state_->col; }
  Communicator& grid() const { return *state_->grid; }
  Communicator& dp_comm() const { return *state_->dp_comm; }

  // SUMMA overlaps the next step's panel broadcasts and the previous step's reduction with the current
  // step's GEMM (default), or runs them blocking, for debugging and measurement. Results are bitwise identical.
  // Every rank of the grid must use the same setting.
  void set_overlap(bool overlap) { state_->overlap = overlap; }
  bool overlap() const { return state_->overlap; }
  // Records SUMMA's GEMMs (compute) and waits for communication (exposed communication) into `timeline`
  // (nullptr: nothing is recorded). The timeline must outlive its use.
  void set_timeline(Timeline* timeline) { state_->timeline = timeline; }

  // The tracker of this rank's DistMatrix memory (and of everything the layers allocate on this grid).
  MemoryTracker& memory() const { return *state_->memory; }
  // How tensors of `kind` made for this grid are counted and placed.
  MemoryTag tag(MemoryKind kind) const { return state_->tag(kind); }

  // Places the matrices and layer workspaces made on this grid from now on in `device` (null: host memory), with
  // their local work ordered on `queue` (its stream and GEMM engine: RankDevice::queue()). Both must outlive their
  // use. The grid's communicators must move buffers there (Communicator::takes_buffers_on): an in-process world
  // stages on the device only if set_in_process_staging was called before Grid::create (RankDevice::grid does
  // both); otherwise optimus::Error names the communicator. Every rank of the grid must place alike.
  void place_on(DeviceMemory* device, const ops::Queue& queue);
  // How the f32 products made on this grid compute (ops::GemmMath): with bf16 (mixed precision) SUMMA moves its
  // panels in bf16 and every GEMM takes bf16 operands with f32 accumulation, while parameters, gradients,
  // optimizer state and activations stay f32. The default is the math of the queue given to place_on (f32).
  // Every rank of the grid must use the same setting.
  void set_gemm_math(ops::GemmMath math) { state_->queue.math = math; }
  ops::GemmMath gemm_math() const { return state_->queue.math; }
  DeviceMemory* device() const { return state_->device; }
  const ops::Queue& queue() const { return state_->queue; }

  const detail::GridState* state() const { return state_.get(); }

 private:
  explicit Grid(std::unique_ptr<detail::GridState> state) : state_(std::move(state)) {}
  std::unique_ptr<detail::GridState> state_;
};

}  // namespace optimus
