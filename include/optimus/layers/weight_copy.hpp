// optimus::WeightCopy: the bf16 compute copy of an f32 weight block under mixed precision, as Megatron keeps one.
//
// A Linear2D on a grid whose GEMM math is bf16 multiplies its weight in bf16 (and the LM head wte): without a copy
// every product (the forward's x W, the backward's dY W^T) casts the f32 master block first, a separate kernel on the
// step's path. With one, AdamW's update kernel writes the new bf16 values beside the new f32 master
// (ops::adamw_update's fused form), and the products take the copy as it is: the same bits as the cast (both round to
// nearest even), no cast kernel.
//
// Staleness is ruled out by who may write the master: the copy is current only after the fused update wrote it, or
// after current() cast it itself. Everything else that can reach the master — a layer's parameters() and
// parameter_storage() (loading, initialising, checkpoints, resharding, spilling take them there), init_parameter and
// load_parameter, and an AdamW update that does not write the copy (moments offloaded and updated on the host, which
// uploads the master) — invalidates it, and the next product casts once more.
#pragma once

#include <memory>

#include "optimus/core/dtype.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/summa.hpp"

namespace optimus {

class WeightCopy {
 public:
  // An unwritten copy of a block of `shape` where `tag` says (the master's memory, counted as parameters): not current.
  WeightCopy(const Shape& shape, const MemoryTag& tag);

  // The copy with the master's values: as it is when current, else `master` [shape] cast into it on `queue` first.
  TensorView<const bf16> current(TensorView<const float> master, const ops::Queue& queue);
  // For the optimizer's fused update, which writes the master and this copy together: the copy to write, current from
  // then on (the update is queued before any product that reads it).
  TensorView<bf16> written_with_master();
  // Something may write the master other than the fused update: the next current() casts.
  void invalidate() { current_ = false; }

 private:
  Tensor<bf16> copy_;
  bool current_ = false;
};

// The copy a layer keeps of its weight `w` (kept where `tag` says) on `grid`: under mixed precision (T = float, the
// grid's GEMM math bf16) and with the master where the grid keeps its parameters, else null (a spilled block's master
// lives in host memory: it is cast per product). On the heap, so that ParameterRef::compute stays valid when the layer
// moves.
template <class T>
std::unique_ptr<WeightCopy> weight_copy_for(const Grid& grid, const DistMatrix<T>& w, const MemoryTag& tag);
// w as SUMMA products take it: `copy` (made current) when there is one, else w itself.
template <class T>
SummaOperand<T> weight_operand(const DistMatrix<T>& w, WeightCopy* copy);
// AdamW on a shard (ops::adamw_update) and, where `copy` has data (a WeightCopy's written_with_master(), or the slice of
// it that the shard is: T = float), the copy in the same pass; a default view: the update alone.
template <class T>
void adamw_update_with(TensorView<T> value, TensorView<const T> grad, TensorView<T> m, TensorView<T> v,
                       const AdamWStep& s, TensorView<bf16> copy, const ops::Queue& queue);

}  // namespace optimus
