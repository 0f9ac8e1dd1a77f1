// The grid-level device cases (device_cases.hpp).
#include "capture_binding.hpp"
#include "device_cases.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <utility>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../grid/overlap_cases.hpp"
#include "../grid/summa_cases.hpp"
#include "../layers/layer_cases.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/reference/matmul.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/reference/compare.hpp"
#include "same_error.hpp"

namespace optimus::test {
namespace {

// Two training steps of a GPT (dropout on): losses, gradient norms and the parameters after them.
struct StepResult {
  std::vector<double> losses, norms;
  std::map<std::string, GlobalMatrix> parameters;
};

StepResult train_two_steps(const Grid& grid) {
  const int q = grid.q();
  GptConfig config = config_for(q, 2, 0.1);
  const LayerShapes s = shapes_for(q);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 81);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 82);
  Gpt2D<float> model(grid, config);
  AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}});
  StepResult r;
  for (std::uint64_t step = 1; step <= 2; ++step) {
    model.zero_grad();
    r.losses.push_back(model.train_step(tokens, targets, s.batch, step));
    r.norms.push_back(adamw.step());
  }
  r.parameters = model.gather(false);
  return r;
}

// Checks that `got` is within `tol` (norm-wise relative) of `expected`, printing the comparison when not.
void check_close(const Eigen::Ref<const GlobalMatrix>& got, const Eigen::Ref<const GlobalMatrix>& expected, double tol) {
  const auto cmp = reference::compare_relative(got, expected, tol);
  CAPTURE(cmp);
  CHECK(cmp.ok());
}

// c_attn.bias, [1, 3h] in GPT-2's order [query | key | value], after `steps` AdamW steps on two devices whose sums round
// differently. The key bias does not change the output: q·b_k adds the same amount to every score of a row, which the
// softmax ignores, so its gradient is rounding noise, different on each device, and AdamW normalises that noise into
// steps whose sign is the noise's (seen on an H100 against the host): each moves a parameter by about lr at most
// (1.1 lr with beta2 = 0.95), so the two devices' key biases differ by under 3 lr per step. The query and value thirds
// are compared as every parameter; the key third only to within that bound.
void check_attention_bias_close(const GlobalMatrix& got, const GlobalMatrix& expected, double tol, int steps,
                                double lr) {
  const Eigen::Index h = expected.cols() / 3;
  check_close(got.leftCols(h), expected.leftCols(h), tol);
  check_close(got.rightCols(h), expected.rightCols(h), tol);
  const double key_drift = (got.middleCols(h, h) - expected.middleCols(h, h)).cwiseAbs().maxCoeff();
  CAPTURE(key_drift);
  CHECK(key_drift <= 3 * steps * lr);
}

}  // namespace

void check_device_grid(const Grid& grid) {
  check_summa_f32_on(grid);
  check_overlap_bitwise_on(grid);
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    CAPTURE(math == ops::GemmMath::bf16);
    const Grid in_math = grid.with({.gemm_math = math});
    check_f32_layers_on(in_math);
    check_f32_training_on(in_math);
  }
}

void check_step_like_host(const Grid& on_device, const Grid& on_host, bool bitwise) {
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    CAPTURE(math == ops::GemmMath::bf16);
    const StepResult device = train_two_steps(on_device.with({.gemm_math = math})),
                     host = train_two_steps(on_host.with({.gemm_math = math}));
    // Under mixed precision both devices round the same operands to bf16 at the same points (GEMMs and the fused
    // attention), so losses and norms agree to 1e-3. A parameter whose gradient nearly cancels is another matter: where
    // one device's sum falls the other side of a bf16 rounding (a probability or dS term moves by 2^-9) its gradient
    // changes relatively much, and AdamW turns that into a step of up to lr — seen on an H100 as single elements 2e-3
    // of their tensor's largest apart after two steps. Parameters are compared to 1e-2 there; a wrong kernel is O(1).
    const double tol = math == ops::GemmMath::bf16 ? 1e-3 : 1e-4;
    const double parameter_tol = math == ops::GemmMath::bf16 ? 1e-2 : 1e-4;
    for (std::size_t step = 0; step < host.losses.size(); ++step) {
      CAPTURE(step);
      if (bitwise) {
        CHECK(std::memcmp(&device.losses[step], &host.losses[step], sizeof(double)) == 0);
        CHECK(std::memcmp(&device.norms[step], &host.norms[step], sizeof(double)) == 0);
      } else {
        CHECK(device.losses[step] == doctest::Approx(host.losses[step]).epsilon(tol));
        CHECK(device.norms[step] == doctest::Approx(host.norms[step]).epsilon(tol));
      }
    }
    for (const auto& [name, m] : host.parameters) {
      CAPTURE_BINDING(name);
      if (bitwise) {
        CHECK(device.parameters.at(name) == m);
      } else if (name.ends_with("attn.c_attn.bias")) {
        check_attention_bias_close(device.parameters.at(name), m, parameter_tol,
                                   static_cast<int>(host.losses.size()), AdamWConfig{}.lr);
      } else {
        check_close(device.parameters.at(name), m, parameter_tol);
      }
    }
  }
}

void check_products_like_host(const Grid& on_device, const Grid& on_host, bool bitwise) {
  const int q = on_device.q();
  // 512 rows per rank: the CPU GEMM runs in row tiles where the launch needs progress calls (MPI; both grids alike)
  const std::int64_t m = 512 * q, k = 144 * q, n = 24 * q;
  const reference::Matrix a = reference::random_matrix(m, k, 41), b = reference::random_matrix(k, n, 42);
  const reference::Matrix at = reference::random_matrix(k, m, 43), bt = reference::random_matrix(n, k, 44);
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    CAPTURE(math == ops::GemmMath::bf16);
    std::vector<reference::Matrix> results[2];
    for (int placed = 0; placed < 2; ++placed) {
      const Grid grid = (placed == 0 ? on_device : on_host).with({.gemm_math = math});
      const auto A = DistMatrix<float>::from_global(grid, a), B = DistMatrix<float>::from_global(grid, b);
      const auto At = DistMatrix<float>::from_global(grid, at), Bt = DistMatrix<float>::from_global(grid, bt);
      results[placed] = {summa_ab(A, B).to_global().cast<double>(), summa_abt(A, Bt).to_global().cast<double>(),
                         summa_atb(At, B).to_global().cast<double>()};
    }
    for (std::size_t p = 0; p < 3; ++p) {
      CAPTURE(p);
      if (bitwise) {
        CHECK(results[0][p] == results[1][p]);
      } else {
        check_close(results[0][p], results[1][p], math == ops::GemmMath::bf16 ? 1e-3 : 1e-5);
      }
    }
  }
}

void check_steady_state(RankDevice& rank, Grid& grid) {
  const int q = grid.q();
  const std::int64_t m = 16 * q, k = 8 * q, n = 12 * q;
  DistMatrix<float> a(grid, m, k), b(grid, k, n), bt(grid, n, k), at(grid, k, m);
  a.fill_random(1);
  b.fill_random(2);
  bt.fill_random(3);
  at.fill_random(4);
  GptConfig config = config_for(q, 1, 0.1);
  const LayerShapes s = shapes_for(q);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 91);
  Gpt2D<float> model(grid, config);
  AdamW<float> adamw(grid, model.parameters(), {.config = AdamWConfig{}});
  auto step = [&](std::uint64_t t) {
    const DistMatrix<float> ab = summa_ab(a, b), abt = summa_abt(a, bt), atb = summa_atb(at, b);
    model.zero_grad();
    model.train_step(tokens, tokens, s.batch, t);
    adamw.step();
    rank.stream().synchronize();
  };
  step(1);
  const std::uint64_t allocations = rank.raw_allocations().memory;
  const std::size_t plans = rank.gemm().plans_prepared();
  step(2);
  step(3);
  CHECK(rank.raw_allocations().memory == allocations);  // the memory pool and the page-locked buffers
  CHECK(rank.gemm().plans_prepared() == plans);         // descriptors and heuristics prepared once per shape
  CHECK(plans > 0);
}

void check_device_errors(Communicator& world, RankDevice& rank, Grid& grid) {
  const Device where = rank.runtime().device();
  Tensor<float> on_device(Shape{2, 3}, grid.tag(MemoryKind::workspace));
  Tensor<float> on_host(Shape{2, 3});
  const std::string both = std::string("axpby: operands are on different devices (x on cpu, y on ") +
                           std::string(name_of(where)) + ")";
  CHECK_THROWS_WITH_AS(ops::axpby<float>(1.0f, std::as_const(on_host).view(), 1.0f, on_device.view(), grid.queue()),
                       doctest::Contains(both.c_str()), Error);
  // Device operands need a stream: a queue without one (the host's) is refused instead of using a default stream.
  CHECK_THROWS_WITH_AS(ops::fill<float>(on_device.view(), 1.0f, ops::Queue{}), doctest::Contains("need a stream"),
                       Error);
  // f64 runs on the CPU only.
  Tensor<double> wide(Shape{2, 3}, grid.tag(MemoryKind::workspace));
  CHECK_THROWS_WITH_AS(ops::fill<double>(wide.view(), 1.0, grid.queue()), doctest::Contains("must be f32"), Error);
  DistMatrix<float> d(grid, 4 * grid.q(), 4 * grid.q());
  CHECK_THROWS_WITH_AS(d.local_map(), doctest::Contains("an Eigen view of a block on a device"), Error);
  // A grid whose communicators cannot move device buffers (MPI's, in-process ones staging on the host) cannot be
  // placed on the device — its collectives would memcpy device memory: the same error on every rank, naming the
  // communicator. A world that stages on the device (RankDevice::grid set it) can.
  Grid plain = Grid::create(world, grid.q());
  const std::string message = error_on_every_rank(grid.grid(), [&] { plain.place_on(&rank.memory(), rank.queue()); });
  if (world.takes_buffers_on(where)) {
    CHECK(message.empty());
  } else {
    CHECK(message.find("Grid::place_on: the grid's row communicator (" + world.backend() + ") cannot move " +
                       std::string(name_of(where)) + " buffers") != std::string::npos);
  }
}

}  // namespace optimus::test
