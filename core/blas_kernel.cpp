// Judging the CPU GEMM's kernel (blas_kernel.hpp): the parts every backend shares — the verdict, the header lines,
// the products that prove a kernel — and OpenBLAS's core table. The kernel in use and the change of kernel are the
// backend's (gemm_openblas.cpp, gemm_eigen.cpp).
#include "optimus/core/blas_kernel.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <sstream>
#include <vector>

#include "optimus/core/kernels.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::cpu {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// One product C = alpha op(A) op(B) + beta C of small integers through cpu::gemm against a plain loop; "" or what
// differs. Every value is an integer or a half below 2^24, so both are exact and must agree bit for bit.
template <class T>
std::string check_product(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T beta) {
  // op(A): [m, k] stored [k, m] when transposed; op(B): [k, n] stored [n, k] when transposed; C: [m, n].
  Tensor<T> a(ta ? Shape{k, m} : Shape{m, k}), b(tb ? Shape{n, k} : Shape{k, n}), c(Shape{m, n});
  const auto small = [](std::int64_t e, int salt) { return T(((e * 7 + salt) % 11) - 5); };
  T* const pa = a.view().data();
  T* const pb = b.view().data();
  T* const pc = c.view().data();
  for (std::int64_t e = 0; e < m * k; ++e) pa[e] = small(e, 1);
  for (std::int64_t e = 0; e < k * n; ++e) pb[e] = small(e, 4);
  for (std::int64_t e = 0; e < m * n; ++e) pc[e] = small(e, 2);
  std::vector<T> expected(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      T sum = 0;
      for (std::int64_t l = 0; l < k; ++l) sum += pa[ta ? l * m + i : i * k + l] * pb[tb ? j * k + l : l * n + j];
      expected[static_cast<std::size_t>(i * n + j)] = alpha * sum + (beta == T(0) ? T(0) : beta * pc[i * n + j]);
    }
  }
  gemm<T>(ta ? Trans::yes : Trans::no, tb ? Trans::yes : Trans::no, alpha, a.view(), b.view(), beta, c.view());
  for (std::int64_t e = 0; e < m * n; ++e) {
    const T want = expected[static_cast<std::size_t>(e)];
    if (pc[e] != want) {
      std::ostringstream what;
      what << (sizeof(T) == 4 ? "f32" : "f64") << " C[" << m << "x" << n << "] = " << alpha << " op(A) op(B) + " << beta
           << " C with k = " << k << (ta ? ", A transposed" : "") << (tb ? ", B transposed" : "") << ": C(" << e / n
           << ", " << e % n << ") is " << pc[e] << ", not " << want;
      return what.str();
    }
  }
  return "";
}

template <class T>
std::string check_products_of() {
  struct Size {
    std::int64_t m, n, k;
  };
  // Single elements, OpenBLAS's small-matrix and direct paths, odd edges of its unrolled blocks, and the packed path of
  // kernels without small-matrix code; about 3.5 ms in all (it runs when a program loads and Optimus changes the
  // kernel). test_blas_kernel adds a 130 x 150 x 170 product per kernel, past every small-matrix path.
  const Size sizes[] = {{1, 1, 1}, {3, 5, 7}, {16, 16, 16}, {33, 17, 9}, {37, 61, 29}, {72, 64, 56}};
  for (const Size& s : sizes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      for (const auto& [alpha, beta] : {std::pair<T, T>{1, 0}, std::pair<T, T>{0.5, 2}}) {
        std::string wrong = check_product<T>(ta, tb, s.m, s.n, s.k, alpha, beta);
        if (!wrong.empty()) return wrong;
      }
    }
  }
  return "";
}

std::string fit_phrase(const BlasKernel& kernel, const Processor& processor) {
  const VectorUnits units = vector_units(processor);
  const std::string need = std::string(name_of(units.full_rate)) + " or wider runs its FMA units at full rate: " +
                           units.basis;
  switch (fit_of(kernel.simd, processor)) {
    case KernelFit::fits: return "fits this processor (" + need + ")";
    case KernelFit::older:
      return "OLDER than this processor (" + need + "): the GEMMs leave part of its arithmetic idle";
    case KernelFit::unknown: break;
  }
  return "not judged (the kernel's or the processor's vector instructions are unknown)";
}

}  // namespace

std::string_view name_of(KernelFit fit) {
  switch (fit) {
    case KernelFit::fits: return "fits";
    case KernelFit::older: return "older";
    case KernelFit::unknown: break;
  }
  return "unknown";
}

KernelFit fit_of(SimdLevel kernel, const Processor& processor) {
  const SimdLevel needed = vector_units(processor).full_rate;
  if (kernel == SimdLevel::unknown || needed == SimdLevel::unknown) return KernelFit::unknown;
  return kernel < needed ? KernelFit::older : KernelFit::fits;
}

std::string check_gemm_products() {
  std::string wrong = check_products_of<float>();
  return wrong.empty() ? check_products_of<double>() : wrong;
}

std::string describe(const Processor& processor) { return "processor: " + processor.describe(); }

std::string describe(const BlasKernel& kernel, const Processor& processor) {
  return "GEMM: " + kernel.library + ", kernel " + kernel.kernel + " (" + std::string(name_of(kernel.simd)) + "), " +
         kernel.chosen_by + "; " + fit_phrase(kernel, processor);
}

namespace openblas {
namespace {

struct Core {
  std::string_view name;
  SimdLevel simd;
};
// driver/others/dynamic.c's x86-64 names. Piledriver and Steamroller have FMA3 but not AVX2; Bulldozer FMA4.
constexpr std::array<Core, 26> kCores = {{
    {"Katmai", SimdLevel::sse},         {"Coppermine", SimdLevel::sse},   {"Northwood", SimdLevel::sse},
    {"Prescott", SimdLevel::sse},       {"Banias", SimdLevel::sse},       {"Atom", SimdLevel::sse},
    {"Core2", SimdLevel::sse},          {"Penryn", SimdLevel::sse},       {"Dunnington", SimdLevel::sse},
    {"Nehalem", SimdLevel::sse},        {"Athlon", SimdLevel::sse},       {"Opteron", SimdLevel::sse},
    {"Opteron_SSE3", SimdLevel::sse},   {"Barcelona", SimdLevel::sse},    {"Nano", SimdLevel::sse},
    {"Bobcat", SimdLevel::sse},         {"Sandybridge", SimdLevel::avx},  {"Bulldozer", SimdLevel::avx},
    {"Piledriver", SimdLevel::avx},     {"Steamroller", SimdLevel::avx},  {"Haswell", SimdLevel::avx2},
    {"Excavator", SimdLevel::avx2},     {"Zen", SimdLevel::avx2},         {"SkylakeX", SimdLevel::avx512},
    {"Cooperlake", SimdLevel::avx512},  {"SapphireRapids", SimdLevel::avx512},
}};

// AVX-512 on FMA units half as wide (Zen 4): the AVX2 kernel reaches the same peak, and its f32 GEMM was measured
// faster — over the layer bench's GEMMs (h 512, 1024 tokens) 193-199 ms against Cooperlake's 205-211 and SkylakeX's
// 203-207, one thread or two at once; 1024^3: 108 GFLOP/s against 100 (its f64 GEMM: 50 against 52).
bool half_width_units(const Processor& processor) {
  return processor.simd() == SimdLevel::avx512 && vector_units(processor).full_rate == SimdLevel::avx2;
}

const Core* find(std::string_view core) {
  for (const Core& c : kCores) {
    if (same_name(c.name, core)) return &c;
  }
  return nullptr;
}

}  // namespace

SimdLevel simd_of(std::string_view core) {
  const Core* c = find(core);
  return c ? c->simd : SimdLevel::unknown;
}

bool runs_on(std::string_view core, const Processor& processor) {
  const Core* c = find(core);
  if (c == nullptr || c->simd > processor.simd()) return false;
  const CpuFeatures& f = processor.features;
  if (c->name == "SapphireRapids") return f.avx512_bf16 && f.amx;
  if (c->name == "Cooperlake") return f.avx512_bf16;
  return true;
}

std::string canonical_name(std::string_view core) {
  const Core* c = find(core);
  return c ? std::string(c->name) : std::string();
}

std::string known_wrong(std::string_view version, std::string_view core) {
  // kernel/x86_64/sgemm_direct_skylakex.c tested SKYLAKEX before including the header that defines it, so it compiled
  // to an empty function: cblas_sgemm returns without computing row-major A B with alpha 1 and beta 0 at the sizes it
  // sends there (issue #2914, fixed in 0.3.12; the same mistake again in 0.3.14, issue #3152, fixed in 0.3.15).
  if ((version == "0.3.11" || version == "0.3.14") && (same_name(core, "SkylakeX") || same_name(core, "Cooperlake"))) {
    return "OpenBLAS " + std::string(version) + "'s " + std::string(core) +
           " sgemm skips small row-major products (OpenBLAS issues #2914 and #3152)";
  }
  return "";
}

std::string core_for(const Processor& processor, std::string_view version) {
  const CpuFeatures& f = processor.features;
  std::vector<std::string> candidates;  // widest first
  if (half_width_units(processor)) candidates.emplace_back("Haswell");
  if (f.avx512 && f.avx512_bf16) candidates.emplace_back("Cooperlake");
  if (f.avx512) candidates.emplace_back("SkylakeX");
  if (f.avx2 && f.fma) candidates.emplace_back(processor.amd() ? "Zen" : "Haswell");
  if (f.avx) candidates.emplace_back("Sandybridge");
  for (const std::string& core : candidates) {
    if (known_wrong(version, core).empty()) return core;
  }
  return "";
}

Decision decide(std::string_view loaded, const Processor& processor, std::string_view version) {
  const std::string wrong = known_wrong(version, loaded);
  const SimdLevel simd = simd_of(loaded);
  const bool older = fit_of(simd, processor) == KernelFit::older;
  const bool split = half_width_units(processor) && simd > vector_units(processor).full_rate;
  if (wrong.empty() && !older && !split) return {.core = "", .why = "OpenBLAS's own choice"};
  const std::string core = core_for(processor, version);
  const std::string reason =
      "OpenBLAS chose " + std::string(loaded) + " (" + std::string(name_of(simd)) + "), " +
      (!wrong.empty() ? "known wrong: " + wrong
       : older        ? std::string("older than this processor")
                      : std::string("whose AVX-512 instructions this processor splits into 256-bit halves (its "
                                    "AVX2 kernel multiplies f32 faster: 6% on Zen 4)"));
  if (core.empty() || same_name(core, loaded)) return {.core = "", .why = reason + "; no better kernel is known"};
  return {.core = core, .why = "chosen by Optimus: " + reason};
}

}  // namespace openblas
}  // namespace optimus::cpu
