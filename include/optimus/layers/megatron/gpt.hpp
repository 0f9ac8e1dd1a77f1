// optimus::megatron::Gpt1D: the GPT-2 of the 1D (Megatron-LM) baseline on a Group of p ranks: Embedding1D
// (vocab-parallel wte, replicated wpe), `layers` TransformerBlock1D, a replicated ln_f, and LmHead1D (tied to wte,
// vocab-parallel cross-entropy). Activations [N, h] are replicated on the p ranks. The same model as Gpt2D: the same
// GPT-2 parameter names, initialization, dropout masks and loss, so the reference checks both and checkpoints move
// between them.
//
// Communication per training step (N = b*s tokens): forward, one all-reduce of [N, h] in the embedding, two per block,
// and in the head one of [N] (max) and one of [2N] (sum of exp, target logit); backward, two of [N, h] per block and
// one in the head.
//
// Contexts, micro-batches and recomputation work as in Gpt2D. The model spans one tensor-parallel group: there are no
// data-parallel replicas here. Requirements, checked at construction: p divides heads, ffn and the stored vocabulary;
// heads divides hidden.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/megatron/block.hpp"
#include "optimus/layers/megatron/embedding.hpp"
#include "optimus/layers/megatron/lm_head.hpp"

namespace optimus::megatron {

// validate(config), then what a group of p ranks needs (Gpt1D's rules, whole or cut into pipeline stages): p divides
// heads and ffn; optimus::Error otherwise.
void validate_for_group(const GptConfig& config, int p);

template <class T>
class Gpt1D {
 public:
  // Parameters start from the shared initialization rule (the same model as Gpt2D and the reference).
  Gpt1D(const Group& group, const GptConfig& config);

  using Context = GptContext<T>;

  // tokens, targets: the batch, b*s ids row-major [b, s]. Returns the mean cross-entropy; fills `saved`.
  double forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                 std::uint64_t step, Context& saved);
  // Accumulates every parameter's gradient; frees the saved activations.
  void backward(Context saved);
  // One step's forward and backward in `micro_batches` micro-batches of batch/m sequences (m must divide the batch);
  // returns the whole batch's mean cross-entropy. Gradients accumulate into what they hold (zero_grad first).
  double train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                    std::uint64_t step, std::int64_t micro_batches);
  // Evaluation: the mean cross-entropy without dropout, saving nothing.
  double evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch);

  std::vector<ParameterRef<T>> parameters();
  // As Gpt2D: full GPT-2 tensors by name in; every parameter (or gradient) gathered over the group out.
  void load_global(const std::map<std::string, GlobalMatrix>& tensors);
  std::map<std::string, GlobalMatrix> gather(bool gradients);
  void zero_grad();
  void set_recompute(std::int64_t layer, Recompute policy);
  void set_recompute(Recompute policy);

  const GptConfig& config() const { return config_; }
  const Group& group() const { return group_; }

 private:
  double run(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
             std::int64_t mean_over, const Pass& pass, Context& saved);
  // backward; wte's gradient completed (the head's part added) after the last micro-batch.
  void run_backward(Context saved, bool last_micro_batch);

  Group group_;
  GptConfig config_;
  Embedding1D<T> embedding_;
  std::vector<std::unique_ptr<TransformerBlock1D<T>>> blocks_;
  LayerNorm2D<T> ln_f_;  // on the group's one-rank grid: replicated
  LmHead1D<T> head_;
  DistMatrix<T> head_wte_grad_;  // the head's part of wte's gradient [V/p, h] over a step
};

extern template class Gpt1D<float>;
extern template class Gpt1D<double>;

}  // namespace optimus::megatron
