// The planner (planner.hpp): enumeration, Galvatron's pruning and per-block recomputation, ranking.
#include "optimus/plan/planner.hpp"

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/pipeline/partition.hpp"
#include "optimus/pipeline/simulator.hpp"
#include "optimus/plan/recompute_dp.hpp"
#include "optimus/plan/run.hpp"

namespace optimus::plan {
namespace {

// Selective recomputation is not a choice of its own: the fused attention keeps no probabilities for it to drop.
constexpr Recompute kPolicies[] = {Recompute::none, Recompute::full};

std::string gib(double bytes) {
  std::ostringstream os;
  os.precision(bytes >= 1024.0 * 1024 * 1024 ? 4 : 3);
  if (bytes >= 1024.0 * 1024 * 1024)
    os << bytes / (1024.0 * 1024 * 1024) << " GiB";
  else
    os << bytes / (1024.0 * 1024) << " MiB";
  return os.str();
}

// The schedules of a pipeline of `pp` stages with their chunks (interleaved and wave up to max_chunks); one stage: 1F1B's
// (the whole model).
std::vector<std::pair<pipeline::Kind, int>> schedules_for(int pp, int max_chunks) {
  if (pp == 1) return {{pipeline::Kind::one_f_one_b, 1}};
  std::vector<std::pair<pipeline::Kind, int>> out = {
      {pipeline::Kind::gpipe, 1}, {pipeline::Kind::one_f_one_b, 1}, {pipeline::Kind::zero_bubble, 1}};
  for (int v = 2; v <= max_chunks; v *= 2) {
    out.emplace_back(pipeline::Kind::interleaved, v);
    out.emplace_back(pipeline::Kind::wave, v);
  }
  return out;
}

// Every layout of `gpus` ranks that satisfies the shapes, without recomputation: each mesh of the ranks (Mesh::all_of,
// at most a stage per block) the request allows, each schedule and micro-batch count; offload none (and, with a device,
// the other modes after it).
std::vector<Layout> enumerate_layouts(const Request& r, int gpus) {
  const Workload& w = r.workload;
  std::vector<Layout> out;
  std::int64_t candidates = 0;
  std::vector<Offload> offloads = {Offload::none};
  if (r.cluster.has_device) offloads = all_offload_modes();
  const int max_stages = static_cast<int>(std::min<std::int64_t>(gpus, w.config.layers));
  for (const Mesh& mesh : Mesh::all_of(gpus, max_stages)) {
    if ((r.only && *r.only != mesh.tensor) || (r.dp && *r.dp != mesh.dp) || (r.pp && *r.pp != mesh.pp)) continue;
    if (w.global_batch % mesh.dp != 0) continue;
    const std::int64_t replica = w.global_batch / mesh.dp;
    for (const auto& [schedule, v] : schedules_for(mesh.pp, r.max_chunks)) {
      for (std::int64_t m = 1; m <= std::min<std::int64_t>(replica, r.max_micro_batches); ++m) {
        if (replica % m != 0) continue;
        // One micro-batch: GPipe and ZB-H1 run 1F1B's operations (pruned as duplicates).
        if (mesh.pp > 1 && m == 1 && schedule != pipeline::Kind::one_f_one_b && v == 1) continue;
        for (Offload o : offloads) {
          Layout l{.tensor = mesh.tensor,
                   .tp = static_cast<int>(mesh.tensor_ranks()),
                   .dp = mesh.dp,
                   .pp = mesh.pp,
                   .schedule = schedule,
                   .chunks = v,
                   .micro_batches = static_cast<int>(m),
                   .offload = o,
                   .recompute = std::vector<Recompute>(static_cast<std::size_t>(w.config.layers), Recompute::none)};
          if (r.progress) r.progress({.phase = Progress::Phase::enumerating, .done = ++candidates, .total = 0});
          if (shape_error(l, w).empty()) out.push_back(std::move(l));
        }
      }
    }
  }
  return out;
}

enum class Outcome { fits, states, activations };

struct Evaluated {
  Outcome outcome = Outcome::fits;
  std::optional<Plan> plan;
  std::uint64_t least_memory = 0;  // the device bytes with every block fully recomputed
};

std::uint64_t device_need(const Layout& l, const Workload& w) { return predict_memory(l, w).device.total(); }

// How many micro-batches' activations each stage holds at once (1 without a pipeline), by the schedule's simulation.
struct InFlight {
  pipeline::Schedule schedule;  // pp > 1
  std::vector<int> per_stage;   // [pp]
};

InFlight in_flight_of(const Layout& l) {
  InFlight out{.schedule = {}, .per_stage = std::vector<int>(static_cast<std::size_t>(l.pp), 1)};
  if (l.pp == 1) return out;
  out.schedule = schedule_of(l);
  const pipeline::Simulation sim = pipeline::simulate(out.schedule, pipeline::Costs{});
  out.per_stage = sim.peak_live;
  return out;
}

// Stage s's blocks: its chunks' layers (not contiguous with interleaved or wave chunks).
std::vector<std::int64_t> blocks_of_stage(const Layout& l, const Workload& w, const pipeline::Schedule& schedule,
                                          int s) {
  std::vector<std::int64_t> mine;
  for (int chunk = 0; chunk < l.chunks; ++chunk) {
    const pipeline::LayerRange range =
        l.pp == 1 ? pipeline::LayerRange{.first = 0, .count = w.config.layers}
                  : pipeline::layers_of(schedule, w.config.layers, schedule.virtual_stage(s, chunk));
    for (std::int64_t k = range.first; k < range.first + range.count; ++k) mine.push_back(k);
  }
  return mine;
}

// The programme's options for each of a stage's `blocks`: per policy, the bytes it holds (`flight` micro-batches at
// once; the last block alone where activations are spilled without a pipeline) and its seconds per step.
std::vector<std::vector<StrategyCost>> block_options(const Layout& l, const Workload& w, const BlockSeconds& block,
                                                     std::int64_t blocks, std::int64_t flight) {
  std::vector<std::vector<StrategyCost>> options;
  for (std::int64_t k = 0; k < blocks; ++k) {
    std::vector<StrategyCost>& o = options.emplace_back();
    for (Recompute p : kPolicies) {
      const std::int64_t held = l.offload == Offload::spill_activations && l.pp == 1
                                    ? (k + 1 == blocks ? 1 : 0) * block_activation_bytes(l, w, p)
                                    : flight * block_activation_bytes(l, w, p);
      o.push_back({.memory = held,
                   .seconds = static_cast<double>(l.micro_batches) *
                              (block.forward + block.backward[static_cast<int>(p)])});
    }
  }
  return options;
}

// Galvatron's programme for stage s (its prediction without recomputation `m`): its blocks' policies within the
// device memory the states and the rest of the activations leave, set in l.recompute; false where none fits.
bool choose_stage_recompute(Layout& l, const Workload& w, const Cluster& c, const MemoryPrediction& m,
                            const BlockSeconds& block, const InFlight& in_flight, int s) {
  const std::vector<std::int64_t> mine = blocks_of_stage(l, w, in_flight.schedule, s);
  const auto blocks_here = static_cast<std::int64_t>(mine.size());
  // The stage's non-block activations: its peak with no recomputation less its blocks' share.
  const std::int64_t none = block_activation_bytes(l, w, Recompute::none);
  const std::int64_t flight = in_flight.per_stage[static_cast<std::size_t>(s)];
  const std::int64_t blocks_none = (l.pp == 1 ? 1 : flight) * blocks_here * none;
  const std::int64_t rest = std::max<std::int64_t>(static_cast<std::int64_t>(m.device.activations) - blocks_none, 0);
  const auto states =
      static_cast<std::int64_t>(m.device.parameters + m.device.gradients + m.device.optimizer + m.device.workspace);
  const std::int64_t budget = static_cast<std::int64_t>(c.device_memory) - states - std::max(rest, none);
  const std::vector<std::vector<StrategyCost>> options = block_options(l, w, block, blocks_here, flight);
  const std::int64_t unit = std::max<std::int64_t>(1, budget / 256);
  const DpChoice choice = choose_strategies(options, budget, unit, [](int, int, int) { return 0.0; });
  if (!choice.feasible) return false;
  // Blocks whose options are alike are interchangeable: the programme's many equal-cost orders become one, the
  // cheapest policies first ("full*3,none*1", not "full*1,none*1,full*2").
  std::vector<int> strategy = choice.strategy;
  const bool alike = std::all_of(options.begin(), options.end(), [&](const std::vector<StrategyCost>& o) {
    return std::equal(o.begin(), o.end(), options[0].begin(), options[0].end(),
                      [](const StrategyCost& a, const StrategyCost& b) {
                        return a.memory == b.memory && a.seconds == b.seconds;
                      });
  });
  if (alike) std::sort(strategy.begin(), strategy.end(), std::greater<>());
  for (std::int64_t k = 0; k < blocks_here; ++k) {
    l.recompute[static_cast<std::size_t>(mine[static_cast<std::size_t>(k)])] =
        kPolicies[strategy[static_cast<std::size_t>(k)]];
  }
  return true;
}

// The plan of a layout whose recomputation is chosen and whose memory (`exact`) fits: its predicted step, and the
// seconds its recomputation adds.
Plan plan_of(const Layout& l, const Workload& w, const Cluster& c, const MemoryPrediction& exact,
             const BlockSeconds& block) {
  // Ranks sharing cores: the calls' participants counted by running the layout's step once (plan/run.hpp).
  const bool count_calls = c.call_seconds > 0 && !c.has_device && runs_on_cpu(l, w);
  Plan p{.layout = l,
         .memory = exact,
         .time = predict_step(l, w, c, count_calls ? count_call_participants(l, w) : 0.0),
         .recompute_seconds = 0,
         .runnable = runnable(l, c.has_device),
         .why = {}};
  for (const Recompute policy : l.recompute) {
    p.recompute_seconds += l.micro_batches * (block.backward[static_cast<int>(policy)] - block.backward[0]);
  }
  if (l.pp > 1) p.recompute_seconds /= l.pp;
  return p;
}

// A layout's plan, or why it has none: its states do not fit, or its activations do not at any recomputation. Every
// layout may recompute (pipelines' stages too): with none, where the activations fit, the programme would choose it.
Evaluated evaluate_layout(Layout l, const Request& r) {
  const Workload& w = r.workload;
  const Cluster& c = r.cluster;
  const auto layers = static_cast<std::size_t>(w.config.layers);
  Evaluated out;
  l.recompute.assign(layers, Recompute::full);
  out.least_memory = device_need(l, w);
  l.recompute.assign(layers, Recompute::none);
  const std::vector<MemoryPrediction> stages = predict_memory_by_stage(l, w);
  for (const MemoryPrediction& s : stages) {
    const std::uint64_t states = s.device.parameters + s.device.gradients + s.device.optimizer + s.device.workspace;
    if (states > c.device_memory || s.host.total() > c.host_memory) {
      out.outcome = Outcome::states;
      return out;
    }
  }
  const auto fits = [&](const MemoryPrediction& m) {
    return m.device.total() <= c.device_memory && m.host.total() <= c.host_memory;
  };
  const bool plain = std::all_of(stages.begin(), stages.end(), fits);
  if (!plain && out.least_memory > c.device_memory) {
    out.outcome = Outcome::activations;
    return out;
  }
  const BlockSeconds block = block_seconds(l, w, c);
  const InFlight in_flight = in_flight_of(l);
  for (int s = 0; s < l.pp && !plain; ++s) {
    if (!choose_stage_recompute(l, w, c, stages[static_cast<std::size_t>(s)], block, in_flight, s)) {
      out.outcome = Outcome::activations;
      return out;
    }
  }
  // The programme reserved conservatively; the exact formulas decide.
  const MemoryPrediction exact = predict_memory(l, w);
  if (!fits(exact)) {
    out.outcome = Outcome::activations;
    return out;
  }
  out.plan = plan_of(l, w, c, exact, block);
  return out;
}

// The largest difference between a plan and the best one, as a reason.
std::string reason(const Plan& p, const Plan& best) {
  std::ostringstream os;
  const double ratio = p.time.seconds / best.time.seconds - 1;
  os.precision(2);
  os << std::fixed << '+' << 100 * ratio << "%: ";
  const auto compute = [](const Plan& x) {
    return x.time.pipeline * (1 - x.time.bubble) - x.time.tensor_comm - x.recompute_seconds;
  };
  struct Part {
    const char* name;
    double delta;
  };
  const Part parts[] = {
      {"bubble", p.time.pipeline * p.time.bubble - best.time.pipeline * best.time.bubble},
      {"tensor-parallel communication", p.time.tensor_comm - best.time.tensor_comm},
      {"recomputation", p.recompute_seconds - best.recompute_seconds},
      {"compute per rank", compute(p) - compute(best)},
      {"data-parallel all-reduce", p.time.data_parallel - best.time.data_parallel},
      {"optimizer", p.time.optimizer - best.time.optimizer},
      {"offload copies", p.time.offload - best.time.offload},
      {"work shared among the cores",
       std::max(0.0, p.time.work - p.time.critical) - std::max(0.0, best.time.work - best.time.critical)},
  };
  const Part* top = &parts[0];
  for (const Part& part : parts) {
    if (part.delta > top->delta) top = &part;
  }
  os.precision(3);
  os << "more " << top->name << " (+" << 1e3 * top->delta << " ms)";
  return os.str();
}

// Whether some recomputation of `l` fits at all: its states, and its activations with every block recomputed.
bool fits_at_all(Layout l, const Request& r) {
  l.recompute.assign(static_cast<std::size_t>(r.workload.config.layers), Recompute::full);
  const MemoryPrediction m = predict_memory(l, r.workload);
  return m.device.total() <= r.cluster.device_memory && m.host.total() <= r.cluster.host_memory;
}

// The request's own choices of a dimension, as messages name them ("dp = 5 (--dp, which does not divide the GPUs),
// 2D layouts only (--layout)"); empty where it fixes none.
std::string choices_of(const Request& r) {
  std::vector<std::string> fixed;
  for (const auto& [name, value] : {std::pair{"dp", r.dp}, std::pair{"pp", r.pp}}) {
    if (!value) continue;
    fixed.push_back(std::string(name) + " = " + std::to_string(*value) + " (--" + name +
                    (r.cluster.gpus % *value != 0 ? ", which does not divide the GPUs)" : ")"));
  }
  if (r.only) fixed.push_back(std::string(name_of(*r.only)) + " layouts only (--layout)");
  std::string text;
  for (const std::string& f : fixed) text += (text.empty() ? "" : ", ") + f;
  return text;
}

std::string fewest_gpus_message(const Request& r) {
  const int g = r.cluster.gpus;
  for (int more = g + 1; more <= 4 * g; ++more) {
    Request bigger = r;
    bigger.cluster.gpus = more;
    for (const Layout& l : enumerate_layouts(bigger, more)) {
      if (fits_at_all(l, bigger)) return std::to_string(more) + " GPUs would fit (" + describe(l) + ", recomputing)";
    }
  }
  return "no count up to " + std::to_string(4 * g) + " GPUs fits either";
}

void check_request(const Request& r) {
  validate(r.cluster);
  validate(r.workload.config);
  const Workload& w = r.workload;
  OPTIMUS_CHECK(w.global_batch >= 1 && w.seq >= 1 && w.seq <= w.config.max_seq && w.element_bytes >= 1 &&
                    w.saved_bytes >= 1 && r.max_micro_batches >= 1 && r.max_chunks >= 1,
                "plan: global batch ", w.global_batch, ", sequence ", w.seq, " (max_seq ", w.config.max_seq,
                "), element bytes ", w.element_bytes, ", saved bytes ", w.saved_bytes, ", max micro-batches ",
                r.max_micro_batches, " and max chunks ", r.max_chunks, " must be positive (sequence <= max_seq)");
}

// The layout with the least memory any layout needs (every block fully recomputed), for the message of no plan.
struct Least {
  std::uint64_t bytes = UINT64_MAX;
  std::string layout;
};

// Counts and records why `l` has no plan (Evaluated's outcome).
void reject(Result& out, const Layout& l, const Evaluated& e, const Request& r) {
  if (e.outcome == Outcome::states) {
    ++out.pruned_states;
    out.rejected.push_back(
        {.layout = l, .why = "model states exceed the device's " + gib(static_cast<double>(r.cluster.device_memory))});
  }
  if (e.outcome == Outcome::activations) {
    ++out.pruned_memory;
    out.rejected.push_back({.layout = l,
                            .why = "no recomputation fits: it needs at least " +
                                   gib(static_cast<double>(e.least_memory)) + " per rank"});
  }
}

// "; the nearest GPU counts that admit one: 6 and 8" (below and above r's, up to four times as many).
std::string nearest_gpu_counts(const Request& r) {
  int below = 0, above = 0;
  for (int g = r.cluster.gpus - 1; g >= 1 && below == 0; --g) {
    if (!enumerate_layouts(r, g).empty()) below = g;
  }
  for (int g = r.cluster.gpus + 1; g <= 4 * r.cluster.gpus && above == 0; ++g) {
    if (!enumerate_layouts(r, g).empty()) above = g;
  }
  std::ostringstream os;
  os << "; the nearest GPU counts that admit one: ";
  if (below > 0) os << below;
  if (below > 0 && above > 0) os << " and ";
  if (above > 0) os << above;
  if (below == 0 && above == 0) os << "none up to " << 4 * r.cluster.gpus;
  return os.str();
}

// Why no plan came of the request: no layout (its own choices, or the shapes), none Optimus runs, or none that fits.
std::string infeasible(const Request& r, const std::vector<Layout>& layouts, const Result& out, const Least& least) {
  const Workload& w = r.workload;
  std::ostringstream os;
  const std::string shapes = "the model's shapes (batch " + std::to_string(w.global_batch) + ", heads " +
                             std::to_string(w.config.heads) + ", hidden " + std::to_string(w.config.hidden) + ", ffn " +
                             std::to_string(w.config.ffn) + ", layers " + std::to_string(w.config.layers) + ")";
  // The request's own choices (--dp, --pp, --layout) where they, not the shapes, leave nothing.
  const std::string fixed = choices_of(r);
  Request open = r;
  open.dp.reset();
  open.pp.reset();
  open.only.reset();
  const std::size_t unfixed = layouts.empty() && !fixed.empty() ? enumerate_layouts(open, r.cluster.gpus).size() : 0;
  if (unfixed > 0) {
    os << "no layout of " << r.cluster.gpus << " GPUs with " << fixed << " satisfies " << shapes
       << "; without those choices " << unfixed << " layouts do";
  } else if (layouts.empty()) {
    os << "no layout of " << r.cluster.gpus << " GPUs satisfies " << shapes << nearest_gpu_counts(r);
  } else if (r.runnable_only && out.not_runnable == out.enumerated) {
    os << "Optimus cannot yet run any of the " << out.enumerated << " layouts on this cluster";
  } else {
    os << "nothing fits in " << gib(static_cast<double>(r.cluster.device_memory))
       << " of device memory per rank: the least any of the " << out.enumerated << " layouts of " << r.cluster.gpus
       << " GPUs needs is " << gib(static_cast<double>(least.bytes)) << " (" << least.layout << "); "
       << fewest_gpus_message(r);
  }
  return os.str();
}

}  // namespace

std::optional<Plan> evaluate(const Layout& layout, const Request& request) {
  if (!shape_error(layout, request.workload).empty()) return std::nullopt;
  return evaluate_layout(layout, request).plan;
}

Result plan(const Request& r) {
  check_request(r);
  Result out;
  const std::vector<Layout> layouts = enumerate_layouts(r, r.cluster.gpus);
  out.enumerated = static_cast<std::int64_t>(layouts.size());
  Least least;
  // Offload modes follow their layout's none (enumerate_layouts' order): tried only when none needs memory.
  bool none_fits_plainly = false;
  std::int64_t done = 0;
  for (const Layout& l : layouts) {
    if (r.progress) r.progress({.phase = Progress::Phase::evaluating, .done = done++, .total = out.enumerated});
    if (l.offload == Offload::none) {
      none_fits_plainly = false;
    } else if (none_fits_plainly) {
      ++out.pruned_offload;
      continue;
    }
    if (r.runnable_only && !runnable(l, r.cluster.has_device).empty()) {
      ++out.not_runnable;
      continue;
    }
    const Evaluated e = evaluate_layout(l, r);
    if (e.least_memory < least.bytes) {
      Layout recomputed = l;
      recomputed.recompute.assign(recomputed.recompute.size(), Recompute::full);
      least = {.bytes = e.least_memory, .layout = describe(recomputed)};
    }
    reject(out, l, e, r);
    if (!e.plan) continue;
    if (l.offload == Offload::none) {
      none_fits_plainly = std::all_of(e.plan->layout.recompute.begin(), e.plan->layout.recompute.end(),
                                      [](Recompute p) { return p == Recompute::none; });
    }
    out.plans.push_back(*e.plan);
  }
  std::stable_sort(out.plans.begin(), out.plans.end(),
                   [](const Plan& a, const Plan& b) { return a.time.seconds < b.time.seconds; });
  for (std::size_t i = 0; i < out.plans.size(); ++i) {
    out.plans[i].why = i == 0 ? "fastest" : reason(out.plans[i], out.plans[0]);
  }
  if (out.plans.empty()) out.infeasible = infeasible(r, layouts, out, least);
  return out;
}

std::optional<Plan> best_runnable(const Result& result) {
  for (const Plan& p : result.plans) {
    if (p.runnable.empty()) return p;
  }
  return std::nullopt;
}

}  // namespace optimus::plan
