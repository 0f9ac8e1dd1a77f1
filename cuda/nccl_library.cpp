// NCCL opened on first use (nccl_library.hpp). OPTIMUS_NCCL_LIBRARY_DIR is where CMake found libnccl
// (cuda/CMakeLists.txt); the soname's major version is nccl.h's NCCL_MAJOR.
#include "nccl_library.hpp"

#include <string>
#include <utility>

#include "optimus/core/error.hpp"

#ifndef OPTIMUS_NCCL_LIBRARY_DIR
#error "OPTIMUS_NCCL_LIBRARY_DIR (the directory libnccl was found in) is set by cuda/CMakeLists.txt"
#endif

namespace optimus::detail {
namespace {

DynamicLibrary open_nccl() {
  const std::string soname = nccl_soname();
  return DynamicLibrary({soname, std::string(OPTIMUS_NCCL_LIBRARY_DIR) + "/" + soname},
                        "device communicators on CUDA devices (NCCL)");
}

}  // namespace

Nccl::Nccl(DynamicLibrary lib) : library(std::move(lib)) {
  OPTIMUS_RESOLVE(ncclGetErrorString);
  OPTIMUS_RESOLVE(ncclGetUniqueId);
  OPTIMUS_RESOLVE(ncclCommInitRank);
  OPTIMUS_RESOLVE(ncclCommSplit);
  OPTIMUS_RESOLVE(ncclCommUserRank);
  OPTIMUS_RESOLVE(ncclCommCount);
  OPTIMUS_RESOLVE(ncclCommGetAsyncError);
  OPTIMUS_RESOLVE(ncclCommDestroy);
  OPTIMUS_RESOLVE(ncclCommAbort);
  OPTIMUS_RESOLVE(ncclBroadcast);
  OPTIMUS_RESOLVE(ncclReduce);
  OPTIMUS_RESOLVE(ncclAllReduce);
  OPTIMUS_RESOLVE(ncclAllGather);
  OPTIMUS_RESOLVE(ncclReduceScatter);
  OPTIMUS_RESOLVE(ncclSend);
  OPTIMUS_RESOLVE(ncclRecv);
  OPTIMUS_RESOLVE(ncclGroupStart);
  OPTIMUS_RESOLVE(ncclGroupEnd);
}

std::string nccl_soname() { return "libnccl.so." + std::to_string(NCCL_MAJOR); }

const Nccl& nccl() {
  // Built once, by the first caller (C++ serialises the initialisation; one that throws leaves it for the next), and
  // never destroyed.
  static const Nccl& table = *new Nccl(open_nccl());
  return table;
}

}  // namespace optimus::detail
