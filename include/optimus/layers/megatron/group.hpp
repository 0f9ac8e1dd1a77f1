// optimus::megatron — the Megatron-LM style 1D tensor-parallel baseline (Shoeybi et al., 2019), kept in the
// library so that 1D and 2D are measured side by side. Activations [N, h] are replicated on the p ranks of
// a tensor-parallel group; weights are split by columns (column-parallel) or rows (row-parallel).
//
// A Group is the p ranks plus a one-rank grid of this rank alone, on which the replicated activations live
// as DistMatrix (q = 1: the local block is the whole matrix) and which counts this rank's memory. Like Grid, it is a
// cheap handle: copies (and the layers built on it) share it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus::megatron {

class Group {
 public:
  // Collective over `tp`: the tensor-parallel group (e.g. the world). `tp` must outlive the Group and its layers.
  explicit Group(Communicator& tp);
  // Collective over `world` of stages * p ranks: this rank's group in a pipeline of `stages` 1D stages. World rank r is
  // rank r % p of stage r / p; local() is then a q = 1 grid with pp = stages whose stage() is this rank's and whose
  // pipe() joins the ranks of the same group rank, one per stage (the pipeline of optimus/model/gpt.hpp's Gpt1D).
  // Throws optimus::Error on every rank unless `stages` divides the world.
  static Group pipeline_stage(Communicator& world, int stages);
  // The same with data-parallel replicas: `world` is replicas * stages * p ranks, rank r of replica r / (stages * p),
  // stage (r / p) % stages, group rank r % p (as Grid::create lays out 2D ranks); local() is a q = 1 grid with those
  // stages and replicas, whose dp_comm() joins the ranks of the same stage and group rank. Throws optimus::Error on
  // every rank unless replicas * stages divides the world.
  static Group pipeline_stage(Communicator& world, int stages, int replicas);

  Communicator& tp() const { return *tp_; }
  int size() const { return tp_->size(); }
  int rank() const { return tp_->rank(); }
  const Grid& local() const { return local_; }  // q = 1 grid of this rank alone
  // The job's mesh as this group sees it: the local grid's replicas and stages, 1D tensor parallelism over size().
  Mesh mesh() const {
    return {.dp = local_.dp(), .pp = local_.pp(), .tensor = TensorParallel::one_d, .side = size()};
  }
  MemoryTracker& memory() const { return local_.memory(); }
  // Where the layers made on this group keep their tensors and run their local work (Grid::place_on on the local
  // grid). `tp` must move buffers there (Communicator::takes_buffers_on), or optimus::Error names it.
  void place_on(DeviceMemory* device, const ops::Queue& queue) const;
  // A handle of this group whose local grid executes as `execution` says (Grid::with); this one keeps its own.
  Group with(const Execution& execution) const {
    Group out = *this;
    out.local_ = local_.with(execution);
    return out;
  }

 private:
  Group(std::shared_ptr<Communicator> tp, std::shared_ptr<Communicator> pipe, int stages);

  Communicator* tp_;
  std::shared_ptr<Communicator> owned_tp_;  // pipeline_stage's split of the world; null otherwise
  std::shared_ptr<Communicator> self_;      // the communicator under local_: this rank alone, or the pipeline's ranks
  Grid local_;
};

// In place: m's local block summed over the group's ranks (one all-reduce of its elements; Megatron's f and g).
template <class T>
void all_reduce_sum(const Group& group, DistMatrix<T>& m);

// params[from ..] as tensors every rank of the group holds whole (a LayerNorm or linear on the group's one-rank
// grid): their layouts become Sharding::Kind::replicated, so that gathering reads them from one rank and AdamW counts them once.
template <class T>
void mark_replicated(std::vector<ParameterRef<T>>& params, std::size_t from, const Group& group) {
  for (std::size_t k = from; k < params.size(); ++k) {
    Sharding& l = params[k].layout;
    l = Sharding::replicated(l.rows, l.cols, group.size(), group.rank());  // (a vector's rows: 1)
  }
}

}  // namespace optimus::megatron
