// What a training run keeps in host memory instead of the device's (docs/offload.md): the modes of train_gpt --offload
// and optimus-bench offload --offload, each keeping more on the host than the one before.
//   none               nothing: the device holds the parameters, gradients, AdamW's moments and the activations
//   optimizer          AdamW's moments (optimizer_offload.hpp: AxoNN's way)
//   spill              also the transformer blocks' parameters and gradients, which move through two device slots
//                      while the model computes (spill.hpp: HYDRA's double buffering)
//   spill+activations  also the activations the blocks save for backward, between their forward and backward
//
// The formulas (docs/offload.md), per rank, for a GPT of L blocks of P_b local parameters each and P_d other local
// parameters (the embedding's and ln_f's, which never leave the device), P = P_d + L*P_b in all, e bytes per element,
// W local elements of wte, optimizer chunks of c elements and s = min(L, 2) device slots:
//                     device: parameters, gradients, optimizer                 host: parameters, gradients, optimizer
//   none              e*P, e*(P + W), 2e*P                                     0, 0, 0
//   optimizer         e*P, e*(P + W), 6e*min(c, P) (device way) or 0          0, 0, 2e*P (+ 6e*min(c, P): host way)
//   spill, +act.      e*(P_d + s*P_b), e*(P_d + s*P_b + W), 6e*min(c, P_d)     e*L*P_b, e*L*P_b, 2e*L*P_b + 2e*P_d
//                     (device way) or 0                                        (+ 6e*min(c, P_d): host way)
// (W: the LM head's part of wte's gradient, summed apart until the step's end: model/gpt.hpp.) Under mixed precision
// the device's parameters also hold the bf16 copies of the blocks' weights and of wte (weight_copy.hpp), c*(L*P_w + W)
// bytes for P_w local weight elements a block and c = 2 — the blocks' none where they spill (their weights are cast
// per product). Per step the copies are
// optimizer_offload.hpp's for the parameters on the device (P, or P_d when the blocks spill) plus spill.hpp's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optimus/layers/optimizer_offload.hpp"
#include "optimus/layers/spill.hpp"

namespace optimus {

enum class Offload { none, optimizer, spill, spill_activations };

// "none", "optimizer", "spill", "spill+activations"; parse_offload throws optimus::Error naming any other text.
const char* name_of(Offload mode);
Offload parse_offload(const std::string& text);
std::vector<Offload> all_offload_modes();

// What the model spills in `mode` (Gpt(place, config, schedule, Spill), model/gpt.hpp).
Spill spill_of(Offload mode);
// Whether AdamW's moments of the parameters on the device go to host memory in `mode` (AdamW's OptimizerOffload): in
// every mode but none (a spilled block's moments are in host memory with its parameters anyway).
inline bool offloads_optimizer(Offload mode) { return mode != Offload::none; }

// A model's local shards on one rank, as the formulas take them.
struct ModelShards {
  std::int64_t blocks = 0;            // L
  std::int64_t block_parameters = 0;  // P_b: one block's local elements
  std::int64_t other_parameters = 0;  // P_d: the embedding's and ln_f's
  std::int64_t wte = 0;               // W: the LM head's weight's local elements (wte, or an untied lm_head; on its stage)
  std::int64_t head_gradient = 0;     // a tied head's own part of wte's gradient (W; 0 for an untied head)
  std::size_t word = 0;               // e
  std::int64_t block_weights = 0;     // P_w: one block's local weight-matrix elements (those with bf16 copies)
  std::size_t copy_word = 0;          // c: 2 under mixed precision (the weights' bf16 copies), else 0
};

// Bytes of parameters, gradients and optimizer state in one place.
struct StateBytes {
  std::uint64_t parameters = 0, gradients = 0, optimizer = 0;
  std::uint64_t total() const { return parameters + gradients + optimizer; }
  friend bool operator==(const StateBytes&, const StateBytes&) = default;
};
struct StateFootprint {
  StateBytes device, host;
};

// What a model spilled as `spill`, with AdamW's moments of the parameters on the device offloaded as `optimizer` says
// (none: on the device), holds where: the table above, whose rows are spill_of(mode) and the mode's optimizer offload.
StateFootprint state_footprint(Spill spill, const std::optional<OptimizerOffload>& optimizer, const ModelShards& m);
// The bytes one step copies with `micro_batches` micro-batches and `block_activations` bytes saved per block
// (block_saved_bytes; they move with Spill::parameters_and_activations only).
TransferBytes step_transfers(Spill spill, const std::optional<OptimizerOffload>& optimizer, const ModelShards& m,
                             std::int64_t micro_batches, std::int64_t block_activations);

}  // namespace optimus
