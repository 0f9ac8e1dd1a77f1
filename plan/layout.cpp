// Layouts (layout.hpp): their names, whether Optimus runs them, whether they fit a workload's shapes.
#include "optimus/plan/layout.hpp"

#include <cmath>
#include <sstream>

#include "optimus/core/error.hpp"

namespace optimus::plan {

pipeline::Schedule schedule_of(const Layout& layout) {
  if (layout.pp == 1) return pipeline::one_stage(layout.micro_batches);
  return pipeline::make_schedule({.kind = layout.schedule, .stages = layout.pp, .micro_batches = layout.micro_batches,
                                  .chunks = layout.chunks});
}

int Layout::q() const {
  if (tensor == TensorParallel::one_d) return 1;
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(tp))));
  OPTIMUS_CHECK(side * side == tp, "layout: a 2D stage of ", tp, " ranks is not a square grid");
  return side;
}

std::string describe_recompute(const std::vector<Recompute>& policies) {
  std::ostringstream os;
  for (std::size_t i = 0; i < policies.size();) {
    std::size_t j = i;
    while (j < policies.size() && policies[j] == policies[i]) ++j;
    os << (i == 0 ? "" : ",") << name_of(policies[i]) << '*' << (j - i);
    i = j;
  }
  return policies.empty() ? "none" : os.str();
}

std::string describe_ranks(const Layout& l) {
  std::ostringstream os;
  if (l.tensor == TensorParallel::one_d) {
    os << "pp " << l.pp << " x p " << l.tp << " (1D stages)";
  } else {
    os << "dp " << l.dp << " x pp " << l.pp << " x q " << l.q() << " x q " << l.q();
  }
  return os.str();
}

std::string describe(const Layout& l) {
  std::ostringstream os;
  os << name_of(l.tensor) << ' ' << (l.two_d() ? "q=" : "t=")
     << (l.two_d() ? l.q() : l.tp) << " dp=" << l.dp << " pp=" << l.pp;
  if (l.pp > 1) {
    os << ' ' << pipeline::name_of(l.schedule);
    if (l.chunks > 1) os << " v=" << l.chunks;
  }
  os << " m=" << l.micro_batches << " offload=" << name_of(l.offload)
     << " recompute=" << describe_recompute(l.recompute);
  return os.str();
}

std::string runnable(const Layout& l, bool has_device) {
  // Every layout runs (one GPT class: model/gpt.hpp); offloading is meaningless without a device. What the planner
  // cannot vouch for yet: a pipeline's offload, whose per-stage slots (two per chunk) and spilled activations the memory
  // model does not count.
  if (l.offload != Offload::none && !has_device) return "offload needs a device";
  if (l.pp > 1 && l.offload != Offload::none) {
    return "the memory model does not count a pipeline's offload yet (each chunk's two slots, spilled activations)";
  }
  return {};
}

std::string shape_error(const Layout& l, const Workload& w) {
  const GptConfig& c = w.config;
  std::ostringstream os;
  if (l.tp < 1 || l.dp < 1 || l.pp < 1 || l.micro_batches < 1 || l.chunks < 1) {
    os << "sizes must be positive (tp " << l.tp << ", dp " << l.dp << ", pp " << l.pp << ", m " << l.micro_batches
       << ", v " << l.chunks << ")";
    return os.str();
  }
  if (!l.recompute.empty() && static_cast<std::int64_t>(l.recompute.size()) != c.layers) {
    os << l.recompute.size() << " recomputation policies for " << c.layers << " blocks";
    return os.str();
  }
  if (w.seq < 1 || w.seq > c.max_seq) {
    os << "sequence length " << w.seq << " is not in [1, max_seq = " << c.max_seq << "]";
    return os.str();
  }
  if (w.global_batch % (static_cast<std::int64_t>(l.dp) * l.micro_batches) != 0) {
    os << "the global batch " << w.global_batch << " does not split into dp " << l.dp << " x m " << l.micro_batches;
    return os.str();
  }
  if (l.two_d()) {
    const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(l.tp))));
    if (side * side != l.tp) return "a 2D stage needs a square number of ranks, got " + std::to_string(l.tp);
    const std::int64_t q = side, qq = l.tp;
    const std::int64_t sequences = w.global_batch / l.dp / l.micro_batches;
    const bool qkv_bias_split = !c.block.bias || c.qkv_width() % qq == 0;  // c_attn's bias is split q^2 ways
    if (c.heads % q || c.kv_heads() % q || c.max_seq % q || c.hidden % qq || c.ffn % qq || sequences % q ||
        !qkv_bias_split) {
      os << "q = " << q << " must divide heads " << c.heads << ", key/value heads " << c.kv_heads() << ", max_seq "
         << c.max_seq << " and the micro-batch's " << sequences << " sequences, q^2 = " << qq << " hidden "
         << c.hidden << ", ffn " << c.ffn << (c.block.bias ? " and c_attn's width " : "")
         << (c.block.bias ? std::to_string(c.qkv_width()) : std::string());
      return os.str();
    }
  } else if (c.heads % l.tp || c.kv_heads() % l.tp || c.ffn % l.tp || c.hidden % c.heads) {
    os << "t = " << l.tp << " must divide heads " << c.heads << ", key/value heads " << c.kv_heads() << " and ffn "
       << c.ffn;
    return os.str();
  }
  if (l.pp > 1) {
    if (c.layers % (static_cast<std::int64_t>(l.pp) * l.chunks) != 0) {
      os << "pp " << l.pp << " x v " << l.chunks << " does not divide " << c.layers << " blocks";
      return os.str();
    }
    try {
      (void)schedule_of(l);
    } catch (const Error& e) {
      return e.what();
    }
  } else if (l.chunks != 1) {
    return "chunks need pp > 1";
  }
  return {};
}

}  // namespace optimus::plan
