// optimus::Gpt2D: a GPT-2 on the q x q grid: Embedding2D, `layers` TransformerBlock2D, ln_f, and the LM head
// tied to wte with vocab-parallel cross-entropy. With dp > 1 replicas, each replica trains on its own batch
// and backward averages gradients (and forward the loss) over the data-parallel communicator, which equals
// one replica on the concatenated batch.
//
// Training: forward(..., saved) fills a Context (the embedding's, every block's, ln_f's and the head's) and
// backward(saved) consumes it; any number may be alive. train_step splits the replica's batch into m micro-batches
// of b/m sequences, runs forward and backward per micro-batch with gradients accumulated, and reduces them over the
// replicas during the last micro-batch's backward: loss and gradients are those of the whole batch. Each block
// saves what its recomputation policy says (set_recompute; none by default).
//
// Spilling (Gpt2D(grid, config, Spill), layers/spill.hpp): the blocks' parameters and gradients live in page-locked
// host memory and move through two device slots while the model computes (and, with Spill::parameters_and_activations,
// the blocks' saved activations go to host memory between forward and backward); the results are bitwise those without
// spilling. parameters() then names the blocks' host memory (an optimizer updates them there: layers/adamw.hpp).
//
// Requirements, checked at construction with errors naming the values: q divides heads, vocab and max_seq;
// q*q divides hidden and ffn (biases and LayerNorm parameters are split q*q ways); heads divides hidden.
// forward() checks that q divides the batch, the sequence fits max_seq and every token id is in range.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optimus/layers/adamw.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/layers/embedding.hpp"
#include "optimus/layers/lm_head.hpp"
#include "optimus/layers/spill.hpp"

namespace optimus {

template <class T>
class Gpt2D {
 public:
  // Parameters start from the shared initialization rule (the same model for every q).
  Gpt2D(const Grid& grid, const GptConfig& config);
  // The same with the blocks spilled to host memory as `spill` says (Spill::none: as above); spilling needs a grid on a
  // device.
  Gpt2D(const Grid& grid, const GptConfig& config, Spill spill);

  using Context = GptContext<T>;

  // tokens, targets: the replica's batch, b*s ids row-major [b, s]. Returns the mean cross-entropy (averaged over
  // replicas) and fills `saved` with what backward needs.
  double forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                 std::uint64_t step, Context& saved);
  // Accumulates every parameter's gradient (then averaged over replicas, each layer's bucket reduced while
  // earlier layers run backward); frees the saved activations. Each call averages what the gradients hold, so any
  // number of contexts may be consumed; train_step reduces once per step instead.
  void backward(Context saved);
  // One step's forward and backward over the replica's batch in `micro_batches` micro-batches of batch/m sequences
  // (m must divide the batch, and q the micro-batch); returns the whole batch's mean cross-entropy (averaged over
  // replicas). Gradients accumulate into what they hold (zero_grad first) and are averaged over replicas.
  double train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                    std::uint64_t step, std::int64_t micro_batches);
  // Evaluation: the mean cross-entropy without dropout, saving nothing (averaged over replicas).
  double evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch);
  // Inference: logits [b*s, vocab], no dropout, nothing saved.
  DistMatrix<T> logits(const std::vector<int>& tokens, std::int64_t batch);

  std::vector<ParameterRef<T>> parameters();
  // Loads full GPT-2 tensors by name (vectors as 1 x n or n x 1); unknown names and wrong shapes throw.
  // Tensors not named keep their values.
  void load_global(const std::map<std::string, GlobalMatrix>& tensors);
  // Collective: every parameter (or gradient) as a full GPT-2 tensor.
  std::map<std::string, GlobalMatrix> gather(bool gradients);
  void zero_grad();
  // What block `layer`'s training forwards save from now on (or every block's); see recompute.hpp.
  void set_recompute(std::int64_t layer, Recompute policy);
  void set_recompute(Recompute policy);

  const GptConfig& config() const { return config_; }
  const Grid& grid() const { return grid_; }
  // The spill and what it moved; null unless spilled.
  const BlockSpill<T>* spill() const { return spill_.get(); }

 private:
  // This replica's mean over mean_over tokens (not reduced over replicas) of the pass's batch.
  double run(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
             std::int64_t mean_over, const Pass& pass, Context& saved);
  // backward; with `reduce`, gradients are averaged over replicas (overlapped with the backward).
  void run_backward(Context saved, bool reduce);

  Grid grid_;
  GptConfig config_;
  std::unique_ptr<BlockSpill<T>> spill_;  // before the blocks: their home memory outlives them
  Embedding2D<T> embedding_;
  std::vector<std::unique_ptr<TransformerBlock2D<T>>> blocks_;
  LayerNorm2D<T> ln_f_;
  LmHead2D<T> head_;
  // The LM head's part of wte's gradient, summed over a step's micro-batches apart from the embedding's and added to
  // it once, at the step's (or backward's) end: the order a pipeline, whose head and embedding may sit on different
  // stages, can follow too (docs/pipeline.md), so that both give the same bits.
  DistMatrix<T> head_wte_grad_;
};

extern template class Gpt2D<float>;
extern template class Gpt2D<double>;

}  // namespace optimus
