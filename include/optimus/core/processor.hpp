// The processor this process runs on, as the CPU GEMM sees it: who made it, which vector instructions it runs (CPUID,
// as far as the operating system enabled them: XGETBV), its physical cores, and what its FMA units can compute per
// cycle — the facts that judge a BLAS kernel (blas_kernel.hpp) and give a benchmark's theoretical peak:
//
//   peak FLOP/s = cores x clock x FLOPs per cycle per core,
//   FLOPs per cycle (f32) = FMA units x (datapath bits / 32) x 2      (an FMA is two FLOPs; f64: half of it).
//
// CPUID does not say how many FMA units a core has or how wide its datapath is, so vector_units() takes them from the
// vendors' and Agner Fog's descriptions of each microarchitecture (docs/design.md, "The CPU's kernel and peak"), and
// says which row it used. The clock is measured (measure_clock_hz): a virtual machine's nominal clock is not the
// clock its cores run at.
//
// Off x86-64 nothing is known: vendor empty, every feature false, SimdLevel::unknown.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optimus::cpu {

// Vector instruction sets for f32/f64 arithmetic on x86-64, narrowest first.
enum class SimdLevel { unknown, sse, avx, avx2, avx512 };
// "SSE", "AVX", "AVX2", "AVX-512" ("unknown").
std::string_view name_of(SimdLevel level);

// What the processor runs, each as the OS enabled it (AVX needs the YMM state saved, AVX-512 the opmask and ZMM states,
// AMX the tile states).
struct CpuFeatures {
  bool sse3 = false;
  bool avx = false;
  bool fma = false;          // FMA3
  bool avx2 = false;
  bool avx512 = false;       // AVX-512 F, CD, BW, DQ and VL together (Skylake-SP's set, what AVX-512 BLAS kernels use)
  bool avx512_bf16 = false;  // AVX512_BF16 (Cooper Lake, Zen 4, Sapphire Rapids)
  bool amx = false;          // AMX tiles (Sapphire Rapids and later)
};

struct Processor {
  std::string vendor;  // CPUID's: "GenuineIntel", "AuthenticAMD", "HygonGenuine", ... ("" off x86-64)
  std::string brand;   // CPUID's brand string, e.g. "AMD EPYC" or "Intel(R) Xeon(R) Platinum 8592+"
  int family = 0;      // display family and model (the extended fields folded in, as Intel and AMD number them)
  int model = 0;
  CpuFeatures features;
  int cores = 0;  // physical cores this process may run on (hardware threads of one core counted once)

  // The widest vector instructions it runs.
  SimdLevel simd() const;
  // AMD's, or Hygon's (AMD's Zen under licence).
  bool amd() const { return vendor == "AuthenticAMD" || vendor == "HygonGenuine"; }
  // The features it has, by name: "SSE3", "AVX", "FMA", "AVX2", "AVX-512", "AVX512_BF16", "AMX".
  std::vector<std::string_view> feature_names() const;
  // "AMD EPYC (AuthenticAMD family 0x19 model 0x11), 2 cores for this process, SSE3 AVX FMA AVX2 AVX-512 AVX512_BF16".
  std::string describe() const;
};

// This process's processor (CPUID, XGETBV and the CPUs of its affinity mask).
Processor this_processor();

// What one core computes per cycle, from its microarchitecture.
struct VectorUnits {
  int fma_units = 0;       // vector FMA (or, without FMA, multiply + add pairs) issued per cycle
  int datapath_bits = 0;   // width of each: a 512-bit instruction on 256-bit units takes two of them
  bool fma = false;        // fused: a unit does a multiply and an add per lane per cycle either way
  SimdLevel full_rate = SimdLevel::unknown;  // the narrowest instructions that reach that rate
  std::string basis;       // which row of the table, e.g. "Zen 4: 2 x 256-bit FMA per core, AVX-512 instructions in ..."

  // f32 FLOPs per cycle per core (f64: half): units x lanes x 2.
  double f32_flops_per_cycle() const { return static_cast<double>(fma_units) * datapath_bits / 32.0 * 2.0; }
};
VectorUnits vector_units(const Processor& processor);

// The clock of the calling thread's core, in Hz, measured now: a chain of dependent integer additions retires one per
// cycle on every x86-64 core, so additions per second is cycles per second (the best of three runs of ~5 ms). Turbo
// and a busy machine show in it, as they do in a GEMM measured at the same time. 0 off x86-64.
double measure_clock_hz();

}  // namespace optimus::cpu
