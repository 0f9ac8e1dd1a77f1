// train_gpt's training loop (training_loop.hpp).
#include "training_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <variant>

namespace optimus::examples {
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
  trainee.train_step = [&model, batch](const std::vector<int>& tok, const std::vector<int>& tgt, std::uint64_t step) {
    model.zero_grad();
    return model.train_step(tok, tgt, batch, step);
  };
  trainee.evaluate = [&model, batch](const std::vector<int>& tok, const std::vector<int>& tgt) {
    return model.evaluate(tok, tgt, batch);
  };
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

Trainee trainee_of(plan::AnyGpt<float>& model, std::int64_t batch) {
  return std::visit([batch](auto& m) { return model_trainee(*m, batch); }, model);
}

double train_loop(const Trainee& t, const Setup& setup, const Grid& grid, bool root, int first_step,
                  bool skip_nonfinite, int& skipped_steps) {
  const Corpus& corpus = setup.corpus;
  std::vector<int> tokens, targets;
  double interval_loss = 0, last_loss = 0;
  int interval_steps = 0;  // trained since the last print (a resumed run may start mid-interval)
  const std::int64_t seq = setup.config.max_seq;
  auto t0 = std::chrono::steady_clock::now();
  for (int step = first_step; step <= setup.steps; ++step) {
    const int warmup = std::max(1, setup.steps / 20);
    const double progress = static_cast<double>(step) / setup.steps;
    t.optimizer->set_learning_rate(step <= warmup ? setup.lr * step / warmup
                                                  : setup.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress))));
    draw_batch(corpus.train, setup.batch, seq, setup.config.seed, static_cast<std::uint64_t>(step),
                                  grid.dp_index(), grid.dp(), tokens, targets);
    const double loss = t.train_step(tokens, targets, static_cast<std::uint64_t>(step));
    OPTIMUS_CHECK(std::isfinite(loss) || skip_nonfinite, "step ", step, ": the training loss is ", loss,
                  "; stopping (--skip-nonfinite skips such steps)");
    const double norm = std::isfinite(loss) ? t.optimizer->step() : loss;  // AdamW stops or skips a non-finite norm
    if (std::isfinite(norm)) {
      interval_loss += loss;
      ++interval_steps;
    } else {
      ++skipped_steps;
      if (root) {
        std::printf("step %5d  skipped: the %s is %g (parameters and AdamW unchanged)\n", step,
                    std::isfinite(loss) ? "gradient norm" : "loss", norm);
      }
    }
    if (step % setup.every == 0 || step == setup.steps) {
      const int n = std::max(interval_steps, 1);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      last_loss = interval_steps > 0 ? interval_loss / n : std::numeric_limits<double>::quiet_NaN();
      if (root && interval_steps == 0) {
        std::printf("step %5d  no loss: every step since the last print was skipped\n", step);
      } else if (root) {
        std::printf("step %5d  loss %.4f  tokens/s %9.0f  ms/step %7.1f\n", step, last_loss,
                    static_cast<double>(n * setup.batch * seq * grid.dp()) / seconds, 1e3 * seconds / n);
      }
      if (root) std::fflush(stdout);
      interval_loss = 0;
      interval_steps = 0;
      t0 = std::chrono::steady_clock::now();
    }
    if (t.save) {
      const auto before = std::chrono::steady_clock::now();
      t.save(step);
      t0 += std::chrono::steady_clock::now() - before;  // ms/step counts training, not saving
    }
  }
  return last_loss;
}

}  // namespace optimus::examples
