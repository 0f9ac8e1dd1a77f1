// train_gpt's training loop (training_loop.hpp).
#include "training_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <span>
#include <variant>

namespace optimus::apps {
namespace {

// The next id's logits from the whole model's logits of q copies of the window (q divides the batch), on every rank.
Eigen::RowVectorXd last_row(const GlobalMatrix& logits, std::size_t window) {
  return logits.row(static_cast<Eigen::Index>(window) - 1);
}
std::vector<int> copies(const std::vector<int>& window, int q) {
  std::vector<int> tokens;
  for (int copy = 0; copy < q; ++copy) tokens.insert(tokens.end(), window.begin(), window.end());
  return tokens;
}

// The Trainee of a model of either family.
template <class Family>
Trainee model_trainee(Gpt<Family>& model, std::int64_t batch) {
  Trainee trainee;
  trainee.train_step = [&model, batch](const Batch& b, std::uint64_t step) {
    model.zero_grad();
    return model.train_step(b.tokens, b.targets, b.inputs, batch, step);
  };
  trainee.begin_step = [&model, batch](const Batch& b, std::uint64_t step, AdamW<float>& optimizer) {
    model.zero_grad();
    const auto partials = [&optimizer] { return optimizer.stage_squares(); };
    auto run = std::make_shared<typename Gpt<Family>::TrainStep>(
        model.begin_step(b.tokens, b.targets, b.inputs, batch, step, partials));
    return StepInFlight{.done = [run] { return run->done(); },
                        .ready = [run] { return run->ready(); },
                        .run_next = [run] { run->run_next(); },
                        .expire = [run] { run->expire(); },
                        .finish = [run] { return run->finish(); },
                        .stage_sums = [run] { return run->stage_sums(); }};
  };
  trainee.evaluate = [&model, batch](const Batch& b) { return model.evaluate(b.tokens, b.targets, b.inputs, batch); };
  trainee.next_logits = [&model](const std::vector<int>& window) {
    // Computed on the head's stage, then sent along each rank's pipeline (its length first) so that every rank samples
    // the same id.
    const int q = model.grid().q(), head = model.schedule().stage_of(model.schedule().virtual_stages() - 1);
    const std::optional<DistMatrix<float>> logits = model.logits(copies(window, q), q);
    Eigen::RowVectorXd row = logits ? last_row(logits->to_global().cast<double>(), window.size())
                                    : Eigen::RowVectorXd();
    double length = static_cast<double>(row.size());
    model.grid().pipe().broadcast(std::span<double>(&length, 1), head);
    row.conservativeResize(static_cast<Eigen::Index>(length));
    model.grid().pipe().broadcast(std::span<double>(row.data(), static_cast<std::size_t>(row.size())), head);
    return row;
  };
  return trainee;
}

}  // namespace

plan::Workload workload_of(const Setup& setup) {
  return {.config = setup.config, .global_batch = setup.batch * setup.run.layout.dp, .seq = setup.seq,
          .element_bytes = 4, .saved_bytes = setup.math == ops::GemmMath::bf16 ? 2 : 4};
}

void draw_step(const Setup& setup, const Tokens& ids, std::uint64_t seed, std::uint64_t step, int replica,
               int replicas, Batch& out) {
  const std::int64_t b = setup.batch, s = setup.seq;
  if (!setup.masking) {
    draw_batch(ids, b, s, seed, step, replica, replicas, out.tokens, out.targets);
    return;
  }
  MaskedLmConfig masking = *setup.masking;
  masking.seed = seed;
  draw_masked_batch(ids, b, s, MaskedLm(masking), step, replica, replicas, out);
}

Trainee trainee_of(plan::AnyGpt<float>& model, std::int64_t batch) {
  return std::visit([batch](auto& m) { return model_trainee(*m, batch); }, model);
}

StepLoop::StepLoop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, bool skip_nonfinite,
                   std::string label)
    : t_(t), setup_(setup), grid_(grid), root_(root), skip_nonfinite_(skip_nonfinite), label_(std::move(label)) {}

void StepLoop::prepare(int step) {
  const int warmup = std::max(1, setup_.steps / 20);
  const double progress = static_cast<double>(step) / setup_.steps;
  t_.optimizer->set_learning_rate(step <= warmup ? setup_.lr * step / warmup
                                                 : setup_.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress))));
  draw_step(setup_, setup_.corpus.train, setup_.config.seed, static_cast<std::uint64_t>(step), grid_.dp_index(),
            grid_.dp(), batch_);
}

void StepLoop::complete(int step, double loss) {
  complete_with(step, loss, [this] { return t_.optimizer->step(); });
}

void StepLoop::complete(int step, double loss, const std::vector<double>& stage_sums) {
  complete_with(step, loss, [this, &stage_sums] { return t_.optimizer->step_from(stage_sums); });
}

void StepLoop::complete_with(int step, double loss, const std::function<double()>& update) {
  OPTIMUS_CHECK(std::isfinite(loss) || skip_nonfinite_, "step ", step, ": the training loss is ", loss,
                "; stopping (--skip-nonfinite skips such steps)");
  const double norm = std::isfinite(loss) ? update() : loss;  // AdamW stops or skips a non-finite norm
  if (std::isfinite(norm)) {
    interval_loss_ += loss;
    ++interval_steps_;
  } else {
    ++skipped_steps_;
    if (root_) {
      std::printf("%sstep %5d  skipped: the %s is %g (parameters and AdamW unchanged)\n", label_.c_str(), step,
                  std::isfinite(loss) ? "gradient norm" : "loss", norm);
    }
  }
  if (step % setup_.every == 0 || step == setup_.steps) {
    const int n = std::max(interval_steps_, 1);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    last_loss_ = interval_steps_ > 0 ? interval_loss_ / n : std::numeric_limits<double>::quiet_NaN();
    if (root_ && interval_steps_ == 0) {
      std::printf("%sstep %5d  no loss: every step since the last print was skipped\n", label_.c_str(), step);
    } else if (root_) {
      std::printf("%sstep %5d  loss %.4f  tokens/s %9.0f  ms/step %7.1f\n", label_.c_str(), step, last_loss_,
                  static_cast<double>(n * setup_.batch * setup_.seq * grid_.dp()) / seconds,
                  1e3 * seconds / n);
    }
    if (root_) std::fflush(stdout);
    interval_loss_ = 0;
    interval_steps_ = 0;
    t0_ = std::chrono::steady_clock::now();
  }
  if (t_.save) {
    const auto before = std::chrono::steady_clock::now();
    t_.save(step);
    t0_ += std::chrono::steady_clock::now() - before;  // ms/step counts training, not saving
  }
}

double train_loop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, int first_step,
                  bool skip_nonfinite, int& skipped_steps) {
  StepLoop loop(t, setup, grid, root, skip_nonfinite, "");
  for (int step = first_step; step <= setup.steps; ++step) {
    loop.prepare(step);
    loop.complete(step, t.train_step(loop.batch(), static_cast<std::uint64_t>(step)));
  }
  skipped_steps = loop.skipped_steps();
  return loop.last_loss();
}

}  // namespace optimus::apps
