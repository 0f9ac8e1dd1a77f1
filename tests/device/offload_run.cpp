// The offload suites' training run (offload_run.hpp).
#include "capture_binding.hpp"
#include "offload_run.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>

#include "../layers/layer_cases.hpp"

namespace optimus::test {
namespace {

// The in-process ranks sharing a device meet here between steps without communicating (a communicator's barrier would
// copy through the device). A rank that fails abandons the point with its error, and the others stop waiting,
// throwing that same error (so that whichever rank the harness reports, it reports the original failure).
class QuietPoint {
 public:
  explicit QuietPoint(int ranks) : ranks_(ranks) {}
  void meet() {
    std::unique_lock lock(mu_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    const bool met = cv_.wait_for(lock, std::chrono::minutes(5), [&] { return generation_ != generation || failure_; });
    if (failure_) std::rethrow_exception(failure_);
    OPTIMUS_CHECK(met, "the offload test's quiet point: another rank did not come in 5 minutes");
  }
  void abandon(std::exception_ptr failure) {
    const std::lock_guard lock(mu_);
    if (!failure_) failure_ = std::move(failure);
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ranks_, arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::exception_ptr failure_;  // the first failure
};

sim::Traffic traffic_of(RankDevice& rank) {
  auto* device = dynamic_cast<sim::Runtime*>(&rank.runtime());
  REQUIRE(device != nullptr);
  return device->traffic();
}

}  // namespace

OffloadRun train_offloaded(const SimLaunch& sim, const OffloadSetup& s, std::size_t capacity) {
  std::mutex mu;
  QuietPoint quiet(sim(SIZE_MAX, [](Communicator&, RankDevice&, Grid&) {}).ranks_per_device);
  std::map<int, OffloadRun> by_rank;  // the ranks of this process (all of them in-process, one under MPI)
  double copies[3] = {0, 0, 0};       // the steps' copies summed over ranks (each rank counts its device)
  const auto train_rank = [&](Communicator& world, RankDevice& rank, Grid& placed) {
    const GptConfig& config = s.config;
    const std::int64_t seq = config.max_seq;
    const std::vector<int> tokens = random_tokens(s.batch * seq, config.vocab, 5);
    const std::vector<int> targets = random_tokens(s.batch * seq, config.vocab, 6);
    const Grid grid = placed.with({.gemm_math = s.math});
    Gpt2D<float> model(grid, config, pipeline::one_stage(static_cast<int>(s.micro_batches)), s.spill);
    const BlockSpill<float>* spill = model.spills().empty() ? nullptr : model.spills().front();
    model.set_recompute(s.recompute);
    AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}, .offload = s.offload, .norm_order = {}});
    grid.memory().reset_peaks();
    OffloadRun mine;
    std::uint64_t allocations = 0, pinned = 0;
    const auto pinned_allocations = [&] {
      return spill != nullptr ? spill->activation_memory().stats().raw_allocations : 0;
    };
    // The devices' copies during the steps (not the gradients' gather): each rank reads its device when the ranks
    // that share it are between steps (a host barrier: a communicator's would copy too).
    const auto idle_traffic = [&] {
      rank.stream().synchronize();
      quiet.meet();
      const sim::Traffic t = traffic_of(rank);
      quiet.meet();
      return t;
    };
    sim::Traffic during{};
    for (int step = 1; step <= s.steps; ++step) {
      const sim::Traffic before = idle_traffic();
      model.zero_grad();
      mine.losses.push_back(
          model.train_step(tokens, targets, s.batch, static_cast<std::uint64_t>(step)));
      adamw.step();
      const sim::Traffic after = idle_traffic();
      during.host_to_device += after.host_to_device - before.host_to_device;
      during.device_to_host += after.device_to_host - before.device_to_host;
      during.device_to_device += after.device_to_device - before.device_to_device;
      if (step == 1) {
        allocations = rank.raw_allocations().memory;
        pinned = pinned_allocations();
        mine.first_gradients = model.gather(true);  // (AdamW leaves them as they were)
      }
    }
    const double h2d = world.all_reduce(static_cast<double>(during.host_to_device), ReduceOp::sum);
    const double d2h = world.all_reduce(static_cast<double>(during.device_to_host), ReduceOp::sum);
    const double d2d = world.all_reduce(static_cast<double>(during.device_to_device), ReduceOp::sum);
    mine.steady = rank.raw_allocations().memory == allocations && pinned_allocations() == pinned;
    mine.memory = grid.memory();
    if (adamw.offloaded() != nullptr) mine.moved = adamw.offloaded()->transfers();
    if (spill != nullptr) mine.spilled = spill->transfers();
    mine.parameters = model.gather(false);
    mine.evaluation = model.evaluate(tokens, targets, s.batch);
    mine.logits = model.logits(tokens, s.batch)->to_global().cast<double>();
    for (const ParameterRef<float>& p : model.parameters()) {
      mine.local_parameters += p.value.numel();
      if (p.value.device() != Device::cpu) mine.device_parameters += p.value.numel();
      if (p.name.starts_with("h.0.")) {
        mine.block_parameters += p.value.numel();
        if (p.name.ends_with(".weight") && p.shape.size() == 2) mine.block_weights += p.value.numel();
        ++mine.block_tensors;
      }
      if (p.name == "wte") mine.wte = p.value.numel();
    }
    mine.ranks = world.size();
    const std::lock_guard lock(mu);
    if (by_rank.empty()) {
      copies[0] = h2d;
      copies[1] = d2h;
      copies[2] = d2d;
    }
    by_rank[world.rank()] = std::move(mine);
  };
  const SimTotals totals = sim(capacity, [&](Communicator& world, RankDevice& rank, Grid& grid) {
    try {
      train_rank(world, rank, grid);
    } catch (...) {
      quiet.abandon(std::current_exception());
      throw;
    }
  });
  OffloadRun out = std::move(by_rank.begin()->second);  // this process's first rank's
  const auto per_device = [&](double v) {
    return static_cast<std::uint64_t>(v) / static_cast<std::uint64_t>(totals.ranks_per_device);
  };
  out.step_traffic = {.host_to_device = per_device(copies[0]), .device_to_host = per_device(copies[1]),
                      .device_to_device = per_device(copies[2])};
  out.device_bytes = totals.peak_bytes;
  return out;
}

void check_same_training(const OffloadRun& got, const OffloadRun& expected) {
  REQUIRE(got.losses.size() == expected.losses.size());
  for (std::size_t s = 0; s < got.losses.size(); ++s) {
    CAPTURE(s);
    CAPTURE(got.losses[s]);
    CAPTURE(expected.losses[s]);
    CHECK(std::memcmp(&got.losses[s], &expected.losses[s], sizeof(double)) == 0);
  }
  REQUIRE(got.parameters.size() == expected.parameters.size());
  CHECK(std::memcmp(&got.evaluation, &expected.evaluation, sizeof(double)) == 0);  // inference through the slots too
  const bool same_logits = got.logits.rows() == expected.logits.rows() && (got.logits.array() == expected.logits.array()).all();
  CHECK(same_logits);
  for (const auto& [name, m] : expected.first_gradients) {
    CAPTURE_BINDING(name);
    const GlobalMatrix& g = got.first_gradients.at(name);
    const double largest_difference = (g - m).cwiseAbs().maxCoeff();
    CAPTURE(largest_difference);
    const bool same_gradient = (g.array() == m.array()).all();
    CHECK(same_gradient);
  }
  for (const auto& [name, m] : expected.parameters) {
    CAPTURE_BINDING(name);
    const GlobalMatrix& g = got.parameters.at(name);
    REQUIRE(g.rows() == m.rows());
    REQUIRE(g.cols() == m.cols());
    const double largest_difference = (g - m).cwiseAbs().maxCoeff();
    CAPTURE(largest_difference);
    const bool same = (g.array() == m.array()).all();
    CHECK(same);
  }
}

int launch_q(const SimLaunch& sim) {
  std::atomic<int> q{0};
  sim(SIZE_MAX, [&](Communicator&, RankDevice&, Grid& grid) { q = grid.q(); });
  return q;
}

}  // namespace optimus::test
