// optimus::megatron — the Megatron-LM style 1D tensor-parallel baseline (Shoeybi et al., 2019), kept in the
// library so that 1D and 2D are measured side by side. Activations [N, h] are replicated on the p ranks of
// a tensor-parallel group; weights are split by columns (column-parallel) or rows (row-parallel).
//
// A Group is the p ranks plus a one-rank grid of this rank alone, on which the replicated activations live
// as DistMatrix (q = 1: the local block is the whole matrix) and which counts this rank's memory. Like Grid, it is a
// cheap handle: copies (and the layers built on it) share it.
#pragma once

#include <memory>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::megatron {

class Group {
 public:
  // Collective over `tp`: the tensor-parallel group (e.g. the world). `tp` must outlive the Group and its layers.
  explicit Group(Communicator& tp);

  Communicator& tp() const { return *tp_; }
  int size() const { return tp_->size(); }
  int rank() const { return tp_->rank(); }
  const Grid& local() const { return local_; }  // q = 1 grid of this rank alone
  MemoryTracker& memory() const { return local_.memory(); }
  // Where the layers made on this group keep their tensors and run their local work, and how their f32 GEMMs
  // compute (Grid::place_on, Grid::set_gemm_math on the local grid). `tp` must move buffers there
  // (Communicator::takes_buffers_on), or optimus::Error names it.
  void place_on(DeviceMemory* device, const ops::Queue& queue) const;
  void set_gemm_math(ops::GemmMath math) const { local_.set_gemm_math(math); }

 private:
  Communicator* tp_;
  std::shared_ptr<Communicator> self_;  // the one-rank communicator under local_
  Grid local_;
};

// In place: m's local block summed over the group's ranks (one all-reduce of its elements; Megatron's f and g).
template <class T>
void all_reduce_sum(const Group& group, DistMatrix<T>& m);

}  // namespace optimus::megatron
