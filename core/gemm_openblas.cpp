// CPU GEMM on OpenBLAS's cblas interface, OpenBLAS opened with dlopen (the build's variant, pthreads or OpenMP:
// OPTIMUS_OPENBLAS_PATH), not linked: as the program loads, by the kernel choice below. OpenBLAS starts a thread pool
// as it loads, sized by OPENBLAS_NUM_THREADS (else one thread per core), each thread taking a 128 MiB working buffer at
// once — under an address-space limit a pool thread retries that allocation forever (a process at 100% CPU with
// nothing printed). Optimus runs one rank per thread, so it opens OpenBLAS with OPENBLAS_NUM_THREADS=1 where the
// environment does not set it (a value the user gives is kept), and asks for more GEMM threads itself where it wants
// them (set_gemm_threads); gemm_backend() reports the count. Its kernel: judged, and replaced when older than the
// processor, as the program loads (blas_kernel.hpp).
#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "optimus/core/dynamic_library.hpp"
#include "gemm_backend.hpp"
#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

#if !defined(OPTIMUS_OPENBLAS_PATH)
#error "OPTIMUS_OPENBLAS_PATH (the OpenBLAS library the build found) is set by core/CMakeLists.txt"
#endif

namespace optimus::cpu {
namespace {

// OpenBLAS's functions that Optimus calls, from the library opened on first use. The two of its kernel choice
// (driver/others/dynamic.c), in no header, exist in its DYNAMIC_ARCH builds only (null elsewhere): forget() drops the
// kernel in use, choose() picks one as at load — OPENBLAS_CORETYPE's if set, else by CPUID.
struct OpenBlas {
  optimus::detail::DynamicLibrary library;
  decltype(&::cblas_sgemm) cblas_sgemm = nullptr;
  decltype(&::cblas_dgemm) cblas_dgemm = nullptr;
  decltype(&::openblas_get_config) openblas_get_config = nullptr;
  decltype(&::openblas_get_corename) openblas_get_corename = nullptr;
  decltype(&::openblas_get_num_threads) openblas_get_num_threads = nullptr;
  decltype(&::openblas_set_num_threads) openblas_set_num_threads = nullptr;
  void (*gotoblas_dynamic_quit)() = nullptr;
  void (*gotoblas_dynamic_init)() = nullptr;
  // Its pool of working buffers (driver/others/memory.c, in no header): take one, give it back (the pool keeps it).
  void* (*blas_memory_alloc)(int) = nullptr;
  void (*blas_memory_free)(void*) = nullptr;

  explicit OpenBlas(optimus::detail::DynamicLibrary lib) : library(std::move(lib)) {
    OPTIMUS_RESOLVE(cblas_sgemm);
    OPTIMUS_RESOLVE(cblas_dgemm);
    OPTIMUS_RESOLVE(openblas_get_config);
    OPTIMUS_RESOLVE(openblas_get_corename);
    OPTIMUS_RESOLVE(openblas_get_num_threads);
    OPTIMUS_RESOLVE(openblas_set_num_threads);
    gotoblas_dynamic_quit = library.function_if_any<void (*)()>("gotoblas_dynamic_quit");
    gotoblas_dynamic_init = library.function_if_any<void (*)()>("gotoblas_dynamic_init");
    blas_memory_alloc = library.function_if_any<void* (*)(int)>("blas_memory_alloc");
    blas_memory_free = library.function_if_any<void (*)(void*)>("blas_memory_free");
  }
};

const OpenBlas& blas() {
  // Opened once, by the first caller (C++ serialises the initialisation), and never closed: OpenBLAS's threads and
  // buffers are the process's.
  static const OpenBlas& table = *[] {
    ::setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);  // before the library loads and starts its pool
    const std::string path = OPTIMUS_OPENBLAS_PATH;
    const std::string soname = std::filesystem::path(path).filename().string();
    // An OpenBLAS the process loaded already (ScaLAPACK's BLAS needs one) is the one to call: a second, of another
    // version at the build's path, would resolve its internal calls into the first one's kernels and crash (a lent
    // machine's image had Ubuntu's 0.3.26 at the path, the carried programs Debian's 0.3.21 loaded).
    using optimus::detail::DynamicLibrary;
    const std::vector<std::string> candidates =
        DynamicLibrary::loaded(soname) ? std::vector<std::string>{soname} : std::vector<std::string>{path, soname};
    return new OpenBlas(DynamicLibrary(candidates, "the CPU's GEMMs"));
  }();
  return table;
}

// The buffer of OpenBLAS's pool the calling thread holds (prepare_gemm to release_gemm_buffer), or null.
void*& held_buffer() {
  thread_local void* held = nullptr;
  return held;
}

}  // namespace

namespace detail {
namespace {

int blas_int(std::int64_t x, const char* what) {
  OPTIMUS_CHECK(x <= INT_MAX, "gemm: ", what, " = ", x, " exceeds the 32-bit BLAS interface");
  return static_cast<int>(x);
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

template <>
void gemm_rowmajor<float>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                          std::int64_t ldc) {
  blas().cblas_sgemm(CblasRowMajor, op(ta), op(tb), blas_int(m, "m"), blas_int(n, "n"), blas_int(k, "k"), alpha, a,
              blas_int(lda, "lda"), b, blas_int(ldb, "ldb"), beta, c, blas_int(ldc, "ldc"));
}

template <>
void gemm_rowmajor<double>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
                           const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
                           double* c, std::int64_t ldc) {
  blas().cblas_dgemm(CblasRowMajor, op(ta), op(tb), blas_int(m, "m"), blas_int(n, "n"), blas_int(k, "k"), alpha, a,
              blas_int(lda, "lda"), b, blas_int(ldb, "ldb"), beta, c, blas_int(ldc, "ldc"));
}

}  // namespace detail

namespace {

// OpenBLAS 0.3's BUFFER_SIZE on x86-64 (32 << 22 bytes) plus its alignment page, with room to spare.
constexpr std::size_t kBufferBytes = (std::size_t{32} << 22) + (std::size_t{1} << 20);

// Whether malloc can give OpenBLAS `count` working buffers at once, as it takes one for each thread multiplying at the
// same moment (it would retry a failed one forever).
bool buffers_available(int count) {
  std::vector<void*> probes;
  bool all = true;
  for (int k = 0; k < count && all; ++k) {
    probes.push_back(std::malloc(kBufferBytes));
    all = probes.back() != nullptr;
  }
  for (void* p : probes) std::free(p);
  return all;
}

// OpenBLAS's own kernel choice (OpenBlas: gotoblas_dynamic_quit and _init): forget() drops the kernel in use,
// choose() picks one as at load and initialises its parameters. Both null where the library was built for one target.
struct DynamicArch {
  void (*forget)() = nullptr;
  void (*choose)() = nullptr;
  bool available() const { return forget != nullptr && choose != nullptr; }
};

DynamicArch dynamic_arch() { return {.forget = blas().gotoblas_dynamic_quit, .choose = blas().gotoblas_dynamic_init}; }

// "0.3.21" from "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...".
std::string version_of(const std::string& config) {
  std::istringstream words(config);
  std::string name, version;
  words >> name >> version;
  return version;
}

// Has OpenBLAS choose its kernel again as if it had loaded with OPENBLAS_CORETYPE=core, and returns the one it chose
// (its own choice where it does not know the name). The environment is left as it was. Only while no other thread
// multiplies or reads the environment: at load (one thread), or as use_blas_kernel's caller promises.
std::string load_core(const DynamicArch& arch, const std::string& core) {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> before = set ? std::optional<std::string>(set) : std::nullopt;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  arch.forget();
  arch.choose();
  if (before) {
    setenv("OPENBLAS_CORETYPE", before->c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
  return blas().openblas_get_corename();
}

// The kernel as OpenBLAS loaded it, then Optimus's decision carried out (blas_kernel.hpp).
BlasKernel choose_at_load() {
  const std::string config = blas().openblas_get_config(), version = version_of(config);
  const std::string loaded = blas().openblas_get_corename();
  const DynamicArch arch = dynamic_arch();
  BlasKernel k{.library = "OpenBLAS " + version, .kernel = loaded, .simd = openblas::simd_of(loaded),
               .chosen_by = "", .config = config, .changeable = arch.available()};
  const Processor processor = this_processor();
  if (const char* user = std::getenv("OPENBLAS_CORETYPE")) {
    k.chosen_by = "OPENBLAS_CORETYPE=" + std::string(user) + " (set by the user" +
                  (openblas::simd_of(user) == SimdLevel::unknown && loaded != user
                       ? "; OpenBLAS does not know that name and chose " + loaded + ")"
                       : ")");
    const std::string better = openblas::core_for(processor, version);
    if (fit_of(k.simd, processor) == KernelFit::older && !better.empty()) {
      k.chosen_by += ", unset it for Optimus's choice, " + better;
    }
    return k;
  }
  const openblas::Decision decision = openblas::decide(loaded, processor, version);
  k.chosen_by = decision.why;
  if (decision.core.empty()) return k;
  if (!arch.available()) {
    k.chosen_by += "; this OpenBLAS cannot change kernels once loaded: start with OPENBLAS_CORETYPE=" + decision.core;
    return k;
  }
  if (!buffers_available(1)) {
    k.chosen_by += "; not replaced: the memory to check " + decision.core + " with is not available";
    return k;
  }
  const std::string now = load_core(arch, decision.core);
  const std::string wrong = check_gemm_products();
  if (now != decision.core || !wrong.empty()) {
    load_core(arch, loaded);
    k.chosen_by += "; kept: " + (now != decision.core
                                     ? "OpenBLAS has no " + decision.core + " kernel (it chose " + now + ")"
                                     : decision.core + " computed a wrong product here: " + wrong);
    return k;
  }
  k.kernel = now;
  k.simd = openblas::simd_of(now);
  return k;
}

// The kernel OpenBLAS runs when main() starts; never throws (before main nothing may).
BlasKernel initial_kernel() {
  try {
    return choose_at_load();
  } catch (const std::exception& e) {  // an allocation in the check, or OpenBLAS that cannot be opened
    BlasKernel k{.library = "OpenBLAS", .kernel = "unknown", .simd = SimdLevel::unknown,
                 .chosen_by = std::string("not judged: ") + e.what(), .config = "", .changeable = false};
    try {
      k.kernel = blas().openblas_get_corename();
      k.config = blas().openblas_get_config();
    } catch (...) {  // not opened: the first product says why, in main
    }
    return k;
  }
}

// The kernel in use: chosen once per process, changed only by use_blas_kernel (OpenBLAS's kernel is per process too).
struct KernelRecord {
  std::mutex mutex;
  BlasKernel kernel;
};

KernelRecord& record() {
  static KernelRecord r{.mutex = {}, .kernel = initial_kernel()};
  return r;
}

// Runs as the program loads, before main(), while the process has one thread, so that changing the environment for
// OpenBLAS (OPENBLAS_NUM_THREADS as blas() opens it, OPENBLAS_CORETYPE in load_core) races nothing.
[[gnu::constructor]] void choose_kernel_at_load() { record(); }

}  // namespace

BlasKernel blas_kernel() {
  KernelRecord& r = record();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return r.kernel;
}

BlasKernel use_blas_kernel(const std::string& kernel) {
  KernelRecord& r = record();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const DynamicArch arch = dynamic_arch();
  OPTIMUS_CHECK(arch.available(), "use_blas_kernel(", kernel, "): ", r.kernel.library,
                " cannot change its kernel in a running process (built for one target: ", r.kernel.kernel, ")");
  const Processor processor = this_processor();
  const SimdLevel simd = openblas::simd_of(kernel);
  OPTIMUS_CHECK(simd != SimdLevel::unknown, "use_blas_kernel: '", kernel, "' is not one of OpenBLAS's x86-64 kernels");
  OPTIMUS_CHECK(openblas::runs_on(kernel, processor), "use_blas_kernel(", kernel, "): its ", name_of(simd),
                " instructions do not run on this processor (", processor.describe(), ")");
  OPTIMUS_CHECK(buffers_available(1), "use_blas_kernel(", kernel, "): out of memory for OpenBLAS's working buffer (",
                kBufferBytes, " bytes)");
  const std::string before = r.kernel.kernel;
  const std::string now = load_core(arch, kernel);
  if (now != openblas::canonical_name(kernel)) {
    load_core(arch, before);
    OPTIMUS_FAIL("use_blas_kernel: ", r.kernel.library, " has no kernel '", kernel, "' for this processor (it chose ",
                 now, "); ", before, " stays");
  }
  const std::string wrong = check_gemm_products();
  if (!wrong.empty()) {
    load_core(arch, before);
    OPTIMUS_FAIL("use_blas_kernel: ", now, " computed a wrong product: ", wrong, "; ", before, " stays");
  }
  r.kernel.kernel = now;
  r.kernel.simd = simd;
  r.kernel.chosen_by = "use_blas_kernel(" + kernel + ")";
  r.kernel.config = blas().openblas_get_config();
  return r.kernel;
}

std::string gemm_backend() {
  return std::string(blas().openblas_get_config()) + " (" + std::to_string(blas().openblas_get_num_threads()) +
         " thread" + (blas().openblas_get_num_threads() == 1 ? ")" : "s)");
}

void prepare_gemm(int threads_at_once) {
  {
    // OpenBLAS's buffers are the process's: the most threads checked so far, for every rank thread of it.
    static std::mutex mu;
    static int checked = 0;
    std::lock_guard lock(mu);
    if (threads_at_once > checked) {
      OPTIMUS_CHECK(buffers_available(threads_at_once), "out of memory: OpenBLAS needs a working buffer of about ",
                    kBufferBytes, " bytes for each of the ", threads_at_once, " threads that multiply at once (",
                    threads_at_once, " x ", kBufferBytes, " bytes) and malloc could not provide them (an "
                    "address-space limit, ulimit -v?)");
      checked = threads_at_once;
    }
  }
  if (held_buffer() != nullptr) return;
  if (blas().blas_memory_alloc != nullptr && blas().blas_memory_free != nullptr) {
    held_buffer() = blas().blas_memory_alloc(0);  // malloc could give it just now: this does not wait
    return;
  }
  // A library without the pool's functions: a product large enough to take a buffer (smaller ones may use OpenBLAS's
  // small-matrix kernels instead), which OpenBLAS keeps.
  constexpr int n = 256;
  const std::vector<double> a(static_cast<std::size_t>(n) * n, 1.0);
  std::vector<double> c(static_cast<std::size_t>(n) * n, 0.0);
  blas().cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(),
                     n);
}

void release_gemm_buffer() {
  if (held_buffer() == nullptr) return;
  blas().blas_memory_free(std::exchange(held_buffer(), nullptr));
}

void set_gemm_threads(int threads) {
  OPTIMUS_CHECK(threads >= 1, "set_gemm_threads needs at least one thread, got ", threads);
  blas().openblas_set_num_threads(threads);
}

}  // namespace optimus::cpu
