// The CPU GEMM's kernel (blas_kernel.hpp, processor.hpp): CPUID read against the kernel's own account
// (/proc/cpuinfo), the judgement and the choice on processors described as data, and every OpenBLAS kernel this
// processor runs, switched to in this process and checked.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/rng.hpp"

using optimus::cpu::BlasKernel;
using optimus::cpu::CpuFeatures;
using optimus::cpu::KernelFit;
using optimus::cpu::Processor;
using optimus::cpu::SimdLevel;
namespace openblas = optimus::cpu::openblas;

namespace {

Processor intel(int model, CpuFeatures features) {
  return {.vendor = "GenuineIntel", .brand = "", .family = 6, .model = model, .features = features, .cores = 2};
}
Processor amd(int family, int model, CpuFeatures features) {
  return {.vendor = "AuthenticAMD", .brand = "", .family = family, .model = model, .features = features, .cores = 2};
}

constexpr CpuFeatures kSse{.sse3 = true};
constexpr CpuFeatures kAvx{.sse3 = true, .avx = true};
constexpr CpuFeatures kAvx2{.sse3 = true, .avx = true, .fma = true, .avx2 = true};
constexpr CpuFeatures kAvx512{.sse3 = true, .avx = true, .fma = true, .avx2 = true, .avx512 = true};
constexpr CpuFeatures kAvx512Bf16{
    .sse3 = true, .avx = true, .fma = true, .avx2 = true, .avx512 = true, .avx512_bf16 = true};
constexpr CpuFeatures kAmx{
    .sse3 = true, .avx = true, .fma = true, .avx2 = true, .avx512 = true, .avx512_bf16 = true, .amx = true};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The flags the kernel lists for the first CPU in /proc/cpuinfo, and its family and model (decimal there).
struct CpuInfo {
  std::set<std::string> flags;
  int family = -1, model = -1;
};
CpuInfo proc_cpuinfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = line.substr(colon + 1);
    if (key == "flags" && info.flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
    } else if (key == "cpu family" && info.family < 0) {
      info.family = std::stoi(value);
    } else if (key == "model" && info.model < 0) {
      info.model = std::stoi(value);
    }
  }
  return info;
}

// C = A B of random f32 matrices in [-1, 1) against an f64 loop, relative to the sum of |terms|.
double random_product_error(std::int64_t m, std::int64_t n, std::int64_t k) {
  optimus::Tensor<float> a(optimus::Shape{m, k}), b(optimus::Shape{k, n}), c(optimus::Shape{m, n});
  const optimus::CounterRng rng(7);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t l = 0; l < k; ++l) a.view()(i, l) = static_cast<float>(2 * rng.uniform(i, l) - 1);
  for (std::int64_t l = 0; l < k; ++l)
    for (std::int64_t j = 0; j < n; ++j) b.view()(l, j) = static_cast<float>(2 * rng.uniform(1000 + l, j) - 1);
  optimus::cpu::gemm<float>(optimus::Trans::no, optimus::Trans::no, 1.0f, a.view(), b.view(), 0.0f, c.view());
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, size = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        sum += double(a.view()(i, l)) * b.view()(l, j);
        size += std::abs(double(a.view()(i, l)) * b.view()(l, j));
      }
      worst = std::max(worst, std::abs(c.view()(i, j) - sum) / size);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("this_processor reads CPUID as the kernel's /proc/cpuinfo reports it") {
  const Processor p = optimus::cpu::this_processor();
  CHECK(p.cores >= 1);
#if defined(__x86_64__) && defined(__linux__)
  const CpuInfo info = proc_cpuinfo();
  REQUIRE(!info.flags.empty());
  const auto has = [&](const char* flag) { return info.flags.count(flag) == 1; };
  CHECK(p.family == info.family);
  CHECK(p.model == info.model);
  CHECK(p.features.sse3 == has("pni"));
  CHECK(p.features.avx == has("avx"));
  CHECK(p.features.fma == has("fma"));
  CHECK(p.features.avx2 == has("avx2"));
  CHECK(p.features.avx512 ==
        (has("avx512f") && has("avx512dq") && has("avx512cd") && has("avx512bw") && has("avx512vl")));
  CHECK(p.features.avx512_bf16 == (p.features.avx512 && has("avx512_bf16")));
  CHECK(p.features.amx == has("amx_tile"));
  CHECK(p.simd() != SimdLevel::unknown);
  CHECK(contains(p.describe(), p.vendor));
#endif
}

TEST_CASE("vector units and the theoretical rate per cycle, by microarchitecture") {
  CHECK(optimus::cpu::vector_units(intel(0xcf, kAmx)).f32_flops_per_cycle() == 64);  // 2 x 512-bit FMA
  CHECK(optimus::cpu::vector_units(intel(0x8c, kAvx512)).f32_flops_per_cycle() == 32);  // Tiger Lake: one unit
  CHECK(optimus::cpu::vector_units(amd(0x19, 0x11, kAvx512Bf16)).f32_flops_per_cycle() == 32);  // Zen 4: 2 x 256
  CHECK(optimus::cpu::vector_units(amd(0x19, 0x11, kAvx512Bf16)).full_rate == SimdLevel::avx2);
  CHECK(optimus::cpu::vector_units(amd(0x1a, 0x02, kAvx512Bf16)).f32_flops_per_cycle() == 64);  // Zen 5
  CHECK(optimus::cpu::vector_units(amd(0x17, 0x01, kAvx2)).f32_flops_per_cycle() == 16);  // Zen 1: 2 x 128
  CHECK(optimus::cpu::vector_units(amd(0x17, 0x31, kAvx2)).f32_flops_per_cycle() == 32);  // Zen 2
  CHECK(optimus::cpu::vector_units(intel(0x3c, kAvx2)).f32_flops_per_cycle() == 32);  // Haswell
  CHECK(optimus::cpu::vector_units(intel(0x2a, kAvx)).f32_flops_per_cycle() == 16);   // Sandy Bridge: mul + add
  CHECK(optimus::cpu::vector_units(intel(0x1a, kSse)).f32_flops_per_cycle() == 8);
  CHECK(optimus::cpu::vector_units(Processor{}).f32_flops_per_cycle() == 0);  // not x86-64: unknown
}

TEST_CASE("the clock is measured, in the range of real processors") {
  const double hz = optimus::cpu::measure_clock_hz();
#if defined(__x86_64__)
  CHECK(hz > 0.2e9);
  CHECK(hz < 8e9);
#else
  CHECK(hz == 0);
#endif
}

TEST_CASE("OpenBLAS's core names and their vector instructions") {
  CHECK(openblas::simd_of("Prescott") == SimdLevel::sse);
  CHECK(openblas::simd_of("Nehalem") == SimdLevel::sse);
  CHECK(openblas::simd_of("Sandybridge") == SimdLevel::avx);
  CHECK(openblas::simd_of("haswell") == SimdLevel::avx2);
  CHECK(openblas::simd_of("Zen") == SimdLevel::avx2);
  CHECK(openblas::simd_of("SKYLAKEX") == SimdLevel::avx512);
  CHECK(openblas::simd_of("Cooperlake") == SimdLevel::avx512);
  CHECK(openblas::simd_of("NeoverseN1") == SimdLevel::unknown);
  CHECK(openblas::canonical_name("skylakex") == "SkylakeX");
  CHECK(openblas::canonical_name("Power10").empty());
  CHECK(openblas::runs_on("SkylakeX", intel(0x55, kAvx512)));
  CHECK_FALSE(openblas::runs_on("Cooperlake", intel(0x55, kAvx512)));  // needs AVX512_BF16
  CHECK(openblas::runs_on("Cooperlake", amd(0x19, 0x11, kAvx512Bf16)));
  CHECK_FALSE(openblas::runs_on("SapphireRapids", amd(0x19, 0x11, kAvx512Bf16)));  // needs AMX
  CHECK(openblas::runs_on("SapphireRapids", intel(0xcf, kAmx)));
  CHECK_FALSE(openblas::runs_on("SkylakeX", intel(0x3c, kAvx2)));
  CHECK(openblas::runs_on("Prescott", intel(0x3c, kAvx2)));
  CHECK_FALSE(openblas::runs_on("Power10", intel(0xcf, kAmx)));
}

TEST_CASE("a kernel is older than the processor when its instructions cannot reach the FMA units' full rate") {
  CHECK(optimus::cpu::fit_of(SimdLevel::sse, intel(0x3c, kAvx2)) == KernelFit::older);
  CHECK(optimus::cpu::fit_of(SimdLevel::avx, intel(0x3c, kAvx2)) == KernelFit::older);
  CHECK(optimus::cpu::fit_of(SimdLevel::avx2, intel(0x3c, kAvx2)) == KernelFit::fits);
  CHECK(optimus::cpu::fit_of(SimdLevel::avx2, intel(0xcf, kAmx)) == KernelFit::older);
  CHECK(optimus::cpu::fit_of(SimdLevel::avx512, intel(0xcf, kAmx)) == KernelFit::fits);
  // Zen 4 runs AVX-512 on 256-bit units: an AVX2 kernel reaches the same rate.
  CHECK(optimus::cpu::fit_of(SimdLevel::avx2, amd(0x19, 0x11, kAvx512Bf16)) == KernelFit::fits);
  CHECK(optimus::cpu::fit_of(SimdLevel::sse, amd(0x19, 0x11, kAvx512Bf16)) == KernelFit::older);
  CHECK(optimus::cpu::fit_of(SimdLevel::sse, intel(0x1a, kSse)) == KernelFit::fits);
  CHECK(optimus::cpu::fit_of(SimdLevel::unknown, intel(0x3c, kAvx2)) == KernelFit::unknown);
  CHECK(optimus::cpu::fit_of(SimdLevel::avx2, Processor{}) == KernelFit::unknown);
}

TEST_CASE("a generic kernel on an AVX2 machine is reported and replaced") {
  const Processor haswell = intel(0x3c, kAvx2);
  const openblas::Decision d = openblas::decide("Prescott", haswell, "0.3.21");
  CHECK(d.core == "Haswell");
  CHECK(d.why == "chosen by Optimus: OpenBLAS chose Prescott (SSE), older than this processor");
  const BlasKernel loaded{.library = "OpenBLAS 0.3.21", .kernel = "Prescott", .simd = SimdLevel::sse,
                          .chosen_by = "OpenBLAS's own choice", .config = "", .changeable = true};
  const std::string line = optimus::cpu::describe(loaded, haswell);
  CHECK(line == "GEMM: OpenBLAS 0.3.21, kernel Prescott (SSE), OpenBLAS's own choice; OLDER than this processor "
                "(AVX2 or wider runs its FMA units at full rate: AVX2 with FMA: 2 x 256-bit FMA per core (Haswell and "
                "later, Zen 2, Zen 3)): the GEMMs leave part of its arithmetic idle");
  // The same on AMD's AVX2 processors takes OpenBLAS's Zen kernel.
  CHECK(openblas::decide("Prescott", amd(0x17, 0x31, kAvx2), "0.3.21").core == "Zen");
}

TEST_CASE("the kernel chosen follows the processor's widest instructions") {
  CHECK(openblas::decide("Prescott", intel(0xcf, kAmx), "0.3.21").core == "Cooperlake");  // Emerald Rapids
  CHECK(openblas::decide("Prescott", intel(0x55, kAvx512), "0.3.21").core == "SkylakeX");
  CHECK(openblas::decide("Nehalem", intel(0x2a, kAvx), "0.3.21").core == "Sandybridge");
  CHECK(openblas::decide("Sandybridge", amd(0x19, 0x11, kAvx512Bf16), "0.3.21").core == "Haswell");
  CHECK(openblas::decide("Prescott", amd(0x1a, 0x02, kAvx512Bf16), "0.3.21").core == "Cooperlake");  // Zen 5
}

TEST_CASE("an AVX-512 kernel on 256-bit FMA units (Zen 4) gives way to the AVX2 kernel, which multiplies f32 faster") {
  const openblas::Decision d = openblas::decide("Cooperlake", amd(0x19, 0x11, kAvx512Bf16), "0.3.21");
  CHECK(d.core == "Haswell");
  CHECK(contains(d.why, "splits into 256-bit halves"));
  CHECK(openblas::decide("SkylakeX", amd(0x19, 0x11, kAvx512), "0.3.21").core == "Haswell");
  CHECK(openblas::decide("Cooperlake", intel(0xcf, kAmx), "0.3.21").core.empty());  // 512-bit units: kept
  CHECK(openblas::decide("Cooperlake", amd(0x1a, 0x02, kAvx512Bf16), "0.3.21").core.empty());  // Zen 5
}

// (The user's OPENBLAS_CORETYPE stands: example_train_gpt_user_kernel.)
TEST_CASE("a fitting kernel, and a processor with nothing better, are kept") {
  const openblas::Decision own = openblas::decide("Haswell", intel(0x3c, kAvx2), "0.3.21");
  CHECK(own.core.empty());
  CHECK(own.why == "OpenBLAS's own choice");
  CHECK(openblas::decide("Zen", amd(0x19, 0x11, kAvx512Bf16), "0.3.21").core.empty());  // fits Zen 4's units
  CHECK(openblas::decide("Haswell", amd(0x19, 0x11, kAvx512Bf16), "0.3.21").core.empty());
  CHECK(openblas::decide("Prescott", intel(0x1a, kSse), "0.3.21").core.empty());
  CHECK(openblas::decide("Prescott", Processor{}, "0.3.21").core.empty());
  const openblas::Decision unknown = openblas::decide("Prescott", Processor{}, "0.3.21");
  CHECK(unknown.why == "OpenBLAS's own choice");  // not x86-64: nothing to judge against
}

TEST_CASE("a kernel known to compute wrong products is never chosen, and replaced when loaded") {
  // OpenBLAS 0.3.11 and 0.3.14 compiled SkylakeX's and Cooperlake's direct sgemm empty.
  CHECK(!openblas::known_wrong("0.3.14", "SkylakeX").empty());
  CHECK(!openblas::known_wrong("0.3.11", "Cooperlake").empty());
  CHECK(openblas::known_wrong("0.3.21", "SkylakeX").empty());
  CHECK(openblas::known_wrong("0.3.14", "Haswell").empty());
  CHECK(openblas::core_for(intel(0xcf, kAmx), "0.3.14") == "Haswell");
  const openblas::Decision d = openblas::decide("SkylakeX", intel(0x55, kAvx512), "0.3.14");
  CHECK(d.core == "Haswell");
  CHECK(contains(d.why, "known wrong"));
  CHECK(openblas::decide("SkylakeX", intel(0x55, kAvx512), "0.3.21").core.empty());
}

TEST_CASE("the kernel in use is recorded, and fits this processor unless the user chose it") {
  const BlasKernel k = optimus::cpu::blas_kernel();
  const Processor p = optimus::cpu::this_processor();
  CHECK(!k.library.empty());
  CHECK(!k.chosen_by.empty());
  CHECK(contains(optimus::cpu::gemm_backend(), k.library.substr(0, k.library.find(' '))));
  INFO(optimus::cpu::describe(k, p));
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && k.library.rfind("OpenBLAS", 0) == 0) {
    CHECK(contains(optimus::cpu::gemm_backend(), k.kernel));  // OpenBLAS's configuration names its kernel
    CHECK(optimus::cpu::fit_of(k.simd, p) != KernelFit::older);
  }
  CHECK(optimus::cpu::check_gemm_products().empty());
}

TEST_CASE("every OpenBLAS kernel this processor runs computes the products right when switched to") {
  const BlasKernel first = optimus::cpu::blas_kernel();
  if (!first.changeable) {
    CHECK_THROWS_AS(optimus::cpu::use_blas_kernel("Haswell"), optimus::Error);
    return;
  }
  const Processor p = optimus::cpu::this_processor();
  int tried = 0;
  for (const char* core : {"Prescott", "Nehalem", "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake"}) {
    if (!openblas::runs_on(core, p)) continue;
    CAPTURE(core);
    const BlasKernel now = optimus::cpu::use_blas_kernel(core);
    CHECK(now.kernel == core);
    CHECK(now.simd == openblas::simd_of(core));
    CHECK(contains(optimus::cpu::gemm_backend(), core));
    CHECK(optimus::cpu::check_gemm_products().empty());
    CHECK(random_product_error(130, 150, 170) < 170 * 0x1p-24);  // the rounding bound k u
    ++tried;
  }
  CHECK(tried >= 1);
  CHECK(optimus::cpu::use_blas_kernel(first.kernel).kernel == first.kernel);
  CHECK_THROWS_WITH_AS(optimus::cpu::use_blas_kernel("Power10"),
                       doctest::Contains("'Power10' is not one of OpenBLAS's x86-64 kernels"), optimus::Error);
  if (!p.features.avx512) {
    CHECK_THROWS_WITH_AS(optimus::cpu::use_blas_kernel("SkylakeX"), doctest::Contains("do not run on this processor"),
                         optimus::Error);
  }
  CHECK(optimus::cpu::blas_kernel().kernel == first.kernel);
}
