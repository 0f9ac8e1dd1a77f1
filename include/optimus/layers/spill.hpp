// Model spilling (HYDRA's, with double buffering): a GPT's transformer blocks keep their parameters and gradients in
// page-locked host memory, and the device holds at most two blocks' worth at once, in two slots. Optionally the
// activations the blocks save for backward go to host memory too (asynchronous activation offload). The GPT drives it
// (Gpt(place, config, schedule, Spill), model/gpt.hpp) for each chunk of a stage, a pass being one F or B operation
// over the chunk's blocks; docs/offload.md has the formulas and the measurements (for a model of one stage).
//
// Residency. Block l runs in slot l mod 2 (one slot for a one-block model). Before block l computes, its values are
// uploaded into its slot (forward and backward; also its gradients before backward, or the slot's gradients zeroed
// when the block's have been zeroed since they last came back) and the block's tensors are exchanged with the slot's:
// the block then computes on the device as any block does, and parameters() of a resting block name its host memory.
// The upload of the pass's next block (l + 1 forward, l - 1 backward) runs on its own stream while block l computes;
// after block l's backward its gradients go home on a third stream while block l - 1 computes:
//
//   up stream      values[l+1] ->slot          values[l+2] ->slot          (forward; each waits for its slot's
//   compute        |  block l  |               |  block l+1  |              last block to finish)
//
//   up stream      values, grads[l-1] ->slot   values, grads[l-2] ->slot   (backward; each also waits for its slot's
//   compute        |  block l backward  |      |  block l-1 backward  |      gradients to have gone home)
//   down stream                          grads[l] -> host           grads[l-1] -> host
//
// A slot keeps the values it holds for the rest of the call (a train_step's micro-batches and its backward find the
// blocks at the turn already there); every call of the model ends with all copies done and the slots forgotten, so the
// optimizer may update the blocks' host memory between calls. The slots' device memory is taken from the device's pool
// at a call's first upload and given back when the call ends: between calls a spilled model holds none of it, so
// models that take turns on one device (a sweep's members, sweep/runtime.hpp) share it.
//
// Activations (Spill::parameters_and_activations). After block l's training forward (every block but the last), each
// tensor of its context is copied to page-locked host memory on the down stream and the context holds the host copy;
// block l's device memory is released once block l+1's forward has been queued, after that copy (so the copy of block
// l overlaps the forward of block l+1). Before block l's backward its context comes back on the up stream, prefetched
// while block l+1's backward runs. A context on the host is any other context: it may be dropped, or backward may take
// it later (several may be in flight).
//
// Per step with m micro-batches, L >= 1 blocks of P local parameters of t bytes each (transfers() counts exactly):
//   up   = t*P*(L + (2m - 1)*max(L - 2, 0))  values  +  t*P*(m - 1)*L  gradients     + m*(L - 1)*B  activations
//   down = t*P*m*L  gradients                                                        + m*(L - 1)*B  activations
// with B = block_saved_bytes (recompute.hpp) when activations spill. Device memory per rank: min(L, 2) slots of 2*t*P
// bytes (values and gradients) instead of L blocks' 2*t*P; the blocks' activations peak at
//   max(2B + X, B + tail)   (L >= 2; X: the transient context of full recomputation, block_saved_bytes(none), else 0;
//                            tail: ln_f's and the head's contexts)
// instead of L*B + max(X, tail). (With T = float and bf16 GEMMs, GELU's f32 input beside its bf16 copy adds
// 4*N*ffn/q^2 to X, and the head's f32 tensors beside its saved bf16 ones add to the tail.)
//
// The grid must be on a device (a grid on the host is refused: everything is host memory there already).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "optimus/core/copy_streams.hpp"
#include "optimus/core/pinned_memory.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus {

// What a spilled GPT keeps in host memory.
enum class Spill { none, parameters, parameters_and_activations };

// The formulas above, per rank. One step's copies for `layers` blocks of `block_parameters` local elements of `word`
// bytes each, `micro_batches` micro-batches and `block_activations` bytes of saved activations per block (0 unless
// they spill).
TransferBytes spill_step_transfers(std::int64_t layers, std::int64_t block_parameters, std::size_t word,
                                   std::int64_t micro_batches, std::int64_t block_activations);
// The device's peak of saved activations (the blocks', ln_f's and the head's) with `layers` blocks of `block` bytes
// each, `transient` bytes more while one block computes (full recomputation's context: block_saved_bytes(none), else
// 0) and `tail` bytes of ln_f's and the head's contexts (head_saved_bytes): with the blocks' activations spilled or not.
std::int64_t spill_activation_peak(std::int64_t layers, std::int64_t block, std::int64_t transient, std::int64_t tail,
                                   bool activations_spill);

template <class T>
class BlockSpill {
 public:
  // A spill for a model on `grid` (placed on a device, else optimus::Error); `what` is not Spill::none.
  BlockSpill(const Grid& grid, Spill what);
  ~BlockSpill();
  BlockSpill(const BlockSpill&) = delete;
  BlockSpill& operator=(const BlockSpill&) = delete;

  // Where the blocks are built: page-locked host memory, counted by the grid's tracker as host bytes.
  ParameterTags home();
  // Takes the blocks' tensors ([blocks][parameters], each block's parameter_storage; built at home(), all of one shape)
  // and makes the device slots. Any block that lists its storage spills: the 2D one or the 1D baseline's.
  void attach(std::vector<std::vector<ParameterStorage<T>>> blocks);

  // One pass over the blocks: forward (0, 1, ..., L-1; `contexts` the training forward's, null for inference) or
  // backward (L-1, ..., 0, consuming `contexts`). enter(l) before block l's work is queued, leave(l) after it.
  enum class Direction { forward, backward };
  void begin(Direction direction, std::vector<BlockContext<T>>* contexts);
  void enter(std::size_t l);
  void leave(std::size_t l);
  // The end of a call: every block back home (also after an error), every copy done, the slots forgotten. Never
  // throws when `unwinding` (an error is already on its way: a failure here is logged).
  void finish(bool unwinding);
  // The blocks' gradients were zeroed at home (Gpt::zero_grad): the next backward zeroes its slot's instead of
  // uploading zeros.
  void gradients_zeroed();

  Spill what() const { return what_; }
  std::size_t slots() const { return slots_.size(); }
  // What the copies moved so far (exact; the formulas above), and the streams they ran on (for a timeline).
  TransferBytes transfers() const { return copies_.moved(); }
  const CopyStreams& copies() const { return copies_; }
  // The page-locked memory of offloaded activations (its raw allocations stop after the first step).
  const PinnedMemoryPool& activation_memory() const { return activation_memory_; }

 private:
  struct Slot {
    std::vector<Tensor<T>> values, grads;  // [parameters] on the device, a block's shapes
    std::int64_t holds = -1;               // the block whose values `values` hold (-1: none)
    std::int64_t resident = -1;            // the block whose tensors are exchanged with this slot's (-1: none)
    bool with_grads = false;               // ... gradients included
    std::unique_ptr<DeviceEvent> uploaded, computed, drained;
  };
  // A context's tensors whose copy to the other memory is in flight: kept until it is known done.
  struct Parked {
    std::vector<Tensor<T>> t;
    std::vector<Tensor<bf16>> halves;
  };
  Slot& slot_of(std::size_t l) { return slots_[l % slots_.size()]; }
  void prefetch(std::size_t l);
  void exchange(std::size_t l, Slot& slot, bool grads);
  void stash_activations(std::size_t l);  // after block l's training forward
  void fetch_activations(std::size_t l);  // ahead of block l's backward
  void move_context(std::size_t l, bool to_host);
  void release_parked(std::size_t l, const DeviceEvent& copied);
  void finish_now();

  Grid grid_;
  Spill what_;
  DeviceRuntime* runtime_;
  // home_ holds the blocks' parameters and gradients; activation_memory_ the contexts on the host.
  PinnedHostMemory home_;
  PinnedMemoryPool activation_memory_;
  CopyStreams copies_;
  std::vector<std::vector<ParameterStorage<T>>> storage_;  // [blocks][parameters]
  std::vector<bool> grads_zero_;                            // [blocks]
  std::vector<Slot> slots_;
  Direction direction_ = Direction::forward;
  std::vector<BlockContext<T>>* contexts_ = nullptr;
  std::vector<bool> prefetched_;                               // [blocks] in this pass
  std::vector<Parked> parked_;                                 // [blocks]
  std::vector<std::unique_ptr<DeviceEvent>> stashed_, fetched_;  // [blocks]: a context's copy down, up
  std::unique_ptr<DeviceEvent> mark_;                          // a point of the compute stream, for the up stream
};

extern template class BlockSpill<float>;
extern template class BlockSpill<double>;

}  // namespace optimus
