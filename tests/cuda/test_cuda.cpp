// The CUDA backend on a real GPU: device allocator, cuBLASLt GEMM, element-wise kernels, NCCL. Exits with
// 77 (ctest: skipped) and says why when no CUDA device is present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/comm/nccl_communicator.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/cuda/kernels.hpp"
#include "optimus/cuda/lt_gemm.hpp"
#include "optimus/cuda/rank_device.hpp"
#include "optimus/reference/matmul.hpp"

namespace {

using optimus::reference::Matrix;

using optimus::test::DeviceBuffer;

}  // namespace

TEST_CASE("the device allocator reuses blocks: no cudaMalloc in a repeated step") {
  optimus::cuda::DeviceAllocator alloc(0);
  for (int step = 0; step < 3; ++step) {
    std::vector<void*> blocks;
    for (std::size_t n : {1000u, 1u << 20, 5u << 20}) blocks.push_back(alloc.allocate(n));
    for (void* p : blocks) alloc.release(p);
  }
  CHECK(alloc.stats().raw_allocations == 3);
  CHECK(alloc.stats().requests == 9);
}

TEST_CASE("device out of memory names the request and the free memory") {
  optimus::cuda::DeviceAllocator alloc(0);
  std::size_t free = 0, total = 0;
  OPTIMUS_CHECK_CUDA(cudaMemGetInfo(&free, &total));
  CHECK_THROWS_WITH_AS(alloc.allocate(2 * total), doctest::Contains("out of memory: requested"), optimus::Error);
  CHECK_THROWS_WITH_AS(alloc.allocate(2 * total), doctest::Contains("bytes free of"), optimus::Error);
}

TEST_CASE("cuBLASLt GEMM matches the reference for f32, tf32 and bf16, every transpose") {
  optimus::cuda::DeviceAllocator alloc(0);
  optimus::cuda::Stream stream;
  optimus::cuda::LtGemm gemm(alloc);
  const std::int64_t m = 96, n = 80, k = 64;
  for (auto precision : {optimus::cuda::GemmPrecision::f32, optimus::cuda::GemmPrecision::tf32,
                         optimus::cuda::GemmPrecision::bf16}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Matrix a = optimus::reference::random_matrix(ta ? k : m, ta ? m : k, 1);
        const Matrix b = optimus::reference::random_matrix(tb ? n : k, tb ? k : n, 2);
        const bool bf = precision == optimus::cuda::GemmPrecision::bf16;
        auto rounded = [&](const Matrix& x) {
          Matrix r = x;
          for (Eigen::Index e = 0; e < r.size(); ++e) {
            r.data()[e] = bf ? static_cast<float>(optimus::bf16(static_cast<float>(x.data()[e])))
                             : static_cast<float>(x.data()[e]);
          }
          return r;
        };
        const Matrix ar = rounded(a), br = rounded(b);
        const Matrix expected = (ta ? Matrix(ar.transpose()) : ar) * (tb ? Matrix(br.transpose()) : br);
        Matrix got(m, n);
        if (bf) {
          std::vector<optimus::bf16> ha, hb;
          for (Eigen::Index e = 0; e < a.size(); ++e) ha.emplace_back(static_cast<float>(a.data()[e]));
          for (Eigen::Index e = 0; e < b.size(); ++e) hb.emplace_back(static_cast<float>(b.data()[e]));
          DeviceBuffer<optimus::bf16> da(alloc, ha.size()), db(alloc, hb.size()), dc(alloc, static_cast<std::size_t>(m * n));
          da.upload(ha);
          db.upload(hb);
          gemm.run(precision, ta, tb, m, n, k, 1.0f, da.ptr, ta ? m : k, db.ptr, tb ? k : n, 0.0f, dc.ptr, n, stream.get());
          stream.synchronize();
          const auto hc = dc.download();
          for (std::int64_t e = 0; e < m * n; ++e) got.data()[e] = static_cast<float>(hc[static_cast<std::size_t>(e)]);
        } else {
          std::vector<float> ha(a.data(), a.data() + a.size()), hb(b.data(), b.data() + b.size());
          DeviceBuffer<float> da(alloc, ha.size()), db(alloc, hb.size()), dc(alloc, static_cast<std::size_t>(m * n));
          da.upload(ha);
          db.upload(hb);
          gemm.run(precision, ta, tb, m, n, k, 1.0f, da.ptr, ta ? m : k, db.ptr, tb ? k : n, 0.0f, dc.ptr, n, stream.get());
          stream.synchronize();
          const auto hc = dc.download();
          for (std::int64_t e = 0; e < m * n; ++e) got.data()[e] = hc[static_cast<std::size_t>(e)];
        }
        const double tol = precision == optimus::cuda::GemmPrecision::f32 ? 1e-5 : 2e-2;
        const auto cmp = optimus::reference::compare_relative(got, expected, tol);
        CAPTURE(static_cast<int>(precision));
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(cmp);
        CHECK(cmp.ok());
      }
    }
  }
}

TEST_CASE("pageable host copies go through two pinned buffers, chunk by chunk, allocated once") {
  optimus::cuda::DeviceAllocator alloc(0);
  optimus::cuda::Stream stream;
  optimus::cuda::PinnedStaging staging(1000);  // small chunks: 3500 bytes take four, both buffers in turn
  std::vector<unsigned char> host(3500), back(3500, 0);
  for (std::size_t e = 0; e < host.size(); ++e) host[e] = static_cast<unsigned char>(e * 7 + 3);
  DeviceBuffer<unsigned char> device(alloc, host.size()), other(alloc, host.size());
  for (int round = 0; round < 3; ++round) {
    staging.copy(device.ptr, host.data(), host.size(), stream.get());  // up, staged
    staging.copy(other.ptr, device.ptr, host.size(), stream.get());    // device to device, direct
    std::fill(back.begin(), back.end(), 0);
    staging.copy(back.data(), other.ptr, back.size(), stream.get());  // down, staged
    CHECK(back == host);
    CHECK(device.download() == host);
  }
  CHECK(staging.pinned_allocations() == 2);
}

TEST_CASE("GEMM epilogues on the device (fused by cuBLASLt where offered) match the CPU") {
  namespace ops = optimus::ops;
  using optimus::Shape;
  using optimus::TensorView;
  optimus::cuda::RankDevice gpu(0);
  optimus::cuda::DeviceAllocator& alloc = gpu.memory.allocator();
  optimus::cuda::Stream& stream = gpu.stream;
  optimus::cuda::LtGemm& engine = gpu.gemm;
  const std::int64_t m = 64, n = 96, k = 48;  // pre's leading dimension (96) a multiple of 8: fusable
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), bias(static_cast<std::size_t>(n));
  for (std::size_t e = 0; e < a.size(); ++e) a[e] = std::sin(0.37f * static_cast<float>(e));
  for (std::size_t e = 0; e < b.size(); ++e) b[e] = std::cos(0.11f * static_cast<float>(e)) / 4;
  for (std::size_t e = 0; e < bias.size(); ++e) bias[e] = 0.5f - 0.01f * static_cast<float>(e);
  DeviceBuffer<float> da(alloc, a), db(alloc, b), dbias(alloc, bias);
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    const ops::Queue cpu{nullptr, nullptr, math, {}}, on_gpu{stream.get(), &engine, math, {nullptr, optimus::MemoryKind::workspace, &gpu.memory}};
    for (auto kind : {ops::Epilogue<float>::Kind::bias, ops::Epilogue<float>::Kind::bias_gelu}) {
      std::vector<float> c(static_cast<std::size_t>(m * n)), pre(c.size());
      ops::gemm<float>(false, false, 1.0f, TensorView<const float>(a.data(), Shape{m, k}),
                       TensorView<const float>(b.data(), Shape{k, n}), 0.0f, TensorView<float>(c.data(), Shape{m, n}),
                       {kind, TensorView<const float>(bias.data(), Shape{1, n}), TensorView<float>(pre.data(), Shape{m, n})},
                       cpu);
      DeviceBuffer<float> dc(alloc, c.size()), dpre(alloc, c.size());
      const auto on_device = [](auto* p, Shape s) { return TensorView<std::remove_pointer_t<decltype(p)>>(p, s, optimus::Device::cuda); };
      ops::gemm<float>(false, false, 1.0f, on_device(static_cast<const float*>(da.ptr), Shape{m, k}),
                       on_device(static_cast<const float*>(db.ptr), Shape{k, n}), 0.0f, on_device(dc.ptr, Shape{m, n}),
                       {kind, on_device(static_cast<const float*>(dbias.ptr), Shape{1, n}), on_device(dpre.ptr, Shape{m, n})},
                       on_gpu);
      stream.synchronize();
      const auto gc = dc.download(), gpre = dpre.download();
      double worst = 0;
      for (std::size_t e = 0; e < c.size(); ++e) {
        worst = std::max(worst, std::abs(static_cast<double>(gc[e]) - c[e]) / (1 + std::abs(c[e])));
        if (kind == ops::Epilogue<float>::Kind::bias_gelu) {
          worst = std::max(worst, std::abs(static_cast<double>(gpre[e]) - pre[e]) / (1 + std::abs(pre[e])));
        }
      }
      CAPTURE(static_cast<int>(math));
      CAPTURE(static_cast<int>(kind));
      CHECK(worst < 1e-4);  // f32 (TF32 off) and bf16 operands rounded alike: accumulation order only
      // Whether cuBLASLt fused it (else ops applied it after the GEMM): reported, not required.
      const optimus::cuda::LtEpilogue fused{kind == ops::Epilogue<float>::Kind::bias ? optimus::cuda::LtEpilogue::Kind::bias
                                                                                   : optimus::cuda::LtEpilogue::Kind::bias_gelu,
                                            dbias.ptr, dpre.ptr, n};
      const bool offered = engine.run(optimus::cuda::GemmPrecision::f32, false, false, m, n, k, 1.0f, da.ptr, k, db.ptr, n,
                                      0.0f, dc.ptr, n, stream.get(), fused);
      MESSAGE("epilogue ", static_cast<int>(kind), " fused by cuBLASLt (f32): ", offered ? "yes" : "no");
    }
  }
}

TEST_CASE("a strided-batched GEMM on the device (heads side by side, tiles stacked) matches the CPU") {
  namespace ops = optimus::ops;
  using optimus::Shape;
  using optimus::TensorView;
  optimus::cuda::RankDevice gpu(0);
  const std::int64_t heads = 4, s = 64, d = 32;  // Q, K: [s, heads * d]; scores: [heads * s, s]
  std::vector<float> q(static_cast<std::size_t>(s * heads * d)), k(q.size());
  for (std::size_t e = 0; e < q.size(); ++e) {
    q[e] = std::sin(0.13f * static_cast<float>(e));
    k[e] = std::cos(0.29f * static_cast<float>(e));
  }
  DeviceBuffer<float> dq(gpu.memory.allocator(), q), dk(gpu.memory.allocator(), k),
      dscores(gpu.memory.allocator(), static_cast<std::size_t>(heads * s * s));
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    std::vector<float> scores(static_cast<std::size_t>(heads * s * s));
    const auto side = [](const float* p, std::int64_t rows, std::int64_t cols, optimus::Device where) {
      return ops::BatchView<const float>{TensorView<const float>(p, Shape{rows, cols}, where), ops::Batched::side_by_side};
    };
    ops::gemm_batched<float>(false, true, 1.0f, side(q.data(), s, heads * d, optimus::Device::cpu),
                             side(k.data(), s, heads * d, optimus::Device::cpu), 0.0f,
                             {TensorView<float>(scores.data(), Shape{heads * s, s}), ops::Batched::stacked}, heads,
                             ops::Queue{nullptr, nullptr, math, {}});
    ops::Queue on_gpu = gpu.queue();
    on_gpu.math = math;
    on_gpu.scratch = {nullptr, optimus::MemoryKind::workspace, &gpu.memory};
    ops::gemm_batched<float>(false, true, 1.0f, side(dq.ptr, s, heads * d, optimus::Device::cuda),
                             side(dk.ptr, s, heads * d, optimus::Device::cuda), 0.0f,
                             {TensorView<float>(dscores.ptr, Shape{heads * s, s}, optimus::Device::cuda),
                              ops::Batched::stacked},
                             heads, on_gpu);
    gpu.stream.synchronize();
    const auto got = dscores.download();
    double worst = 0;
    for (std::size_t e = 0; e < got.size(); ++e) {
      worst = std::max(worst, std::abs(static_cast<double>(got[e]) - scores[e]) / (1 + std::abs(scores[e])));
    }
    CAPTURE(static_cast<int>(math));
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("element-wise kernels match the CPU") {
  optimus::cuda::DeviceAllocator alloc(0);
  optimus::cuda::Stream stream;
  std::vector<float> x(1000);
  for (std::size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(e) / 100.0f - 5.0f;
  DeviceBuffer<float> dx(alloc, x.size()), dy(alloc, x.size());
  dx.upload(x);
  optimus::cuda::gelu_forward(dx.ptr, dy.ptr, static_cast<std::int64_t>(x.size()), stream.get());
  optimus::cuda::axpby(2.0f, dy.ptr, 0.0f, dy.ptr, static_cast<std::int64_t>(x.size()), stream.get());
  stream.synchronize();
  const auto y = dy.download();
  for (std::size_t e = 0; e < x.size(); ++e) {
    const double v = x[e];
    const double g = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    CHECK(y[e] == doctest::Approx(2 * g).epsilon(1e-5));
  }
}

TEST_CASE("NCCL on one device: a one-rank communicator reduces device buffers and counts traffic") {
  optimus::run_in_process(1, [](optimus::Communicator& host) {
    auto nccl = optimus::NcclCommunicator::create(host, 0);
    optimus::cuda::DeviceAllocator alloc(0);
    DeviceBuffer<float> buf(alloc, 16);
    buf.upload(std::vector<float>(16, 3.0f));
    nccl->all_reduce(buf.ptr, buf.ptr, 16, optimus::DType::f32, optimus::ReduceOp::sum);
    for (float v : buf.download()) CHECK(v == 3.0f);
    CHECK(nccl->stats()[optimus::CallKind::all_reduce].calls == 1);
    CHECK(nccl->backend() == "nccl");
  });
}

int main(int argc, char** argv) {
  if (optimus::cuda::device_count() == 0) {
    std::printf("skipped: %s\n", optimus::cuda::unavailable_reason().c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
