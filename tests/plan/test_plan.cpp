// The planner (optimus/plan): Galvatron's programme against brute force, the enumeration's rules and memory budget,
// the recomputation it chooses under pressure, infeasible requests, the calibration file's errors and the JSON.
// (memory_model_cases.cpp: the memory model against the trackers of real runs.)
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/plan/calibrate.hpp"
#include "optimus/plan/plan_report.hpp"
#include "optimus/plan/planner.hpp"
#include "optimus/plan/recompute_dp.hpp"
#include "optimus/plan/run.hpp"
#include "optimus/plan/traffic.hpp"

namespace {

using optimus::Recompute;
namespace plan = optimus::plan;

// Every assignment of strategies, the least time within the budget (memory summed exactly in bytes).
double brute_force(const std::vector<std::vector<plan::StrategyCost>>& options, std::int64_t budget,
                   const std::function<double(int, int, int)>& transition) {
  const std::size_t layers = options.size(), strategies = options[0].size();
  std::size_t count = 1;
  for (std::size_t i = 0; i < layers; ++i) count *= strategies;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t code = 0; code < count; ++code) {
    std::size_t rest = code;
    std::int64_t memory = 0;
    double seconds = 0;
    int previous = -1;
    for (std::size_t i = 0; i < layers; ++i) {
      const int s = static_cast<int>(rest % strategies);
      rest /= strategies;
      memory += options[i][static_cast<std::size_t>(s)].memory;
      seconds += options[i][static_cast<std::size_t>(s)].seconds;
      if (previous >= 0) seconds += transition(static_cast<int>(i), previous, s);
      previous = s;
    }
    if (memory <= budget) best = std::min(best, seconds);
  }
  return best;
}

plan::Request small_request(int gpus, std::uint64_t memory) {
  plan::Request r;
  r.cluster = plan::Cluster{.gpus = gpus,
                            .gpus_per_node = gpus,
                            .device_memory = memory,
                            .host_memory = memory,
                            .has_device = false,
                            .intra = {.bandwidth = 10e9, .latency = 5e-6},
                            .inter = {.bandwidth = 10e9, .latency = 5e-6},
                            .gemm_flops = 50e9,
                            .element_rate = 1e9,
                            .stream_rate = 2e9,
                            .optimizer_rate = 3e8,
                            .host_link = 0,
                            .overlap = 0,
                            .cores = gpus,
                            .source = "test"};
  optimus::GptConfig& c = r.workload.config;
  c.vocab = 500;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.layers = 4;
  c.max_seq = 32;
  c.dropout = 0.1;
  r.workload.global_batch = 16;
  r.workload.seq = 32;
  r.workload.element_bytes = r.workload.saved_bytes = 4;
  r.max_micro_batches = 4;
  return r;
}

}  // namespace

TEST_CASE("Galvatron's programme finds brute force's least time within the budget, and its choice fits") {
  optimus::CounterRng rng(7, 0);
  std::uint64_t draw = 0;
  const auto uniform = [&] { return rng.uniform(draw++, 0); };
  for (int trial = 0; trial < 60; ++trial) {
    const int layers = 1 + trial % 6, strategies = 1 + trial % 3;
    std::vector<std::vector<plan::StrategyCost>> options(static_cast<std::size_t>(layers));
    std::int64_t most = 0;
    for (auto& o : options) {
      for (int s = 0; s < strategies; ++s) {
        // Unit 1: memory in whole bytes, so the programme is exact and must equal brute force.
        o.push_back({.memory = static_cast<std::int64_t>(uniform() * 100), .seconds = 1 + uniform() * 10});
        most += o.back().memory;
      }
    }
    const std::int64_t budget = static_cast<std::int64_t>(uniform() * static_cast<double>(most) / strategies);
    const auto transition = [&](int layer, int from, int to) { return from == to ? 0.0 : 0.1 * layer; };
    const plan::DpChoice dp = plan::choose_strategies(options, budget, 1, transition);
    const double expected = brute_force(options, budget, transition);
    INFO("trial " << trial << ": " << layers << " layers, " << strategies << " strategies, budget " << budget);
    REQUIRE(dp.feasible == (expected != std::numeric_limits<double>::infinity()));
    if (!dp.feasible) continue;
    CHECK(dp.seconds == doctest::Approx(expected).epsilon(1e-12));
    CHECK(dp.memory <= budget);
    double seconds = 0;
    std::int64_t memory = 0;
    for (int i = 0; i < layers; ++i) {
      const int s = dp.strategy[static_cast<std::size_t>(i)];
      seconds += options[static_cast<std::size_t>(i)][static_cast<std::size_t>(s)].seconds;
      memory += options[static_cast<std::size_t>(i)][static_cast<std::size_t>(s)].memory;
      if (i > 0) seconds += transition(i, dp.strategy[static_cast<std::size_t>(i - 1)], s);
    }
    CHECK(seconds == doctest::Approx(dp.seconds).epsilon(1e-12));
    CHECK(memory == dp.memory);
  }
  // Coarser units round each block's memory up: never over the budget.
  const std::vector<std::vector<plan::StrategyCost>> two = {
      {{.memory = 60, .seconds = 1}, {.memory = 10, .seconds = 2}},
      {{.memory = 60, .seconds = 1}, {.memory = 10, .seconds = 2}}};
  const auto free = [](int, int, int) { return 0.0; };
  CHECK(plan::choose_strategies(two, 120, 1, free).seconds == 2);  // both cheap ones fit exactly
  CHECK(plan::choose_strategies(two, 119, 1, free).seconds == 3);
  CHECK(plan::choose_strategies(two, 120, 50, free).seconds == 4);  // 60 B round up to 2 units of 50, 10 B to 1
  CHECK_FALSE(plan::choose_strategies(two, 19, 1, free).feasible);
  CHECK_THROWS_AS(plan::choose_strategies(two, 100, 0, free), optimus::Error);
}

TEST_CASE("the planner: every plan has the job's ranks, fits the shapes and the memory, fastest first") {
  const plan::Request r = small_request(8, std::uint64_t{1} << 30);
  const plan::Result result = plan::plan(r);
  REQUIRE(result.plans.size() > 12);
  CHECK(result.infeasible.empty());
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const plan::Plan& p = result.plans[i];
    INFO(plan::describe(p.layout));
    CHECK(p.layout.ranks() == 8);
    CHECK(plan::shape_error(p.layout, r.workload).empty());
    CHECK(p.memory.device.total() <= r.cluster.device_memory);
    CHECK(p.time.seconds > 0);
    if (i > 0) CHECK(p.time.seconds >= result.plans[i - 1].time.seconds);
    CHECK_FALSE(p.why.empty());
    // CPU ranks: nothing offloads; the 1D baseline has no replicas to run.
    CHECK(p.layout.offload == optimus::Offload::none);
    CHECK(p.runnable == plan::runnable(p.layout, false));
  }
  // Both tensor layouts and pipelines are in the space.
  bool one_d = false, piped = false;
  for (const plan::Plan& p : result.plans) {
    one_d = one_d || p.layout.tensor == plan::TensorParallel::one_d;
    piped = piped || p.layout.pp > 1;
  }
  CHECK(one_d);
  CHECK(piped);
  REQUIRE(plan::best_runnable(result).has_value());
  CHECK(plan::best_runnable(result)->runnable.empty());
}

TEST_CASE("the planner reports its progress for each candidate it enumerates, then once per layout, in order") {
  plan::Request r = small_request(8, std::uint64_t{1} << 30);
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;
  std::int64_t candidates = 0;
  r.progress = [&](const plan::Progress& p) {
    if (p.phase == plan::Progress::Phase::enumerating) {
      CHECK(calls.empty());  // enumeration comes first
      CHECK(p.done == ++candidates);
      CHECK(p.total == 0);
    } else {
      calls.emplace_back(p.done, p.total);
    }
  };
  const plan::Result result = plan::plan(r);
  CHECK(candidates >= result.enumerated);  // every layout kept was a candidate
  REQUIRE(static_cast<std::int64_t>(calls.size()) == result.enumerated);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    CHECK(calls[k].first == static_cast<std::int64_t>(k));
    CHECK(calls[k].second == result.enumerated);
  }
}

TEST_CASE("under memory pressure the planner recomputes the fewest blocks that make a layout fit") {
  // dp = 1, pp = 1, q = 2, one micro-batch: its memory without recomputation and with every block recomputed.
  plan::Request r = small_request(4, std::uint64_t{1} << 30);
  r.only = plan::TensorParallel::two_d;
  plan::Layout l{.tensor = plan::TensorParallel::two_d,
                 .tp = 4,
                 .dp = 1,
                 .pp = 1,
                 .schedule = optimus::pipeline::Kind::one_f_one_b,
                 .chunks = 1,
                 .micro_batches = 1,
                 .offload = optimus::Offload::none,
                 .recompute = std::vector<Recompute>(4, Recompute::none)};
  const std::uint64_t plain = plan::predict_memory(l, r.workload).device.total();
  l.recompute.assign(4, Recompute::full);
  const std::uint64_t least = plan::predict_memory(l, r.workload).device.total();
  REQUIRE(least < plain);
  r.cluster.device_memory = (plain + least) / 2;
  l.recompute.assign(4, Recompute::none);  // the planner chooses
  const std::optional<plan::Plan> p = plan::evaluate(l, r);
  REQUIRE(p.has_value());
  CHECK(p->memory.device.total() <= r.cluster.device_memory);
  int recomputed = 0;
  for (Recompute x : p->layout.recompute) recomputed += x != Recompute::none ? 1 : 0;
  CHECK(recomputed >= 1);
  CHECK(recomputed <= 4);
  CHECK(p->recompute_seconds > 0);
  // With memory to spare, none.
  r.cluster.device_memory = plain;
  const std::optional<plan::Plan> roomy = plan::evaluate(p->layout, r);
  REQUIRE(roomy.has_value());
  for (Recompute x : roomy->layout.recompute) CHECK(x == Recompute::none);
  // Below the least: nothing.
  r.cluster.device_memory = least - 1;
  CHECK_FALSE(plan::evaluate(p->layout, r).has_value());
}

TEST_CASE("infeasible requests name the least memory, or the GPU counts, that would work") {
  plan::Request r = small_request(4, 4096);
  const plan::Result none_fit = plan::plan(r);
  CHECK(none_fit.plans.empty());
  CHECK(none_fit.infeasible.find("nothing fits in") != std::string::npos);
  CHECK(none_fit.infeasible.find("the least any of the") != std::string::npos);
  CHECK(none_fit.pruned_states + none_fit.pruned_memory > 0);
  REQUIRE(static_cast<std::int64_t>(none_fit.rejected.size()) == none_fit.pruned_states + none_fit.pruned_memory);
  for (const plan::Rejected& x : none_fit.rejected) {
    CHECK((x.why.find("model states exceed the device's 0.00391 MiB") == 0 ||
           x.why.find("no recomputation fits: it needs at least ") == 0));
  }
  // More GPUs shard the states: 1 MiB per rank fits on some larger count, which the message names.
  r.cluster.device_memory = std::uint64_t{3} << 19;
  r.workload.config.layers = 16;
  const plan::Result tight = plan::plan(r);
  if (tight.plans.empty()) CHECK(tight.infeasible.find("GPUs would fit") != std::string::npos);
  // 7 GPUs: no dp x pp x tp of 7 suits a batch of 16, 4 heads and 4 blocks (nor does 6: pp = 3 does not divide 4
  // blocks, dp = 3 or 6 not the batch, t = 3 or 6 not the heads).
  plan::Request seven = small_request(7, std::uint64_t{1} << 30);
  const plan::Result odd = plan::plan(seven);
  CHECK(odd.enumerated == 0);
  CHECK(odd.infeasible.find("no layout of 7 GPUs") != std::string::npos);
  CHECK(odd.infeasible.find("nearest GPU counts that admit one: 4 and 8") != std::string::npos);
}

TEST_CASE("a link's alpha-beta fit: least squares where the times grow with the bytes, a positive bound where not") {
  const std::vector<double> bytes = {4096, 32768, 262144, 2097152};
  // t = 2e-6 + 1e-10 b exactly: the fit recovers both.
  std::vector<double> seconds;
  for (const double b : bytes) seconds.push_back(2e-6 + 1e-10 * b);
  const plan::LinkFit exact = plan::fit_link(bytes, seconds);
  CHECK(exact.alpha == doctest::Approx(2e-6).epsilon(1e-9));
  CHECK(exact.beta == doctest::Approx(1e-10).epsilon(1e-9));
  // Times that shrink as the messages grow (an in-process broadcast on a busy machine, as CI once measured: beta
  // -9.5e-12 s/B, which --plan auto refused): beta is the largest message's cost per byte, alpha 0.
  const plan::LinkFit noisy = plan::fit_link(bytes, {3e-5, 2.9e-5, 2.8e-5, 2.5e-5});
  CHECK(noisy.alpha == 0.0);
  CHECK(noisy.beta == doctest::Approx(2.5e-5 / 2097152));
  CHECK(plan::fit_link(bytes, {0, 0, 0, 0}).beta > 0);  // faster than the clock: still a bandwidth
  CHECK_THROWS_WITH_AS(plan::fit_link({4096}, {1e-6}), doctest::Contains("1 sizes"), optimus::Error);
  CHECK_THROWS_WITH_AS(plan::fit_link({4096, 8192}, {1e-6, -1.0}), doctest::Contains("-1 s is not a measurement"),
                       optimus::Error);
}

TEST_CASE("bad requests and calibration files are errors naming the value") {
  plan::Request r = small_request(4, std::uint64_t{1} << 30);
  r.cluster.gemm_flops = 0;
  CHECK_THROWS_WITH_AS(plan::plan(r), doctest::Contains("GEMM rate 0"), optimus::Error);
  r = small_request(4, std::uint64_t{1} << 30);
  r.cluster.overlap = 1.5;
  CHECK_THROWS_WITH_AS(plan::plan(r), doctest::Contains("overlap 1.5"), optimus::Error);
  r = small_request(4, std::uint64_t{1} << 30);
  r.cluster.call_seconds = -1e-6;
  CHECK_THROWS_WITH_AS(plan::plan(r), doctest::Contains("-1e-06 seconds per collective call"), optimus::Error);
  r = small_request(4, std::uint64_t{1} << 30);
  r.workload.global_batch = 0;
  CHECK_THROWS_WITH_AS(plan::plan(r), doctest::Contains("global batch 0"), optimus::Error);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "optimus_test_plan";
  std::filesystem::create_directories(dir);
  const std::string missing = (dir / "missing.json").string(), broken = (dir / "broken.json").string();
  std::ofstream(missing) << "{\"ranks\": 2, \"broadcast_alpha_s\": 1e-5, \"broadcast_beta_s_per_byte\": 1e-10,"
                            " \"allreduce_alpha_s\": 1e-5, \"allreduce_beta_s_per_byte\": 1e-10,"
                            " \"gemm_gflops_per_rank\": 50, \"gelu_elements_per_s\": 1e8,"
                            " \"axpby_elements_per_s\": 1e9}";
  std::ofstream(broken) << "{\"ranks\": 2,";
  CHECK_THROWS_WITH_AS(plan::read_calibration(missing, 4, 2, 1 << 30), doctest::Contains("adamw_parameters_per_s"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(plan::read_calibration(broken, 4, 2, 1 << 30), doctest::Contains("is not JSON"), optimus::Error);
  CHECK_THROWS_WITH_AS(plan::read_calibration((dir / "nope.json").string(), 4, 2, 1 << 30),
                       doctest::Contains("cannot read"), optimus::Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the JSON holds every plan with its layout, memory by kind and time") {
  const plan::Request r = small_request(4, std::uint64_t{1} << 30);
  const plan::Result result = plan::plan(r);
  const nlohmann::json j = nlohmann::json::parse(plan::to_json(r, result));
  REQUIRE(j["plans"].size() == result.plans.size());
  CHECK(j["enumerated"].get<std::int64_t>() == result.enumerated);
  const plan::Plan& first = result.plans[0];
  CHECK(j["plans"][0]["layout"].get<std::string>() == plan::describe(first.layout));
  CHECK(j["plans"][0]["step_seconds"].get<double>() == first.time.seconds);
  CHECK(j["plans"][0]["device_bytes"]["activations"].get<std::uint64_t>() == first.memory.device.activations);
  CHECK(j["plans"][0]["recompute"].size() == 4);
  CHECK(plan::table(result, 3).size() == 4 + std::min<std::size_t>(result.rejected.size(), 3) +
                                             (result.rejected.size() > 3 ? 1 : 0));  // header, rows, rejections
  CHECK(j["rejected"].size() == result.rejected.size());
}

TEST_CASE("pipelines: recomputation shrinks each stage's predicted activations, and the planner uses it, runnable") {
  plan::Request r = small_request(4, std::uint64_t{1} << 30);
  for (const auto kind : {optimus::pipeline::Kind::one_f_one_b, optimus::pipeline::Kind::interleaved}) {
    plan::Layout l{.tensor = plan::TensorParallel::two_d,
                   .tp = 1,
                   .dp = 2,
                   .pp = 2,
                   .schedule = kind,
                   .chunks = kind == optimus::pipeline::Kind::interleaved ? 2 : 1,
                   .micro_batches = 4,
                   .offload = optimus::Offload::none,
                   .recompute = std::vector<Recompute>(4, Recompute::none)};
    INFO(plan::describe(l));
    const auto plain = plan::predict_memory_by_stage(l, r.workload);
    l.recompute.assign(4, Recompute::full);
    const auto full = plan::predict_memory_by_stage(l, r.workload);
    for (std::size_t s = 0; s < plain.size(); ++s) {
      CHECK(full[s].device.activations < plain[s].device.activations);
      CHECK(full[s].device.parameters == plain[s].device.parameters);
    }
    CHECK(plan::runnable(l, false).empty());  // pipelines' stages recompute (model/gpt.hpp)
    // Between the two: the planner recomputes some blocks, and the plan is one Optimus runs.
    l.recompute.assign(4, Recompute::none);
    r.cluster.device_memory = (plan::predict_memory(l, r.workload).device.total() +
                               [&] {
                                 plan::Layout f = l;
                                 f.recompute.assign(4, Recompute::full);
                                 return plan::predict_memory(f, r.workload).device.total();
                               }()) /
                              2;
    r.runnable_only = true;
    const std::optional<plan::Plan> p = plan::evaluate(l, r);
    REQUIRE(p.has_value());
    CHECK(p->memory.device.total() <= r.cluster.device_memory);
    CHECK(p->runnable.empty());
    bool recomputes = false;
    for (Recompute policy : p->layout.recompute) recomputes = recomputes || policy != Recompute::none;
    CHECK(recomputes);
  }
  // What cannot run anywhere: offloading without a device; what the planner leaves out: a pipeline's offload.
  plan::Layout offloaded{.tensor = plan::TensorParallel::one_d, .tp = 2, .dp = 2, .pp = 1,
                         .schedule = optimus::pipeline::Kind::one_f_one_b, .chunks = 1, .micro_batches = 1,
                         .offload = optimus::Offload::spill, .recompute = {}};
  CHECK(plan::runnable(offloaded, false) == "offload needs a device");
  CHECK(plan::runnable(offloaded, true).empty());
  offloaded.pp = 2;
  CHECK(plan::runnable(offloaded, true).find("does not count a pipeline's offload") != std::string::npos);
}

TEST_CASE("collective calls: counted by running a layout's step, the same for every block, charged where ranks share "
          "cores") {
  plan::Request r = small_request(4, std::uint64_t{1} << 30);
  const auto layout = [](int tp, int dp, int micro_batches, std::int64_t layers) {
    return plan::Layout{.tensor = plan::TensorParallel::two_d,
                        .tp = tp,
                        .dp = dp,
                        .pp = 1,
                        .schedule = optimus::pipeline::Kind::gpipe,
                        .chunks = 1,
                        .micro_batches = micro_batches,
                        .offload = optimus::Offload::none,
                        .recompute = std::vector<Recompute>(static_cast<std::size_t>(layers), Recompute::none)};
  };
  const auto count = [&](const plan::Layout& l) {
    plan::Workload w = r.workload;
    w.config.layers = static_cast<std::int64_t>(l.recompute.size());
    return plan::count_call_participants(l, w);
  };
  // One rank has no communicator of two ranks or more.
  CHECK(count(layout(1, 1, 1, 2)) == 0);
  // A q = 2 grid: every block adds the same calls; micro-batches add calls; so do replicas.
  const double one = count(layout(4, 1, 1, 1)), two = count(layout(4, 1, 1, 2)), three = count(layout(4, 1, 1, 3));
  CHECK(two > one);
  CHECK(three - two == two - one);
  CHECK(count(layout(4, 1, 2, 2)) > two);
  CHECK(count(layout(1, 4, 1, 2)) > 0);

  // Charged at call_seconds: the work grows by exactly call_seconds x the count, nothing else changes.
  const plan::Layout l = layout(4, 1, 1, 4);
  r.cluster.cores = 2;  // four ranks on two cores
  const std::optional<plan::Plan> free = plan::evaluate(l, r);
  r.cluster.call_seconds = 2e-6;
  const std::optional<plan::Plan> charged = plan::evaluate(l, r);
  REQUIRE(free.has_value());
  REQUIRE(charged.has_value());
  CHECK(free->time.calls == 0);
  CHECK(charged->time.calls == doctest::Approx(2e-6 * count(l)).epsilon(1e-12));
  CHECK(charged->time.work == doctest::Approx(free->time.work + charged->time.calls).epsilon(1e-12));
  CHECK(charged->time.critical == free->time.critical);
}

TEST_CASE("largest_batch: the batch it returns fits and one step more does not; bytes per sequence move it") {
  plan::Request r = small_request(4, 0);
  const auto layout = [](plan::TensorParallel kind) {
    return plan::Layout{.tensor = kind, .tp = 4, .recompute = std::vector<Recompute>(4, Recompute::full)};
  };
  for (const plan::Layout& l : {layout(plan::TensorParallel::two_d), layout(plan::TensorParallel::one_d)}) {
    CAPTURE(plan::describe(l));
    const std::int64_t step = l.tensor == plan::TensorParallel::two_d ? 2 : 1, held_per = step;
    const auto memory_at = [&](std::int64_t batch, std::int64_t extra) {
      plan::Workload w = r.workload;
      w.global_batch = batch;
      return static_cast<double>(plan::predict_memory(l, w).device.total()) +
             static_cast<double>(batch / held_per * extra);
    };
    r.workload.global_batch = 20;
    const auto bytes = static_cast<std::uint64_t>(memory_at(20, 0)) + 1000;
    for (const std::int64_t extra : {std::int64_t{0}, std::int64_t{50000}, std::int64_t{-20000}}) {
      CAPTURE(extra);
      const std::int64_t b = plan::largest_batch(l, r.workload, bytes, extra);
      CHECK(b % step == 0);
      CHECK(memory_at(b, extra) <= static_cast<double>(bytes));
      CHECK(memory_at(b + step, extra) > static_cast<double>(bytes));
      if (extra == 0) CHECK(b >= 20);
      if (extra > 0) CHECK(b < plan::largest_batch(l, r.workload, bytes, 0));
      if (extra < 0) CHECK(b > plan::largest_batch(l, r.workload, bytes, 0));
    }
    CHECK(plan::largest_batch(l, r.workload, 1000, 0) == 0);  // not even the model's states fit
  }
  plan::Layout odd = layout(plan::TensorParallel::one_d);
  odd.tp = 3;  // 3 ranks cannot split 4 heads
  CHECK_THROWS_WITH_AS(plan::largest_batch(odd, r.workload, 1 << 30, 0), doctest::Contains("t = 3 must divide heads 4"),
                       optimus::Error);
  CHECK_NOTHROW(plan::validate(plan::frontera_rtx_cluster(64, std::uint64_t{15} << 30)));
}

TEST_CASE("group_link: inside a node the fast link; across nodes the share of the adapters of the ranks a node holds") {
  plan::Cluster c = small_request(64, 1 << 30).cluster;
  c.gpus_per_node = 8;
  c.intra = {.bandwidth = 400e9, .latency = 1e-6};
  c.inter = {.bandwidth = 25e9, .latency = 7e-6};
  const auto check = [&](int members, int stride, bool inside, double bandwidth) {
    CAPTURE(members);
    CAPTURE(stride);
    const plan::GroupLink g = plan::group_link(c, members, stride);
    CHECK(g.inside == inside);
    CHECK(g.link.bandwidth == doctest::Approx(bandwidth));
    CHECK(g.link.latency == (inside ? 1e-6 : 7e-6));
  };
  check(8, 1, true, 400e9);       // a row of 8 on one node
  check(2, 4, true, 400e9);       // a column of 2, 4 apart: one node
  check(16, 1, false, 200e9);     // a ring over two nodes: 8 ranks' share of each node's adapters
  check(64, 1, false, 200e9);     // over eight
  check(4, 4, false, 50e9);       // a column 4 apart, 2 of its ranks per node
  check(8, 8, false, 25e9);       // a column strided by a node: one rank's share
  check(16, 16, false, 25e9);
  c.inter.bandwidth = 100e9;      // the adapters' share can exceed the fast link: the ring also passes through it
  check(16, 1, false, 400e9);
}

TEST_CASE("time model: BERT's blocks cost GPT-2's; its model's parts cost the end stages their GEMMs and SUMMA bytes") {
  const plan::Request r = small_request(4, 1 << 30);
  plan::Workload gpt = r.workload, blocks = gpt, bert = gpt;
  blocks.config.block.post_norm = true;  // BERT's blocks without the model's parts
  blocks.config.block.mlp = optimus::MlpKind::gelu_erf;
  blocks.config.block.bidirectional = true;
  bert.config.block = optimus::BlockConfig::bert();
  bert.config.block.norm.eps = 1e-5;  // the eps prices nothing
  const double n = 16.0 * 32, h = 64, gemm_flops = r.cluster.gemm_flops;
  for (const plan::TensorParallel kind : {plan::TensorParallel::one_d, plan::TensorParallel::two_d}) {
    for (const int tp : {1, 4}) {
      const plan::Layout l{.tensor = kind, .tp = tp, .dp = 1, .pp = 1, .schedule = optimus::pipeline::Kind::one_f_one_b,
                           .chunks = 1, .micro_batches = 1, .offload = optimus::Offload::none,
                           .recompute = std::vector<optimus::Recompute>(4, optimus::Recompute::none)};
      CAPTURE(plan::describe(l));
      const plan::StepPrediction a = plan::predict_step(l, gpt, r.cluster, 0),
                                 b = plan::predict_step(l, blocks, r.cluster, 0),
                                 c = plan::predict_step(l, bert, r.cluster, 0);
      // Post-norm, the exact GELU and bidirectional attention: the same GEMMs, passes and bytes as GPT-2's blocks.
      CHECK(b.pipeline == a.pipeline);
      CHECK(b.traffic.intra + b.traffic.inter == a.traffic.intra + a.traffic.inter);
      // The head transform's three GEMMs of n h h (split q^2 ways in 2D, whole on each rank in 1D, which replicates
      // it), and more: its GELU, the head's bias, the token types and the embeddings' norm.
      const double dense = 6 * n * h * h / (kind == plan::TensorParallel::two_d ? tp : 1) / gemm_flops;
      CHECK(c.pipeline > b.pipeline + dense);
      if (tp == 1) {  // no communication: exactly the GEMMs and the passes over [n, h] and the logits [n, 512]
        const double rows = n * h, logits = n * 512, stream = r.cluster.stream_rate, element = r.cluster.element_rate;
        // Stream passes over [n, h]: the token types' 2 + 2, the embeddings' norm's 3 + 6, the GELU's 2 + 3 (and one
        // element-wise pass each way); over the logits, the head bias's 2 + 1.
        const double passes = rows * (18 / stream + 2 / element) + 3 * logits / stream;
        CHECK(c.pipeline - b.pipeline == doctest::Approx(dense + passes).epsilon(1e-12));
      }
      // 2D: one more SUMMA for the dense layer, exactly its bytes (its bias's too); 1D: none (it is replicated).
      const std::uint64_t extra = c.traffic.intra + c.traffic.inter - (b.traffic.intra + b.traffic.inter);
      const std::uint64_t summa =
          kind == plan::TensorParallel::two_d && tp > 1 ? plan::linear_2d_bytes(512, 64, 64, 2, 4, 4, true) : 0;
      CHECK(extra == summa);
    }
  }
}
