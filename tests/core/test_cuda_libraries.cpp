// The CUDA backend's libraries load only when a device path asks for them (core/dynamic_library.hpp): at the
// start of the process /proc/self/maps names no libcublasLt and no libnccl; once the loaders are asked, every function
// of their tables is resolved and the libraries are mapped; a library or function that does not exist throws
// optimus::Error naming it. Runs without a GPU: opening a library calls nothing in it. Built only with CUDA
// (tests/cuda_libraries.cmake); the NCCL half only where NCCL is (OPTIMUS_HAVE_NCCL).
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "optimus/core/dynamic_library.hpp"
#include "cuda/cublaslt_library.hpp"
#include "optimus/core/error.hpp"
#if OPTIMUS_HAVE_NCCL
#include "cuda/nccl_library.hpp"
#endif

namespace {

using optimus::detail::DynamicLibrary;

// Whether any mapping of this process is of a file whose path contains `library`.
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  const std::string text{std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>()};
  REQUIRE(!text.empty());
  return text.find(library) != std::string::npos;
}

// Whether a function of a table was looked up (doctest cannot print a function pointer; the failure names the member).
template <class F>
bool resolved(F function) {
  return function != nullptr;
}

// The message of the optimus::Error that `f` throws ("" if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const optimus::Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("cuBLASLt and NCCL are mapped only once a device path asks for them") {
  // Nothing before this case asks for them: the process loaded without them.
  CHECK_FALSE(mapped("libcublasLt"));
  CHECK_FALSE(mapped("libnccl"));
  CHECK_FALSE(mapped("libcublas.so"));

  const optimus::cuda::detail::CublasLt* lt = nullptr;
  REQUIRE_NOTHROW(lt = &optimus::cuda::detail::cublaslt());
  CHECK(lt == &optimus::cuda::detail::cublaslt());  // opened once
  CHECK(lt->library.name() == optimus::cuda::detail::cublaslt_soname());
  CHECK(resolved(lt->cublasLtGetStatusName));
  CHECK(resolved(lt->cublasLtGetStatusString));
  CHECK(resolved(lt->cublasLtCreate));
  CHECK(resolved(lt->cublasLtDestroy));
  CHECK(resolved(lt->cublasLtMatmulDescCreate));
  CHECK(resolved(lt->cublasLtMatmulDescDestroy));
  CHECK(resolved(lt->cublasLtMatmulDescSetAttribute));
  CHECK(resolved(lt->cublasLtMatrixLayoutCreate));
  CHECK(resolved(lt->cublasLtMatrixLayoutDestroy));
  CHECK(resolved(lt->cublasLtMatrixLayoutSetAttribute));
  CHECK(resolved(lt->cublasLtMatmulPreferenceCreate));
  CHECK(resolved(lt->cublasLtMatmulPreferenceDestroy));
  CHECK(resolved(lt->cublasLtMatmulPreferenceSetAttribute));
  CHECK(resolved(lt->cublasLtMatmulAlgoGetHeuristic));
  CHECK(resolved(lt->cublasLtMatmul));
  CHECK(mapped("libcublasLt"));
  CHECK_FALSE(mapped("libcublas.so"));  // the status texts come from libcublasLt
  // cuBLASLt's status text, as OPTIMUS_CHECK_CUBLAS prints it; a host-only call.
  CHECK(std::string(lt->cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");

#if OPTIMUS_HAVE_NCCL
  const optimus::detail::Nccl* nccl = nullptr;
  REQUIRE_NOTHROW(nccl = &optimus::detail::nccl());
  CHECK(nccl == &optimus::detail::nccl());
  CHECK(nccl->library.name() == optimus::detail::nccl_soname());
  CHECK(resolved(nccl->ncclGetErrorString));
  CHECK(resolved(nccl->ncclGetUniqueId));
  CHECK(resolved(nccl->ncclCommInitRank));
  CHECK(resolved(nccl->ncclCommSplit));
  CHECK(resolved(nccl->ncclCommUserRank));
  CHECK(resolved(nccl->ncclCommCount));
  CHECK(resolved(nccl->ncclCommGetAsyncError));
  CHECK(resolved(nccl->ncclCommDestroy));
  CHECK(resolved(nccl->ncclCommAbort));
  CHECK(resolved(nccl->ncclBroadcast));
  CHECK(resolved(nccl->ncclReduce));
  CHECK(resolved(nccl->ncclAllReduce));
  CHECK(resolved(nccl->ncclAllGather));
  CHECK(resolved(nccl->ncclReduceScatter));
  CHECK(resolved(nccl->ncclSend));
  CHECK(resolved(nccl->ncclRecv));
  CHECK(resolved(nccl->ncclGroupStart));
  CHECK(resolved(nccl->ncclGroupEnd));
  CHECK(mapped("libnccl"));
  CHECK(std::string(nccl->ncclGetErrorString(ncclInvalidArgument)).find("invalid argument") == 0);  // host-only
#endif
}

TEST_CASE("a library or function that does not exist throws, naming it") {
  const std::string missing =
      error_of([] { DynamicLibrary({"liboptimus_no_such_library.so.7"}, "the test's purpose"); });
  INFO("message: ", missing);
  CHECK(missing.find("cannot load liboptimus_no_such_library.so.7") != std::string::npos);
  CHECK(missing.find("needed by the test's purpose") != std::string::npos);
  CHECK(missing.find("cannot open shared object file") != std::string::npos);  // dlerror's reason

  const std::string symbol = error_of([] {
    const DynamicLibrary libm({"libm.so.6"}, "the test's purpose");
    libm.function<double (*)(double)>("optimus_no_such_function");
  });
  INFO("message: ", symbol);
  CHECK(symbol.find("libm.so.6 has no function optimus_no_such_function") != std::string::npos);
  CHECK(symbol.find("the test's purpose") != std::string::npos);
}

TEST_CASE("the first candidate that loads is the one opened, and its functions are typed") {
  DynamicLibrary libm({"liboptimus_no_such_library.so.7", "libm.so.6"}, "the test's purpose");
  CHECK(libm.name() == "libm.so.6");
  const auto cosine = libm.function<double (*)(double)>("cos");
  CHECK(cosine(0.0) == 1.0);
  DynamicLibrary moved(std::move(libm));  // move-only: the handle goes with it
  CHECK(moved.name() == "libm.so.6");
  CHECK(moved.function<double (*)(double)>("cos")(0.0) == 1.0);
}
