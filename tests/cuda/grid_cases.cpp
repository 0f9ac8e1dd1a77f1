// Grids placed on one GPU: SUMMA and the Linear2D / LayerNorm2D layers at q = 1 and in-process q = 2 (q^2 ranks
// as threads sharing the device), against Eigen and against the same layers on the host, plus the steady state
// of the caching allocator and the refusal of mixed host and device operands.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/cuda/nccl_grid.hpp"
#include "optimus/cuda/rank_device.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/layers/gpt.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/linear.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/matmul.hpp"
#include "layer_cases.hpp"

namespace {

using optimus::Communicator;
using optimus::DistMatrix;
using optimus::Grid;
using optimus::reference::Matrix;

using GpuRank = optimus::cuda::RankDevice;

// fn(world, gpu, q) on every rank, for q = 1 and in-process q = 2 (q^2 threads sharing the device).
template <class Fn>
void on_one_gpu(Fn fn) {
  for (int q : {1, 2}) {
    CAPTURE(q);
    optimus::run_in_process(q * q, [&](Communicator& world) {
      GpuRank gpu;
      fn(world, gpu, q);
    });
  }
}

bool close(const Matrix& got, const Matrix& expected, double tol) {
  const auto cmp = optimus::reference::compare_relative(got, expected, tol);
  CAPTURE(cmp);
  return cmp.ok();
}

}  // namespace

TEST_CASE("SUMMA on one GPU matches Eigen at q = 1 and in-process q = 2, and repeats without cudaMalloc") {
  on_one_gpu([](Communicator& world, GpuRank& gpu, int q) {
    Grid grid = gpu.grid(world, q);
    const std::int64_t m = 16 * q, k = 8 * q, n = 12 * q;
    const Matrix a = optimus::reference::random_matrix(m, k, 1), b = optimus::reference::random_matrix(k, n, 2);
    const Matrix bt = optimus::reference::random_matrix(n, k, 3), at = optimus::reference::random_matrix(k, m, 4);
    const auto A = DistMatrix<float>::from_global(grid, a);
    const auto B = DistMatrix<float>::from_global(grid, b);
    const auto BT = DistMatrix<float>::from_global(grid, bt);
    const auto AT = DistMatrix<float>::from_global(grid, at);
    CHECK(A.local().device() == optimus::Device::cuda);
    auto products = [&] {
      const Matrix ab = optimus::summa_ab(A, B).to_global().cast<double>();
      const Matrix abt = optimus::summa_abt(A, BT).to_global().cast<double>();
      const Matrix atb = optimus::summa_atb(AT, B).to_global().cast<double>();
      CHECK(close(ab, a.cast<float>().cast<double>() * b.cast<float>().cast<double>(), 1e-5));
      CHECK(close(abt, a.cast<float>().cast<double>() * bt.cast<float>().cast<double>().transpose(), 1e-5));
      CHECK(close(atb, at.cast<float>().cast<double>().transpose() * b.cast<float>().cast<double>(), 1e-5));
    };
    products();
    const auto allocations = gpu.memory.allocator().stats().raw_allocations;
    const auto staged = gpu.staging->raw_allocations();
    products();
    products();
    CHECK(gpu.memory.allocator().stats().raw_allocations == allocations);  // the steady state allocates nothing,
    CHECK(gpu.staging->raw_allocations() == staged);                       // not even to exchange panels
  });
}

TEST_CASE("Linear2D and LayerNorm2D on one GPU equal the same layers on the host (q = 1, in-process q = 2)") {
  on_one_gpu([](Communicator& world, GpuRank& gpu, int q) {
    Grid on_gpu = gpu.grid(world, q);
    Grid on_host = Grid::create(world, q);  // the same world (its copy also moves host bytes)
    optimus::GptConfig config;
    config.hidden = 8 * q;
    const std::int64_t tokens = 6 * q, h = config.hidden, ffn = 4 * h;
    const Matrix x = optimus::reference::random_matrix(tokens, h, 5);
    const Matrix dy = optimus::reference::random_matrix(tokens, ffn, 6);
    const Matrix dn = optimus::reference::random_matrix(tokens, h, 7);
    auto run = [&](Grid& grid) {
      std::map<std::string, Matrix> out;
      optimus::LayerNorm2D<float> ln(grid, "h.0.ln_1", h);
      optimus::Linear2D<float> fc(grid, "h.0.mlp.c_fc", h, ffn);
      std::vector<optimus::ParameterRef<float>> refs;
      ln.parameters(refs);
      fc.parameters(refs);
      for (const auto& r : refs) optimus::init_parameter(r, config, grid.device());
      const auto X = DistMatrix<float>::from_global(grid, x);
      const DistMatrix<float> n = ln.forward(X, optimus::Pass{});
      const DistMatrix<float> y = fc.forward(n, optimus::Pass{});
      const DistMatrix<float> dn_fc = fc.backward(DistMatrix<float>::from_global(grid, dy));
      const DistMatrix<float> dx = ln.backward(DistMatrix<float>::from_global(grid, dn));
      out["n"] = n.to_global().cast<double>();
      out["y"] = y.to_global().cast<double>();
      out["dn_fc"] = dn_fc.to_global().cast<double>();
      out["dx"] = dx.to_global().cast<double>();
      for (const auto& r : refs) out[r.name + ".grad"] = optimus::gather_parameter(grid.grid(), r, true, grid.device());
      return out;
    };
    const auto gpu_out = run(on_gpu), host_out = run(on_host);
    for (const auto& [name, m] : host_out) {
      CAPTURE(name);
      CHECK(close(gpu_out.at(name), m, 1e-4));
    }
  });
}

TEST_CASE("every f32 layer and the GPT on one GPU match the reference (q = 1, in-process q = 2), f32 and bf16 GEMMs") {
  // The CPU suites' cases against the f64 reference: f32 within 1e-4, bf16 GEMM operands within 2e-2.
  for (optimus::ops::GemmMath math : {optimus::ops::GemmMath::f32, optimus::ops::GemmMath::bf16}) {
    CAPTURE(math == optimus::ops::GemmMath::bf16);
    on_one_gpu([&](Communicator& world, GpuRank& gpu, int q) {
      Grid grid = gpu.grid(world, q);
      grid.set_gemm_math(math);
      optimus::test::check_f32_layers_on(grid);
    });
  }
}

TEST_CASE("host and device operands in one operation are refused, naming both") {
  GpuRank gpu;
  optimus::Tensor<float> on_device(optimus::Shape{2, 3}, {nullptr, optimus::MemoryKind::workspace, &gpu.memory});
  optimus::Tensor<float> on_host(optimus::Shape{2, 3});
  CHECK_THROWS_WITH_AS(optimus::ops::axpby<float>(1.0f, std::as_const(on_host).view(), 1.0f, on_device.view()),
                       doctest::Contains("axpby: operands are on different devices (x on cpu, y on cuda)"),
                       optimus::Error);
  optimus::run_in_process(1, [&](Communicator& world) {
    Grid grid = gpu.grid(world, 1);
    DistMatrix<float> d(grid, 4, 4);
    CHECK_THROWS_WITH_AS(d.local_map(), doctest::Contains("an Eigen view of a block on a device"), optimus::Error);
  });
}

namespace {

// One GPT training step (forward, backward, AdamW) on a device grid and on a host grid of the same shape: the
// same loss, gradient norm and updated parameters. bf16 GEMM math: both sides multiply the same bf16-rounded
// operands (exact products), only the summation order differs.
void expect_gpt_step_like_host(Grid& on_gpu, Grid& on_host, int q) {
  const bool mixed = on_gpu.gemm_math() == optimus::ops::GemmMath::bf16;
  optimus::GptConfig config;
  config.vocab = 12 * q;
  config.hidden = 8 * q;
  config.heads = 2 * q;
  config.ffn = 4 * config.hidden;
  config.layers = 2;
  config.max_seq = 8;
  config.dropout = 0.1;
  const std::int64_t batch = 2 * q, seq = 8;
  std::vector<int> tokens, targets;
  for (std::int64_t t = 0; t < batch * seq; ++t) {
    tokens.push_back(static_cast<int>((7 * t + 3) % config.vocab));
    targets.push_back(static_cast<int>((5 * t + 1) % config.vocab));
  }
  auto step = [&](Grid& grid) {
    optimus::Gpt2D<float> model(grid, config);
    optimus::AdamW<float> adamw(grid, model.parameters(), optimus::AdamWConfig{});
    const double loss = model.forward(tokens, targets, batch, 1);
    model.backward();
    const double norm = adamw.step();
    return std::tuple{loss, norm, model.gather(false)};
  };
  const auto [gpu_loss, gpu_norm, gpu_params] = step(on_gpu);
  const auto [host_loss, host_norm, host_params] = step(on_host);
  CHECK(gpu_loss == doctest::Approx(host_loss).epsilon(1e-5));
  CHECK(gpu_norm == doctest::Approx(host_norm).epsilon(1e-4));
  for (const auto& [name, m] : host_params) {
    CAPTURE(name);
    CHECK(close(gpu_params.at(name), m, mixed ? 1e-3 : 1e-4));
  }
}

}  // namespace

TEST_CASE("a GPT training step on one GPU equals the same step on the host (q = 1, in-process q = 2), f32 and bf16") {
  for (optimus::ops::GemmMath math : {optimus::ops::GemmMath::f32, optimus::ops::GemmMath::bf16}) {
    CAPTURE(math == optimus::ops::GemmMath::bf16);
    on_one_gpu([&](Communicator& world, GpuRank& gpu, int q) {
      Grid on_gpu = gpu.grid(world, q);
      Grid on_host = Grid::create(world, q);
      on_gpu.set_gemm_math(math);
      on_host.set_gemm_math(math);
      expect_gpt_step_like_host(on_gpu, on_host, q);
    });
  }
}

TEST_CASE("a grid over NCCL communicators (one GPU, q = 1) trains like the host grid; host scalars are staged") {
  optimus::run_in_process(1, [](Communicator& host) {
    GpuRank gpu;
    Grid on_gpu = optimus::cuda::nccl_grid(gpu, host, 1);
    CHECK(on_gpu.row().backend() == "nccl");
    CHECK(on_gpu.grid().all_reduce(2.5, optimus::ReduceOp::sum) == 2.5);  // a host double through the staging buffer
    Grid on_host = Grid::create(host, 1);
    expect_gpt_step_like_host(on_gpu, on_host, 1);
  });
  // A world that is not dp*q*q is refused before NCCL starts.
  optimus::run_in_process(3, [](Communicator& host) {
    GpuRank gpu;
    CHECK_THROWS_WITH_AS(optimus::cuda::nccl_grid(gpu, host, 2), doctest::Contains("world size 3 is not dp*q*q"),
                         optimus::Error);
  });
}
