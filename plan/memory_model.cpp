// The memory model (memory_model.hpp): the formulas of the layers' trackers, by stage.
#include "optimus/plan/memory_model.hpp"

#include <algorithm>
#include <optional>

#include "optimus/core/error.hpp"
#include "optimus/layers/spill.hpp"
#include "optimus/pipeline/memory.hpp"
#include "optimus/pipeline/partition.hpp"

namespace optimus::plan {
namespace {

using u64 = std::uint64_t;

// The vocabulary as the layout stores it.
std::int64_t stored_vocab(const Layout& l, const GptConfig& c) { return c.stored_vocab(l.two_d() ? l.q() : l.tp); }

// Local elements of wte (and of an untied head's lm_head, the same), of the embedding's other tables (wpe for learned
// positions; BERT's tte and ln_e) and of ln_f on one rank.
struct Others {
  std::int64_t wte = 0, wpe = 0, ln_f = 0;
};
// A norm's parameters: gamma, and for LayerNorm beta.
std::int64_t norm_parameters(const GptConfig& c) {
  return c.block.norm.parameters(c.hidden);
}

Others others(const Layout& l, const GptConfig& c) {
  const std::int64_t h = c.hidden, v = stored_vocab(l, c), positions = c.block.rope ? 0 : c.max_seq;
  const int parts = l.two_d() ? l.q() : l.tp;  // tte's rows are stored padded to a multiple of these, split as wte's
  const std::int64_t types = (c.block.token_types + parts - 1) / parts * parts;
  const std::int64_t ln_e = c.block.embedding_norm ? norm_parameters(c) : 0;
  // BERT's head transform (head.dense: replicated in 1D, as ln_f) beside ln_f, and the head's bias over the vocabulary.
  const std::int64_t dense = c.block.head_transform ? h * h + h : 0, bias = c.block.head_transform ? v : 0;
  if (l.two_d()) {
    return {.wte = v * h / l.tp,
            .wpe = (positions + types) * h / l.tp + ln_e / l.tp,
            .ln_f = (norm_parameters(c) + dense + bias) / l.tp};
  }
  return {.wte = v / l.tp * h, .wpe = positions * h + types / l.tp * h + ln_e,
          .ln_f = norm_parameters(c) + dense + bias / l.tp};
}

// The micro-batch's sequences per replica.
std::int64_t micro_sequences(const Layout& l, const Workload& w) { return w.global_batch / l.dp / l.micro_batches; }

BlockActivations shape_of(const Layout& l, const Workload& w) {
  return BlockActivations::of(w.config, micro_sequences(l, w), w.seq, l.q(), w.element_bytes, w.saved_bytes);
}

// ln_f's and the head's saved bytes per rank for one micro-batch.
std::int64_t head_bytes(const Layout& l, const Workload& w) {
  const BlockActivations s = shape_of(l, w);
  const std::int64_t n = s.batch * s.seq, h = s.hidden, e = s.saved_bytes;
  // BERT's head transform: its input and GELU's input, [N, h] each (1D: replicated).
  const std::int64_t transform = w.config.block.head_transform ? 2 * e * n * h / (l.two_d() ? l.tp : 1) : 0;
  if (l.two_d()) return head_saved_bytes(s, stored_vocab(l, w.config)) + transform;
  // ln_f's xhat and 1/std, the head's input (all replicated) and dlogits [N, V/t].
  return e * n * h + s.element_bytes * n + e * n * h + e * n * (stored_vocab(l, w.config) / l.tp) + transform;
}

// What a micro-batch's embedding keeps for its backward (held until its backward, which a split backward runs in
// B_weight): the embeddings' norm's xhat and 1/std (BERT's ln_e), nothing without it.
std::int64_t embedding_norm_bytes(const Layout& l, const Workload& w) {
  if (!w.config.block.embedding_norm) return 0;
  const std::int64_t n = micro_sequences(l, w) * w.seq, h = w.config.hidden;
  if (l.two_d()) return w.saved_bytes * n * h / l.tp + w.element_bytes * n / l.q();
  return w.saved_bytes * n * h + w.element_bytes * n;
}

// The workspace estimate: the largest of the MLP's SUMMA working set (c_fc's output and the activation's gradients:
// 3 ffn for GELU, 4 ffn for SwiGLU's [gate | up]), grouped-query attention's widened qkv and its gradient (2 x 3h), and
// the head's logits and probabilities.
std::int64_t workspace_estimate(const Layout& l, const Workload& w) {
  const GptConfig& c = w.config;
  const std::int64_t n = micro_sequences(l, w) * w.seq, t = w.element_bytes;
  const std::int64_t v = stored_vocab(l, c), h = c.hidden, f = c.ffn;
  const std::int64_t mlp = n * (c.fc_width() + 2 * f) / l.tp;
  const std::int64_t widened = c.kv_heads() < c.heads ? 2 * n * 3 * h / l.tp : 0;
  if (l.two_d()) return t * std::max({mlp, widened, 2 * n * v / l.tp});
  return t * std::max({mlp + 2 * n * h, widened, 2 * n * v / l.tp});
}

// The states of `parameters` local elements of which `blocks` blocks of `per_block`, `head` elements of the LM head's
// weight (wte, or an untied head's lm_head; 0 off the head's stage), under the layout's offload mode.
StateFootprint states(const Layout& l, const Workload& w, std::int64_t blocks, std::int64_t per_block,
                      std::int64_t other, std::int64_t head) {
  // Under mixed precision (f32 values, bf16 GEMMs) each 2D linear weight has a bf16 copy (weight_copy.hpp).
  const bool copies = l.two_d() && w.element_bytes == 4 && w.saved_bytes == 2;
  const ModelShards shards{.blocks = blocks,
                           .block_parameters = per_block,
                           .other_parameters = other,
                           .wte = head,
                           .head_gradient = w.config.block.tied_head ? head : 0,
                           .word = static_cast<std::size_t>(w.element_bytes),
                           .block_weights = copies ? w.config.block_weights() / l.tp : 0,
                           .copy_word = copies ? std::size_t{2} : 0};
  std::optional<OptimizerOffload> optimizer;
  if (offloads_optimizer(l.offload)) {
    optimizer = OptimizerOffload{.update = OffloadUpdate::device, .chunk_elements = OptimizerOffload{}.chunk_elements};
  }
  return state_footprint(spill_of(l.offload), optimizer, shards);
}

KindBytes with_states(const StateBytes& s) {
  return KindBytes{.parameters = s.parameters, .gradients = s.gradients, .optimizer = s.optimizer};
}

}  // namespace

std::uint64_t KindBytes::of(MemoryKind kind) const {
  switch (kind) {
    case MemoryKind::parameters:
      return parameters;
    case MemoryKind::gradients:
      return gradients;
    case MemoryKind::optimizer:
      return optimizer;
    case MemoryKind::activations:
      return activations;
    case MemoryKind::workspace:
      return workspace;
  }
  return 0;
}

std::int64_t block_parameters(const Layout& l, const GptConfig& c) {
  // Weights (GptConfig::block_weights), biases (where the block has them), two norms; 1D replicates its norms and the
  // row-parallel biases (2h).
  const std::int64_t h = c.hidden, norms = 2 * norm_parameters(c), b = c.block.bias ? 1 : 0;
  if (l.two_d()) return (c.block_weights() + c.block_biases() + norms) / l.tp;
  return (c.block_weights() + b * (c.qkv_width() + c.fc_width())) / l.tp + b * 2 * h + norms;
}

std::int64_t block_activation_bytes(const Layout& l, const Workload& w, Recompute policy) {
  const BlockActivations s = shape_of(l, w);
  if (l.two_d()) return block_saved_bytes(s, policy);
  const std::int64_t n = s.batch * s.seq, h = s.hidden, e = s.saved_bytes, t = s.element_bytes, p = l.tp;
  switch (policy) {
    case Recompute::none:
    case Recompute::selective:  // the same: the fused attention keeps its log-sum-exps, no probabilities
      return e * (n * h * 4 + n * ((s.qkv_width + h) / p) + n * ((s.fc_width + s.ffn) / p)) +
             t * (2 * n + s.batch * (s.heads / p) * s.seq);
    case Recompute::full:
      return t * n * h;
  }
  return 0;
}

namespace {

// Without a pipeline: blocks L, the embedding (wte, wpe) and ln_f, an untied head's lm_head, wte's head gradient apart
// (model/gpt.hpp); the activations at their peak (the blocks' contexts and the head's, or a full block recomputing).
MemoryPrediction one_stage_memory(const Layout& l, const Workload& w, const Others& o, std::int64_t per_block) {
  const GptConfig& c = w.config;
  const std::int64_t lm_head = c.block.tied_head ? 0 : o.wte;
  const StateFootprint f = states(l, w, c.layers, per_block, o.wte + o.wpe + o.ln_f + lm_head, o.wte);
  MemoryPrediction m{.device = with_states(f.device), .host = with_states(f.host), .stage = 0};
  std::int64_t saved = 0, transient = 0;
  std::int64_t peak_backward = 0;  // the most held while a full block recomputes: blocks 0..l and its context
  for (std::int64_t k = 0; k < c.layers; ++k) {
    const Recompute policy = l.recompute_of(k);
    saved += block_activation_bytes(l, w, policy);
    if (policy == Recompute::full) {
      transient = block_activation_bytes(l, w, Recompute::none);
      peak_backward = std::max(peak_backward, saved + transient);
    }
  }
  const std::int64_t tail = head_bytes(l, w) + embedding_norm_bytes(l, w);
  std::int64_t device_activations = std::max(saved + tail, peak_backward + embedding_norm_bytes(l, w));
  if (l.offload == Offload::spill_activations) {
    // spill.hpp: every block's context but the last goes to the host (uniform blocks).
    const std::int64_t block = c.layers > 0 ? saved / c.layers : 0;
    device_activations = spill_activation_peak(c.layers, block, transient, tail, true);
    m.host.activations = static_cast<u64>(std::max<std::int64_t>(c.layers - 1, 0) * block);
  }
  m.device.activations = static_cast<u64>(device_activations);
  m.device.workspace = static_cast<u64>(workspace_estimate(l, w));
  return m;
}

// Activation bytes per virtual stage: its blocks' contexts under their policies, the head's on u = U-1. What queued
// weight gradients read until B_weight (split schedules), per block: 2D pipeline/memory.hpp's e N (5h + ffn)/q^2; 1D
// ln_1's and ln_2's xhat and the inputs of c_attn and c_fc (replicated [N, h]), of attn.c_proj ([N, h/t]) and
// mlp.c_proj ([N, ffn/t]); on u = U-1 ln_f's xhat, the head's input and dlogits (all of the head's but ln_f's
// 1/std). Without recomputation these are the trackers' figures; with it the same weight bytes are assumed (a
// prediction the trackers have not checked).
std::vector<pipeline::ChunkBytes> chunk_bytes(const Layout& l, const Workload& w, const pipeline::Schedule& schedule) {
  const GptConfig& c = w.config;
  const bool plain =
      std::all_of(l.recompute.begin(), l.recompute.end(), [](Recompute r) { return r == Recompute::none; });
  std::vector<pipeline::ChunkBytes> chunks;
  if (l.two_d() && plain) {
    chunks = pipeline::gpt_chunk_bytes(schedule, c,
                                       pipeline::MicroBatchShape{.sequences = micro_sequences(l, w),
                                                                 .seq = w.seq,
                                                                 .q = l.q(),
                                                                 .element_bytes = w.element_bytes,
                                                                 .saved_bytes = w.saved_bytes});
  } else {
    const std::int64_t n = micro_sequences(l, w) * w.seq, e = w.saved_bytes;
    const std::int64_t block_weight = l.two_d() ? e * (n / l.q()) * ((5 * c.hidden + c.ffn) / l.q())
                                               : e * n * (4 * c.hidden + c.hidden / l.tp + c.ffn / l.tp);
    // Held until B_weight: the head's but ln_f's 1/std and the transform's GELU input.
    const std::int64_t transform_pre =
        c.block.head_transform ? e * n * c.hidden / (l.two_d() ? l.tp : 1) : 0;
    const std::int64_t head = head_bytes(l, w), head_weight = head - w.element_bytes * n / l.q() - transform_pre;
    for (int u = 0; u < schedule.virtual_stages(); ++u) {
      const pipeline::LayerRange range = pipeline::layers_of(schedule, c.layers, u);
      const bool last = u == schedule.virtual_stages() - 1;
      std::int64_t saved = last ? head : 0;
      for (std::int64_t k = range.first; k < range.first + range.count; ++k) {
        saved += block_activation_bytes(l, w, l.recompute_of(k));
      }
      chunks.push_back({.saved = saved, .weight = range.count * block_weight + (last ? head_weight : 0)});
    }
  }
  chunks.front().saved += embedding_norm_bytes(l, w);  // u = 0's embedding, held until its (weight) backward
  chunks.front().weight += embedding_norm_bytes(l, w);
  return chunks;
}

// Stage s of a pipeline: its blocks' states, the embedding's (first and last stage) and the head's (last), and its
// activations' peak (`peak`).
MemoryPrediction stage_memory(const Layout& l, const Workload& w, const Others& o, std::int64_t per_block,
                              const pipeline::Schedule& schedule, int s, std::int64_t peak) {
  const GptConfig& c = w.config;
  const int first = schedule.stage_of(0), last = schedule.stage_of(schedule.virtual_stages() - 1);
  std::int64_t blocks = 0;
  for (int k = 0; k < l.chunks; ++k) {
    blocks += pipeline::layers_of(schedule, c.layers, schedule.virtual_stage(s, k)).count;
  }
  const bool embedding = s == first || s == last, head = s == last;
  const std::int64_t lm_head = head && !c.block.tied_head ? o.wte : 0;
  const std::int64_t other = (embedding ? o.wte + o.wpe : 0) + (head ? o.ln_f : 0) + lm_head;
  const StateFootprint f = states(l, w, blocks, per_block, other, head ? o.wte : 0);
  MemoryPrediction m{.device = with_states(f.device), .host = with_states(f.host), .stage = s};
  // The head's stage holds the embedding (for wte, or beside an untied head's lm_head), but wpe is not among its
  // parameters, nor wte beside lm_head: AdamW keeps no moments of them — where the moments are, the device's or, with
  // the optimizer offloaded, the host's (the device then holds only the update's buffers).
  if (head && s != first) {
    KindBytes& moments = offloads_optimizer(l.offload) ? m.host : m.device;
    moments.optimizer -= static_cast<u64>(2 * w.element_bytes * (o.wpe + (c.block.tied_head ? 0 : o.wte)));
  }
  m.device.activations = static_cast<u64>(peak);
  m.device.workspace = static_cast<u64>(workspace_estimate(l, w));
  return m;
}

}  // namespace

std::vector<MemoryPrediction> predict_memory_by_stage(const Layout& l, const Workload& w) {
  OPTIMUS_CHECK(shape_error(l, w).empty(), "memory model: ", shape_error(l, w));
  const Others o = others(l, w.config);
  const std::int64_t per_block = block_parameters(l, w.config);
  if (l.pp == 1) return {one_stage_memory(l, w, o, per_block)};
  const pipeline::Schedule schedule = schedule_of(l);
  const std::vector<std::int64_t> peaks = pipeline::peak_activation_bytes(schedule, chunk_bytes(l, w, schedule));
  std::vector<MemoryPrediction> out;
  for (int s = 0; s < l.pp; ++s) {
    out.push_back(stage_memory(l, w, o, per_block, schedule, s, peaks[static_cast<std::size_t>(s)]));
  }
  return out;
}

MemoryPrediction predict_memory(const Layout& l, const Workload& w) {
  const std::vector<MemoryPrediction> all = predict_memory_by_stage(l, w);
  return *std::max_element(all.begin(), all.end(), [](const MemoryPrediction& a, const MemoryPrediction& b) {
    return a.device.total() < b.device.total();
  });
}

std::int64_t largest_batch(const Layout& l, Workload w, std::uint64_t bytes, std::int64_t extra_per_sequence) {
  const std::int64_t step = static_cast<std::int64_t>(l.dp) * l.micro_batches * (l.two_d() ? l.q() : 1);
  const std::int64_t most = std::int64_t{1} << 24;
  w.global_batch = step;
  OPTIMUS_CHECK(shape_error(l, w).empty(), "largest batch: ", shape_error(l, w));
  const auto fits = [&](std::int64_t k) {  // k steps of sequences
    w.global_batch = k * step;
    const std::int64_t held = w.global_batch / l.dp / l.micro_batches / (l.two_d() ? l.q() : 1);
    const auto total = static_cast<double>(predict_memory(l, w).device.total()) +
                       static_cast<double>(held) * static_cast<double>(extra_per_sequence);
    return total <= static_cast<double>(bytes);
  };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = 2;  // fits(lo), and hi is past it or the end
  while (hi * step <= most && fits(hi)) lo = hi, hi *= 2;
  hi = std::min(hi, most / step + 1);
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * step;
}

std::vector<std::int64_t> stage_activation_peaks(const Layout& layout, const pipeline::Schedule& schedule,
                                                 const GptConfig& config, std::int64_t sequences, std::int64_t seq,
                                                 std::int64_t element_bytes) {
  if (layout.tensor == TensorParallel::one_d) return {};
  return pipeline::peak_activation_bytes(
      schedule, pipeline::gpt_chunk_bytes(schedule, config,
                                          {.sequences = sequences, .seq = seq, .q = layout.q(),
                                           .element_bytes = element_bytes, .saved_bytes = element_bytes}));
}

}  // namespace optimus::plan
