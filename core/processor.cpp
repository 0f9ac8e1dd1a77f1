// The processor's facts (processor.hpp): CPUID and XGETBV on x86-64, the affinity mask and sysfs for the cores.
#include "optimus/core/processor.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace optimus::cpu {
namespace {

struct Registers {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

bool bit(unsigned word, int b) { return ((word >> b) & 1u) != 0; }

#if defined(__x86_64__)
// CPUID leaf `leaf`, sub-leaf `sub`; all zero when the processor does not have that leaf.
Registers cpuid(unsigned leaf, unsigned sub) {
  Registers r;
  if (__get_cpuid_count(leaf, sub, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return Registers{};
  return r;
}

// XCR0: which register states the OS saves on a context switch (only readable when CPUID says OSXSAVE).
std::uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

void read_cpuid(Processor& p) {
  const Registers id = cpuid(0, 0);
  char vendor[13] = {};
  for (int k = 0; k < 4; ++k) {
    vendor[k] = static_cast<char>(id.ebx >> (8 * k));
    vendor[4 + k] = static_cast<char>(id.edx >> (8 * k));
    vendor[8 + k] = static_cast<char>(id.ecx >> (8 * k));
  }
  p.vendor = vendor;
  const Registers one = cpuid(1, 0);
  const unsigned base_family = (one.eax >> 8) & 0xf, base_model = (one.eax >> 4) & 0xf;
  p.family = static_cast<int>(base_family == 0xf ? base_family + ((one.eax >> 20) & 0xff) : base_family);
  p.model = static_cast<int>(base_family == 0x6 || base_family == 0xf ? base_model + (((one.eax >> 16) & 0xf) << 4)
                                                                      : base_model);
  const std::uint64_t os = bit(one.ecx, 27) ? xcr0() : 0;  // OSXSAVE
  const bool ymm = (os & 0x6) == 0x6, zmm = (os & 0xe6) == 0xe6, tiles = (os & 0x60000) == 0x60000;
  const Registers seven = id.eax >= 7 ? cpuid(7, 0) : Registers{};
  const Registers seven_one = seven.eax >= 1 ? cpuid(7, 1) : Registers{};
  CpuFeatures& f = p.features;
  f.sse3 = bit(one.ecx, 0);
  f.avx = bit(one.ecx, 28) && ymm;
  f.fma = bit(one.ecx, 12) && f.avx;
  f.avx2 = bit(seven.ebx, 5) && f.avx;
  // F (16), DQ (17), CD (28), BW (30), VL (31).
  f.avx512 = bit(seven.ebx, 16) && bit(seven.ebx, 17) && bit(seven.ebx, 28) && bit(seven.ebx, 30) &&
             bit(seven.ebx, 31) && zmm;
  f.avx512_bf16 = f.avx512 && bit(seven_one.eax, 5);
  f.amx = bit(seven.edx, 24) && tiles;  // AMX-TILE
  const Registers extended = cpuid(0x80000000u, 0);
  if (extended.eax >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      const Registers b = cpuid(0x80000002u + leaf, 0);
      const unsigned words[4] = {b.eax, b.ebx, b.ecx, b.edx};
      for (int w = 0; w < 4; ++w) {
        for (int k = 0; k < 4; ++k) brand[leaf * 16 + w * 4 + k] = static_cast<char>(words[w] >> (8 * k));
      }
    }
    p.brand = brand;
    p.brand.erase(0, p.brand.find_first_not_of(' '));
    p.brand.erase(p.brand.find_last_not_of(' ') + 1);
  }
}
#else
void read_cpuid(Processor&) {}
#endif

// One number from a sysfs file, or -1.
long sysfs_number(const std::string& path) {
  std::ifstream in(path);
  long value = -1;
  in >> value;
  return in ? value : -1;
}

// Physical cores among the CPUs this process may run on: distinct (package, core) pairs of sysfs's topology; the CPU
// count where sysfs does not say.
int physical_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return 1;
  std::set<std::pair<long, long>> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mask)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    const long package = sysfs_number(topology + "physical_package_id"), core = sysfs_number(topology + "core_id");
    if (package < 0 || core < 0) return CPU_COUNT(&mask);  // no topology: every CPU a core
    cores.emplace(package, core);
  }
  return std::max(1, static_cast<int>(cores.size()));
}

}  // namespace

std::string_view name_of(SimdLevel level) {
  switch (level) {
    case SimdLevel::sse: return "SSE";
    case SimdLevel::avx: return "AVX";
    case SimdLevel::avx2: return "AVX2";
    case SimdLevel::avx512: return "AVX-512";
    case SimdLevel::unknown: break;
  }
  return "unknown";
}

SimdLevel Processor::simd() const {
  if (features.avx512) return SimdLevel::avx512;
  if (features.avx2 && features.fma) return SimdLevel::avx2;
  if (features.avx) return SimdLevel::avx;
  if (!vendor.empty()) return SimdLevel::sse;  // every x86-64 processor has SSE2
  return SimdLevel::unknown;
}

std::string Processor::describe() const {
  if (vendor.empty()) {
    return "not x86-64 (no CPUID): vector instructions unknown, " + std::to_string(cores) + " cores for this process";
  }
  char id[64];
  std::snprintf(id, sizeof id, "%s family 0x%x model 0x%x", vendor.c_str(), static_cast<unsigned>(family),
                static_cast<unsigned>(model));
  std::string line = (brand.empty() ? std::string("x86-64") : brand) + " (" + id + "), " + std::to_string(cores) +
                     (cores == 1 ? " core" : " cores") + " for this process,";
  for (std::string_view name : feature_names()) line.append(" ").append(name);
  return line;
}

std::vector<std::string_view> Processor::feature_names() const {
  const std::pair<bool, std::string_view> named[] = {{features.sse3, "SSE3"},     {features.avx, "AVX"},
                                                     {features.fma, "FMA"},       {features.avx2, "AVX2"},
                                                     {features.avx512, "AVX-512"},
                                                     {features.avx512_bf16, "AVX512_BF16"}, {features.amx, "AMX"}};
  std::vector<std::string_view> names;
  for (const auto& [has, name] : named) {
    if (has) names.push_back(name);
  }
  return names;
}

Processor this_processor() {
  Processor p;
  read_cpuid(p);
  p.cores = physical_cores();
  return p;
}

VectorUnits vector_units(const Processor& p) {
  const CpuFeatures& f = p.features;
  if (f.avx512) {
    if (p.amd() && p.family == 0x19) {
      return {.fma_units = 2, .datapath_bits = 256, .fma = true, .full_rate = SimdLevel::avx2,
              .basis = "Zen 4: 2 x 256-bit FMA per core, AVX-512 instructions in two halves"};
    }
    if (p.amd()) {
      return {.fma_units = 2, .datapath_bits = 512, .fma = true, .full_rate = SimdLevel::avx512,
              .basis = "Zen 5: 2 x 512-bit FMA per core"};
    }
    // Ice Lake and Tiger Lake laptops and desktops, Rocket Lake: one 512-bit FMA (ports 0 and 1 fused).
    const int one_unit[] = {0x7d, 0x7e, 0x8c, 0x8d, 0xa7};
    if (p.family == 6 && std::find(std::begin(one_unit), std::end(one_unit), p.model) != std::end(one_unit)) {
      return {.fma_units = 1, .datapath_bits = 512, .fma = true, .full_rate = SimdLevel::avx512,
              .basis = "Intel client with AVX-512: 1 x 512-bit FMA per core"};
    }
    return {.fma_units = 2, .datapath_bits = 512, .fma = true, .full_rate = SimdLevel::avx512,
            .basis = "Intel Xeon with AVX-512: 2 x 512-bit FMA per core (assumed: some Bronze and Silver have 1)"};
  }
  if (f.avx2 && f.fma) {
    if (p.amd() && ((p.family == 0x17 && p.model < 0x30) || p.family == 0x18)) {  // 0x18: Hygon's Zen
      return {.fma_units = 2, .datapath_bits = 128, .fma = true, .full_rate = SimdLevel::avx2,
              .basis = "Zen, Zen+: 2 x 128-bit FMA per core, AVX instructions in two halves"};
    }
    return {.fma_units = 2, .datapath_bits = 256, .fma = true, .full_rate = SimdLevel::avx2,
            .basis = "AVX2 with FMA: 2 x 256-bit FMA per core (Haswell and later, Zen 2, Zen 3)"};
  }
  if (f.avx) {
    return {.fma_units = 1, .datapath_bits = 256, .fma = false, .full_rate = SimdLevel::avx,
            .basis = "AVX without FMA: a 256-bit multiply and a 256-bit add per cycle"};
  }
  if (!p.vendor.empty()) {
    return {.fma_units = 1, .datapath_bits = 128, .fma = false, .full_rate = SimdLevel::sse,
            .basis = "SSE: a 128-bit multiply and a 128-bit add per cycle"};
  }
  return {.basis = "unknown off x86-64"};
}

double measure_clock_hz() {
#if defined(__x86_64__)
  constexpr std::uint64_t kIterations = 1u << 20;  // x 16 additions: 16.8 M cycles, ~5 ms at 3.5 GHz
  constexpr double kAdditions = 16.0 * kIterations;
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    std::uint64_t sum = 0, left = kIterations;
    const auto t0 = std::chrono::steady_clock::now();
    // Sixteen additions to one register per iteration: each waits for the last (one cycle of latency), while the
    // counter's decrement and branch run beside them. The addend is a register, not an immediate: Golden Cove and
    // later Intel cores fold chains of immediate additions at rename and ran `add $1` twice per cycle (measured 8.3
    // "GHz" on Emerald Rapids).
    const std::uint64_t one = 1;
    __asm__ volatile(
        "1:\n\t"
        ".rept 16\n\t"
        "add %2, %0\n\t"
        ".endr\n\t"
        "dec %1\n\t"
        "jnz 1b"
        : "+r"(sum), "+r"(left)
        : "r"(one)
        : "cc");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, kAdditions / seconds);
  }
  return best;
#else
  return 0;
#endif
}

}  // namespace optimus::cpu
