// The time model (time_model.hpp): a block's seconds from flops, element-wise work and traffic; a step from the
// pipeline simulator, the replicas' all-reduce, AdamW and offload's copies.
#include "optimus/plan/time_model.hpp"

#include <algorithm>
#include <optional>

#include "optimus/core/error.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/layers/spill.hpp"
#include "optimus/plan/memory_model.hpp"
#include "optimus/plan/traffic.hpp"
#include "optimus/pipeline/partition.hpp"
#include "optimus/pipeline/simulator.hpp"

namespace optimus::plan {
namespace {

const Link& link(const Cluster& c, bool inside) { return inside ? c.intra : c.inter; }

// A ring all-reduce of `bytes` over `p` ranks: its seconds and the bytes each rank receives.
struct Ring {
  double seconds = 0;
  double copying = 0;  // of those, moving the bytes (the latencies are waiting, not work)
  std::uint64_t bytes = 0;
};
Ring ring_all_reduce(double bytes, int p, const Link& over) {
  if (p < 2) return {};
  const double moved = 2.0 * (p - 1) / p * bytes;
  return {.seconds = moved / over.bandwidth + 2.0 * (p - 1) * over.latency,
          .copying = moved / over.bandwidth,
          .bytes = static_cast<std::uint64_t>(moved)};
}

// One block's parts on one micro-batch, per rank.
struct BlockParts {
  double forward_compute = 0, forward_comm = 0;  // comm: exposed
  double backward_compute = 0, backward_comm = 0;
  double comm_busy = 0;                // seconds of copying the bytes: ranks sharing cores are busy
                                       // copying; while they wait out a latency, others compute
  std::uint64_t intra = 0, inter = 0;  // bytes received, forward and backward
};

struct Dims {
  double n, s, h, f, a, b, v, t, e, dropout;
  double w_qkv, w_fc;  // c_attn's and c_fc's output widths
  // One block's weight-matrix elements: c_attn, attn.c_proj, c_fc, mlp.c_proj (GPT-2: 4h^2 + 2hf).
  double weights() const { return h * w_qkv + h * h + h * w_fc + f * h; }
};

Dims dims_of(const Layout& l, const Workload& w) {
  const GptConfig& c = w.config;
  const double b = static_cast<double>(w.global_batch / l.dp / l.micro_batches);
  return {.n = b * static_cast<double>(w.seq),
          .s = static_cast<double>(w.seq),
          .h = static_cast<double>(c.hidden),
          .f = static_cast<double>(c.ffn),
          .a = static_cast<double>(c.heads),
          .b = b,
          .v = static_cast<double>(c.stored_vocab(l.two_d() ? l.q() : l.tp)),
          .t = static_cast<double>(w.element_bytes),
          .e = static_cast<double>(w.saved_bytes),
          .dropout = c.dropout > 0 ? 1.0 : 0.0,
          .w_qkv = static_cast<double>(c.qkv_width()),
          .w_fc = static_cast<double>(c.fc_width())};
}

BlockParts block_parts(const Layout& l, const Workload& w, const Cluster& c) {
  const Dims x = dims_of(l, w);
  const double tp = l.tp, gemm = 2 * x.n * x.weights() + 4 * x.n * x.s * x.h;
  // Element-wise seconds: [N, h] work that 1D keeps whole on every rank (LayerNorms, residual adds, the row-parallel
  // biases; the residual dropouts), and the split work (the column-parallel biases; GELU; the fused attention's
  // exponentials and dropout draws on the b a s^2 scores, which never go to memory).
  const double scores = x.b * x.a * x.s * x.s;
  const double replicated = x.n * x.h * (10 / c.stream_rate + 2 * x.dropout / c.element_rate);
  const double split = x.n * (x.w_qkv + x.w_fc) / c.stream_rate + x.n * x.f / c.element_rate +
                       scores * (1 + x.dropout) / c.element_rate;
  const double elementwise = l.two_d() ? (replicated + split) / tp : replicated + split / tp;
  BlockParts p;
  p.forward_compute = gemm / tp / c.gemm_flops + elementwise;
  // Backward: twice the forward, and the fused attention's recomputation of its scores (Q K^T) and probabilities.
  p.backward_compute = 2 * p.forward_compute + 2 * x.n * x.s * x.h / tp / c.gemm_flops +
                       scores * (1 + x.dropout) / c.element_rate / tp;
  if (l.two_d()) {
    const int q = l.q();
    if (q > 1) {
      const BlockShape s = BlockShape::of(w.config, static_cast<std::int64_t>(x.b), w.seq);
      const auto elem = static_cast<std::size_t>(w.element_bytes);
      const double total =
          static_cast<double>(predicted_bytes_2d(s, q, elem, 1, static_cast<std::size_t>(w.saved_bytes)));
      const double qq = q;
      const double weights = 3.0 * (qq - 1) / (qq * qq) * x.weights() * x.t;
      const double rows = total - weights;
      const GroupLink row = group_link(c, q, 1), column = group_link(c, q, q);  // rows: consecutive ranks
      const double copying = rows / row.link.bandwidth + weights / column.link.bandwidth;
      const double seconds = copying + 34.0 * (q - 1) * column.link.latency;
      p.comm_busy = copying;
      p.forward_comm = (1 - c.overlap) * seconds / 3;
      p.backward_comm = (1 - c.overlap) * seconds * 2 / 3;
      (row.inside ? p.intra : p.inter) += static_cast<std::uint64_t>(rows);
      (column.inside ? p.intra : p.inter) += static_cast<std::uint64_t>(weights);
    }
  } else if (l.tp > 1) {
    const GroupLink group = group_link(c, l.tp, 1);
    const bool in = group.inside;
    const Ring ar = ring_all_reduce(x.n * x.h * x.t, l.tp, group.link);
    p.forward_comm = 2 * ar.seconds;
    const double dw_attn = 2 * x.n * x.h * x.w_qkv / tp / c.gemm_flops;
    const double dw_fc = 2 * x.n * x.h * x.w_fc / tp / c.gemm_flops;
    p.backward_comm = std::max(0.0, ar.seconds - dw_attn) + std::max(0.0, ar.seconds - dw_fc);
    p.comm_busy = 4 * ar.copying;
    (in ? p.intra : p.inter) += 4 * ar.bytes;
  }
  return p;
}

// The embedding's and the head's seconds on one micro-batch (forward, backward), their busy communication and bytes.
struct EndParts {
  double embedding_forward = 0, embedding_backward = 0, head_forward = 0, head_backward = 0, comm_busy = 0;
  std::uint64_t intra = 0, inter = 0;
};

EndParts end_parts(const Layout& l, const Workload& w, const Cluster& c) {
  const Dims x = dims_of(l, w);
  const double tp = l.tp, gemm = 2 * x.n * x.h * x.v / tp / c.gemm_flops;
  const double logits = x.n * x.v / tp;
  const double rows = l.two_d() ? x.n * x.h / tp : x.n * x.h;  // ln_f's and the embedding's elements per rank
  EndParts p;
  p.embedding_forward = rows * (2 / c.stream_rate + x.dropout / c.element_rate);
  p.embedding_backward = rows * 2 / c.stream_rate;
  p.head_forward = gemm + logits * (2 / c.stream_rate + 1 / c.element_rate) + 3 * rows / c.stream_rate;
  p.head_backward = 2 * gemm + logits * 2 / c.stream_rate + 6 * rows / c.stream_rate;
  // BERT's parts. The embedding: the token types' lookup (a second table's rows read and added) and the embeddings'
  // norm (a LayerNorm's passes, as ln_f's; in 2D the lookup's second reduce-scatter is left out, as the first is).
  // The head: the transform's dense h -> h layer (its GEMMs split q^2 ways in 2D, whole on every rank in 1D, which
  // replicates it), its GELU, and the bias added to the logits (its gradient their column sums).
  const BlockConfig& blocks = w.config.block;
  if (blocks.token_types > 0) {
    p.embedding_forward += rows * 2 / c.stream_rate;
    p.embedding_backward += rows * 2 / c.stream_rate;
  }
  if (blocks.embedding_norm) {
    p.embedding_forward += 3 * rows / c.stream_rate;
    p.embedding_backward += 6 * rows / c.stream_rate;
  }
  if (blocks.head_transform) {
    const double dense = 2 * x.n * x.h * x.h / (l.two_d() ? tp : 1) / c.gemm_flops;
    p.head_forward += dense + rows * (2 / c.stream_rate + 1 / c.element_rate) + logits * 2 / c.stream_rate;
    p.head_backward += 2 * dense + rows * (3 / c.stream_rate + 1 / c.element_rate) + logits / c.stream_rate;
  }
  if (l.two_d() && l.q() > 1) {
    const int q = l.q();
    const GroupLink column = group_link(c, q, q);  // the weight's panels (the slower of rows and columns)
    const bool in = column.inside;
    const auto linear_bytes = [&](std::int64_t out, bool bias) {
      return static_cast<double>(linear_2d_bytes(static_cast<std::int64_t>(x.n), w.config.hidden, out,
                                                 static_cast<std::uint64_t>(q), static_cast<std::size_t>(w.element_bytes),
                                                 static_cast<std::size_t>(w.saved_bytes), bias));
    };
    // The logits' SUMMA (no bias: the head's is added apart), and the transform's dense layer where there is one.
    const double bytes = linear_bytes(static_cast<std::int64_t>(x.v), false) +
                         (blocks.head_transform ? linear_bytes(w.config.hidden, true) : 0.0);
    const double summas = blocks.head_transform ? 2 : 1;
    const double seconds = bytes / column.link.bandwidth + summas * 6.0 * (q - 1) * column.link.latency;
    p.head_forward += (1 - c.overlap) * seconds / 3;
    p.head_backward += (1 - c.overlap) * seconds * 2 / 3;
    p.comm_busy = bytes / column.link.bandwidth;
    (in ? p.intra : p.inter) += static_cast<std::uint64_t>(bytes);
  } else if (!l.two_d() && l.tp > 1) {
    const GroupLink group = group_link(c, l.tp, 1);
    const bool in = group.inside;
    const Ring embedding = ring_all_reduce(x.n * x.h * x.t, l.tp, group.link);
    const Ring head = ring_all_reduce(4 * x.n * x.t, l.tp, group.link);  // max, sum of exp and target, dx
    p.embedding_forward += embedding.seconds;
    p.head_forward += head.seconds;
    p.head_backward += ring_all_reduce(x.n * x.h * x.t, l.tp, group.link).seconds;
    p.comm_busy = 2 * embedding.copying + head.copying;
    (in ? p.intra : p.inter) += 2 * embedding.bytes + head.bytes;
  }
  return p;
}

double backward_of(const BlockParts& p, Recompute policy) {
  const double base = p.backward_compute + p.backward_comm;
  switch (policy) {
    case Recompute::none:
    case Recompute::selective:  // the same: the fused attention keeps no probabilities to drop
      return base;
    case Recompute::full:
      return base + p.forward_compute + p.forward_comm;
  }
  return base;
}

}  // namespace

BlockSeconds block_seconds(const Layout& l, const Workload& w, const Cluster& c) {
  const BlockParts p = block_parts(l, w, c);
  BlockSeconds out;
  out.forward = p.forward_compute + p.forward_comm;
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    out.backward[static_cast<int>(r)] = backward_of(p, r);
  }
  return out;
}

namespace {

// A pipeline's step: its makespan and bubble by the schedule's simulation, and its busiest stage's received blocks.
struct PipelineTime {
  double makespan = 0;
  double bubble = 0;
  std::uint64_t received_bytes = 0;  // per rank of the busiest stage
  bool inside = false;               // the stages within a node
  double receiving = 0;              // seconds the busiest stage's ranks spend receiving
};

PipelineTime pipeline_time(const Layout& l, const Workload& w, const Cluster& c, const BlockParts& block,
                           const EndParts& ends) {
  const pipeline::Schedule s = schedule_of(l);
  const Dims x = dims_of(l, w);
  const double message = (l.two_d() ? x.n * x.h / l.tp : x.n * x.h) * x.t;
  // Point to point: every rank of a stage sends to the next at once, so across nodes each gets its own share.
  const bool in = l.pp * l.tp <= c.gpus_per_node;
  const double p2p = message / link(c, in).bandwidth + link(c, in).latency;
  std::vector<pipeline::Costs> costs;
  for (int u = 0; u < s.virtual_stages(); ++u) {
    const pipeline::LayerRange r = pipeline::layers_of(s, w.config.layers, u);
    pipeline::Costs cost{.forward = 0, .backward = 0, .backward_input = 0, .backward_weight = 0, .p2p = p2p};
    for (std::int64_t k = r.first; k < r.first + r.count; ++k) {
      cost.forward += block.forward_compute + block.forward_comm;
      cost.backward += backward_of(block, l.recompute_of(k));
    }
    if (u == 0) {
      cost.forward += ends.embedding_forward;
      cost.backward += ends.embedding_backward;
    }
    if (u == s.virtual_stages() - 1) {
      cost.forward += ends.head_forward;
      cost.backward += ends.head_backward;
    }
    cost.backward_input = cost.backward / 2;
    cost.backward_weight = cost.backward / 2;
    costs.push_back(cost);
  }
  const pipeline::Simulation sim = pipeline::simulate(s, costs);
  // The busiest stage's received blocks (bytes per rank, as every traffic figure here).
  const auto received = static_cast<std::uint64_t>(*std::max_element(sim.receives.begin(), sim.receives.end()));
  return {.makespan = sim.makespan,
          .bubble = sim.bubble,
          .received_bytes = received * static_cast<std::uint64_t>(message),
          .inside = in,
          .receiving = static_cast<double>(received) * message / link(c, in).bandwidth};
}

// Offloading's seconds in a step of `pipeline` seconds (the moments' copies follow the update; the blocks' hide
// behind the compute up to its length), and its host traffic in `host_bytes`.
double offload_time(const Layout& l, const Workload& w, const Cluster& c, double parameters, double pipeline,
                    std::uint64_t& host_bytes) {
  const GptConfig& config = w.config;
  const std::int64_t per_block = block_parameters(l, config);
  const auto total = static_cast<std::int64_t>(parameters);
  const ModelShards shards{.blocks = config.layers,
                           .block_parameters = per_block,
                           .other_parameters = total - config.layers * per_block,
                           .wte = 0,
                           .word = static_cast<std::size_t>(w.element_bytes)};
  const std::int64_t saved =
      l.offload == Offload::spill_activations ? block_activation_bytes(l, w, l.recompute_of(0)) : 0;
  const Spill spill = spill_of(l.offload);
  const TransferBytes all = step_transfers(spill, OptimizerOffload{}, shards, l.micro_batches, saved);
  const TransferBytes spilled =
      spill == Spill::none ? TransferBytes{}
                           : spill_step_transfers(config.layers, per_block, shards.word, l.micro_batches, saved);
  const auto bytes = [](const TransferBytes& t) { return static_cast<double>(t.host_to_device + t.device_to_host); };
  host_bytes = all.host_to_device + all.device_to_host;
  return (bytes(all) - bytes(spilled)) / c.host_link + std::max(0.0, bytes(spilled) / c.host_link - pipeline);
}

}  // namespace

StepPrediction predict_step(const Layout& l, const Workload& w, const Cluster& c, double call_participants) {
  OPTIMUS_CHECK(shape_error(l, w).empty(), "time model: ", shape_error(l, w));
  const GptConfig& config = w.config;
  const BlockParts block = block_parts(l, w, c);
  const EndParts ends = end_parts(l, w, c);
  const double m = l.micro_batches;
  StepPrediction out;
  double busy_comm = 0;  // per rank and step, the stage with the most blocks
  std::int64_t most_blocks = 0;
  if (l.pp == 1) {
    double forward = ends.embedding_forward + ends.head_forward,
           backward = ends.embedding_backward + ends.head_backward;
    for (std::int64_t k = 0; k < config.layers; ++k) {
      forward += block.forward_compute + block.forward_comm;
      backward += backward_of(block, l.recompute_of(k));
    }
    out.pipeline = m * (forward + backward);
    most_blocks = config.layers;
  } else {
    const PipelineTime t = pipeline_time(l, w, c, block, ends);
    out.pipeline = t.makespan;
    out.bubble = t.bubble;
    most_blocks = config.layers / l.pp;
    (t.inside ? out.traffic.intra : out.traffic.inter) += t.received_bytes;
    busy_comm += t.receiving;
  }
  out.tensor_comm = m * static_cast<double>(most_blocks) * (block.forward_comm + block.backward_comm);
  busy_comm += m * (static_cast<double>(most_blocks) * block.comm_busy + ends.comm_busy);
  const auto mb = static_cast<std::uint64_t>(m);
  out.traffic.intra += mb * (static_cast<std::uint64_t>(most_blocks) * block.intra + ends.intra);
  out.traffic.inter += mb * (static_cast<std::uint64_t>(most_blocks) * block.inter + ends.inter);

  // The largest stage's local parameters: the replicas' all-reduce and AdamW.
  const std::vector<MemoryPrediction> stages = predict_memory_by_stage(l, w);
  std::uint64_t states = 0;
  for (const MemoryPrediction& p : stages) states = std::max(states, p.device.parameters + p.host.parameters);
  const double parameters = static_cast<double>(states) / static_cast<double>(w.element_bytes);
  const GroupLink replicas = group_link(c, l.dp, l.pp * l.tp);
  const Ring dp = ring_all_reduce(parameters * static_cast<double>(w.element_bytes), l.dp, replicas.link);
  out.data_parallel = dp.seconds;
  (replicas.inside ? out.traffic.intra : out.traffic.inter) += dp.bytes;
  out.optimizer = parameters / c.optimizer_rate;
  if (l.offload != Offload::none) out.offload = offload_time(l, w, c, parameters, out.pipeline, out.traffic.host);
  out.critical = out.pipeline + out.data_parallel + out.optimizer + out.offload;
  // Busy: the compute in the pipeline (its time less the bubble and the exposed communication) and every copy.
  const double busy = out.pipeline * (1 - out.bubble) - out.tensor_comm + busy_comm + dp.copying + out.optimizer;
  out.calls = c.call_seconds * call_participants;
  out.work = busy * l.ranks() / c.cores + out.calls;
  out.seconds = std::max(out.critical, out.work);
  return out;
}

}  // namespace optimus::plan
