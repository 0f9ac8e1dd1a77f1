// BERT's masked-language-model inputs (Devlin et al.): of a batch's positions, a share chosen to be predicted — each
// replaced by the mask id, by a random id, or kept, in BERT's proportions — and the targets the loss reads there.
// Every sequence with a position that may be chosen predicts at least one (BERT's data: max(1, round(n p)) of its n),
// so that a batch always has a loss.
//
// Every draw is a function of (seed, step, global sequence, position) alone (the counter-based generator,
// optimus/core/rng.hpp), so every layout — any grid, pipeline, micro-batches, data-parallel replica, a resumed run —
// masks the same positions with the same ids: a replica masking its sequences from `first_sequence` gets exactly the
// rows of the whole batch's masking.
//
//   const optimus::MaskedLm masking({.vocab = 30522, .seed = 7});  // BERT's defaults otherwise
//   optimus::MaskedBatch b = masking.mask(tokens, seq, step, first_sequence);  // tokens [sequences * seq]
//   // b.inputs: what the model reads; b.targets: the original id where chosen, MaskedLm::kIgnored elsewhere
#pragma once

#include <cstdint>
#include <vector>

namespace optimus {

// How positions are masked. The special ids are BERT's (bert-base-uncased: [PAD] 0, [CLS] 101, [SEP] 102, [MASK]
// 103); CLS, SEP and PAD positions are never chosen.
struct MaskedLmConfig {
  std::int64_t vocab = 30522;
  double probability = 0.15;   // of the other positions, the share chosen (in (0, 1))
  double mask_share = 0.8;     // of the chosen, the share replaced by mask_id
  double random_share = 0.1;   // of the chosen, the share replaced by a uniform random id in [0, vocab); the rest kept
  int pad_id = 0, cls_id = 101, sep_id = 102, mask_id = 103;
  std::uint64_t seed = 0;
};

struct MaskedBatch {
  std::vector<int> inputs;   // [sequences * seq]: the tokens, chosen positions replaced
  std::vector<int> targets;  // [sequences * seq]: the original id at chosen positions, MaskedLm::kIgnored elsewhere
};

class MaskedLm {
 public:
  static constexpr int kIgnored = -1;  // a target that is not predicted

  // optimus::Error naming the value unless vocab >= 1, every special id is in [0, vocab), 0 < probability < 1, and
  // the two shares are in [0, 1] with a sum of at most 1.
  explicit MaskedLm(const MaskedLmConfig& config);

  // tokens [sequences * seq] (each in [0, vocab), else optimus::Error naming it), sequence i being global sequence
  // first_sequence + i of the step's batch.
  MaskedBatch mask(const std::vector<int>& tokens, std::int64_t seq, std::uint64_t step,
                   std::int64_t first_sequence) const;

  const MaskedLmConfig& config() const { return config_; }

 private:
  MaskedLmConfig config_;
};

}  // namespace optimus
