// Which kernel multiplies Optimus's matrices on the CPU, whether it fits the processor, and how it came to be the one.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) carries a kernel per processor family and picks one when it loads, by
// CPUID — or by OPENBLAS_CORETYPE when that is set. A processor it does not know gets an old kernel: OpenBLAS 0.3.21
// runs its SSE3 Prescott kernel (2004) on Intel family 6 model 0xcf (Emerald Rapids), a fifth of the machine's GEMM
// rate. So when a program linking Optimus loads, after OpenBLAS chose and before main() (gemm_openblas.cpp):
//
//   * OPENBLAS_CORETYPE set (even empty): the user's choice stands, and is only judged.
//   * otherwise, if the loaded kernel is older than the processor (its vector instructions narrower than the ones its
//     FMA units need to run at full rate, processor.hpp's VectorUnits::full_rate), known to compute wrong products
//     in this OpenBLAS version, or an AVX-512 kernel on units half as wide (Zen 4, where OpenBLAS's AVX2 kernel
//     multiplies f32 6% faster, measured), Optimus asks OpenBLAS for the kernel of the processor's widest
//     instructions at full rate (openblas::core_for: Cooperlake, SkylakeX, Haswell or Zen, Sandybridge; Haswell on
//     Zen 4) through OpenBLAS's own entry points —
//     the same code path OPENBLAS_CORETYPE takes at load — then multiplies a set of small integer matrices with it
//     (every product exact, so a wrong kernel shows; check_gemm_products) and goes back to OpenBLAS's kernel if any
//     product is wrong. The environment is left as it was.
//
// Why in the process, not by setting OPENBLAS_CORETYPE before the library loads: the variable would have to be set
// before any library initialiser runs — an ELF pre-initialiser cannot (glibc resets the environment after it), a
// launch script covers only the programs started through it, and a re-exec of the program breaks under MPI launchers,
// debuggers and valgrind and surprises a user's own program that links Optimus. OpenBLAS's gotoblas_dynamic_quit and
// gotoblas_dynamic_init (driver/others/dynamic.c) are in no header but exported by its DYNAMIC_ARCH libraries
// (Debian 12's among them): Optimus looks them up at run time and, where they are missing (an OpenBLAS built for one
// target), only judges.
//
// The Eigen backend's kernel is the build's (-march from OPTIMUS_ARCH): judged, never changed.
#pragma once

#include <string>
#include <string_view>

#include "optimus/core/processor.hpp"

namespace optimus::cpu {

struct BlasKernel {
  std::string library;    // "OpenBLAS 0.3.21", "Eigen 3.4.0"
  std::string kernel;     // OpenBLAS's core name ("Cooperlake"), or Eigen's packets ("AVX2 packets")
  SimdLevel simd = SimdLevel::unknown;  // the kernel's vector instructions (unknown: a name not in the table)
  std::string chosen_by;  // "OpenBLAS's own choice", "OPENBLAS_CORETYPE=Haswell (set by the user)", "Optimus: ..."
  std::string config;     // the library's description of itself (openblas_get_config)
  bool changeable = false;  // whether use_blas_kernel can change it in this process
};

enum class KernelFit {
  fits,     // its vector instructions reach the processor's full rate
  older,    // narrower: the processor's FMA units idle part of each cycle
  unknown,  // the kernel's or the processor's instructions are not known
};
std::string_view name_of(KernelFit fit);
KernelFit fit_of(SimdLevel kernel, const Processor& processor);

// The kernel Optimus's CPU GEMMs run now (as chosen when the program loaded, or by use_blas_kernel since).
BlasKernel blas_kernel();

// Makes `kernel` (an OpenBLAS core name) the one the CPU GEMMs run from now on — what OPENBLAS_CORETYPE=kernel does at
// load — checks its products (check_gemm_products) and returns the kernel now in use. For tests and benchmarks that
// compare kernels in one process: call it while no other thread runs a GEMM or reads the environment. optimus::Error
// when the backend cannot change kernels (Eigen, a single-target OpenBLAS), when OpenBLAS does not have `kernel` (it
// falls back to its own choice, which stays), or when the kernel computes a wrong product (the previous one is
// restored).
BlasKernel use_blas_kernel(const std::string& kernel);

// Multiplies small integer matrices, f32 and f64, all four transpositions, shapes from 1 x 1 x 1 to 72 x 64 x 56,
// alpha 1 / beta 0 and alpha 0.5 / beta 2, and compares each element with a plain loop: the products are exact, so
// any difference is a wrong kernel. Returns "" or the first wrong product, named.
std::string check_gemm_products();

// The two lines every Optimus program prints in its header:
//   "processor: AMD EPYC (AuthenticAMD family 0x19 model 0x11), 2 cores for this process, SSE3 ... AVX512_BF16"
//   "GEMM: OpenBLAS 0.3.21, kernel Cooperlake (AVX-512), OpenBLAS's own choice; fits this processor (...)"
std::string describe(const Processor& processor);
std::string describe(const BlasKernel& kernel, const Processor& processor);

// OpenBLAS's x86-64 kernels (the DYNAMIC_ARCH core names), as data: pure functions, tested on any machine.
namespace openblas {

// The vector instructions of an OpenBLAS core (Prescott: SSE, Sandybridge: AVX, Haswell and Zen: AVX2, SkylakeX and
// Cooperlake: AVX-512, ...; case-insensitive); unknown for names not in the table.
SimdLevel simd_of(std::string_view core);
// Whether this processor runs `core`'s instructions: its vector instructions, and AVX512_BF16 for Cooperlake and
// SapphireRapids (AMX too for SapphireRapids); false for names not in the table.
bool runs_on(std::string_view core, const Processor& processor);
// The table's spelling of a core name given in any case ("haswell": "Haswell"); "" for names not in the table.
std::string canonical_name(std::string_view core);

// Why `core` is known to compute wrong products in OpenBLAS `version` ("0.3.14"), naming the upstream issue; "" if not.
std::string known_wrong(std::string_view version, std::string_view core);

// The core for the processor's widest vector instructions that `version` is not known to get wrong: Cooperlake with
// AVX512_BF16, SkylakeX with AVX-512, Haswell (Zen on AMD and Hygon) with AVX2 and FMA, Sandybridge with AVX — and
// Haswell where AVX-512 runs on 256-bit units (Zen 4); "" when none is better than what OpenBLAS chose itself (SSE
// only, or not x86-64).
std::string core_for(const Processor& processor, std::string_view version);

// What to do with the kernel OpenBLAS `version` loaded by itself (OPENBLAS_CORETYPE unset: with it set, the user's
// kernel stands): `core` empty keeps it, else the core to use instead; `why` says which and why in a phrase the header
// prints.
struct Decision {
  std::string core;
  std::string why;
};
Decision decide(std::string_view loaded, const Processor& processor, std::string_view version);

}  // namespace openblas
}  // namespace optimus::cpu
