// The device cases on a real GPU (label gpu): kernels, grids sharing the device at q = 1, 2, a training step against
// the host, the steady state and the errors — the same code test_sim runs on the simulated device — plus what only
// a GPU can say: cuBLASLt's precisions and its fused bias + GELU epilogue against the reference. Exits with 77
// (ctest: skipped) and says why when no CUDA device is present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "device_cases.hpp"
#include "device_world.hpp"
#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/cuda/device.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/layers.hpp"
#include "optimus/reference/matmul.hpp"

namespace {

using optimus::Communicator;
using optimus::Grid;
using optimus::RankDevice;
using optimus::reference::Matrix;
namespace ops = optimus::ops;

const optimus::test::DeviceTarget kGpu{.kind = optimus::Device::cuda, .sim = {}};

// `m` rounded to f32, in place, and uploaded as a [rows, cols] f32 tensor.
optimus::Tensor<float> upload_f32(Matrix& m, const optimus::MemoryTag& tag) {
  std::vector<float> values(static_cast<std::size_t>(m.size()));
  for (std::int64_t e = 0; e < m.size(); ++e) m.data()[e] = values[e] = static_cast<float>(m.data()[e]);
  return optimus::upload(values.data(), optimus::Shape{m.rows(), m.cols()}, tag);
}

Matrix downloaded(const optimus::Tensor<float>& t) {
  const std::vector<float> values = optimus::download(t);
  Matrix m(t.shape()[0], t.shape()[1]);
  for (std::int64_t e = 0; e < m.size(); ++e) m.data()[e] = values[e];
  return m;
}

}  // namespace

TEST_CASE("kernels on the GPU match the host") {
  const auto device = kGpu.open(0);
  optimus::test::run_in_process(1, [&](Communicator&) {
    RankDevice rank(*device, ops::GemmMath::f32);
    optimus::test::check_kernels(rank);
  });
}

TEST_CASE("grids on one GPU (q = 1 and in-process q = 2): every device case") {
  for (int q : {1, 2}) {
    CAPTURE(q);
    optimus::test::on_shared_device(kGpu, q, 1, ops::GemmMath::f32, [](Communicator&, RankDevice&, Grid& grid) {
      optimus::test::check_device_grid(grid);
    });
  }
}

TEST_CASE("a training step on one GPU matches the host; steady state; errors") {
  for (int q : {1, 2}) {
    CAPTURE(q);
    optimus::test::on_shared_device(kGpu, q, 1, ops::GemmMath::f32,
                                    [&](Communicator& world, RankDevice& rank, Grid& grid) {
      Grid host = Grid::create(world, q);
      optimus::test::check_step_like_host(grid, host, false);
      optimus::test::check_products_like_host(grid, host, false);
      optimus::test::check_steady_state(rank, grid);
      optimus::test::check_device_errors(world, rank, grid);
    });
  }
}

TEST_CASE("a grid over NCCL on one GPU (q = 1) trains like the host") {
  optimus::test::on_own_devices(kGpu, 1, 1, ops::GemmMath::f32, [](Communicator& world, RankDevice&, Grid& grid) {
    CHECK(grid.row().backend() == "nccl");
    Grid host = Grid::create(world, 1);
    optimus::test::check_step_like_host(grid, host, false);
  });
}

TEST_CASE("cuBLASLt: bf16 in and out, and the fused bias + GELU epilogue, against the reference") {
  const auto device = kGpu.open(0);
  optimus::test::run_in_process(1, [&](Communicator&) {
    RankDevice rank(*device, ops::GemmMath::f32);
    const std::int64_t m = 96, n = 80, k = 64;
    const optimus::MemoryTag tag = optimus::test::on(rank.memory());
    std::vector<optimus::bf16> a(m * k), b(k * n);
    const optimus::reference::Matrix ad = optimus::reference::random_matrix(m, k, 1),
                                     bd = optimus::reference::random_matrix(k, n, 2);
    optimus::reference::Matrix ar(m, k), br(k, n);
    for (std::int64_t e = 0; e < m * k; ++e) {
      a[e] = optimus::bf16(static_cast<float>(ad.data()[e]));
      ar.data()[e] = static_cast<float>(a[e]);
    }
    for (std::int64_t e = 0; e < k * n; ++e) {
      b[e] = optimus::bf16(static_cast<float>(bd.data()[e]));
      br.data()[e] = static_cast<float>(b[e]);
    }
    const auto da = optimus::upload(a.data(), optimus::Shape{m, k}, tag);
    const auto db = optimus::upload(b.data(), optimus::Shape{k, n}, tag);
    optimus::Tensor<optimus::bf16> dc(optimus::Shape{m, n}, tag);
    CHECK(rank.gemm().run({.precision = optimus::GemmPrecision::bf16, .m = m, .n = n, .k = k, .a = da.data(), .lda = k,
                           .b = db.data(), .ldb = n, .c = dc.data(), .ldc = n},
                          rank.stream()));
    const auto c = optimus::download(dc);
    optimus::reference::Matrix got(m, n);
    for (std::int64_t e = 0; e < m * n; ++e) got.data()[e] = static_cast<float>(c[e]);
    CHECK(optimus::reference::compare_relative(got, ar * br, 2e-2).ok());
    // f32 with the bias + GELU epilogue: C = GELU(A B + bias), the pre-activation A B + bias kept for backward.
    Matrix x = optimus::reference::random_matrix(m, k, 3), w = optimus::reference::random_matrix(k, n, 4),
           bias_row = optimus::reference::random_matrix(1, n, 5);
    const auto fa = upload_f32(x, tag), fb = upload_f32(w, tag), bias = upload_f32(bias_row, tag);
    optimus::Tensor<float> fc(optimus::Shape{m, n}, tag), pre(optimus::Shape{m, n}, tag);
    const bool fused = rank.gemm().run(
        {.m = m, .n = n, .k = k, .a = fa.data(), .lda = k, .b = fb.data(), .ldb = n, .c = fc.data(), .ldc = n,
         .epilogue = {.kind = optimus::GemmCall::Epilogue::Kind::bias_gelu, .bias = bias.data(), .pre = pre.data(),
                      .ld_pre = n}},
        rank.stream());
    MESSAGE("bias + GELU epilogue fused by cuBLASLt (f32): " << std::string(fused ? "yes" : "no"));
    if (fused) {
      const Matrix pre_expected = optimus::reference::linear_forward(x, w, bias_row);
      CHECK(optimus::reference::compare_relative(downloaded(pre), pre_expected, 1e-4).ok());
      CHECK(optimus::reference::compare_relative(downloaded(fc), optimus::reference::gelu_forward(pre_expected), 1e-4)
                .ok());
    }
  });
}

int main(int argc, char** argv) {
  if (optimus::cuda_device_count() == 0) {
    std::printf("skipped: %s\n", optimus::cuda_unavailable_reason().c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
