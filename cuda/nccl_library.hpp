// Internal to src/: NCCL, opened when a device communicator on a GPU first needs it instead of linked, so that a
// program maps libnccl only on a device path (a CPU run never does). Nccl holds every function of libnccl that
// nccl_collectives.cpp calls, under its C name and with the signature nccl.h declares. Compiled only where NCCL is
// (OPTIMUS_HAVE_NCCL).
#pragma once

#include <nccl.h>

#include <string>

#include "optimus/core/dynamic_library.hpp"

namespace optimus::detail {

struct Nccl {
  // Looks up every function below in `library`; throws optimus::Error naming the first one missing.
  explicit Nccl(DynamicLibrary library);

  DynamicLibrary library;
  decltype(&::ncclGetErrorString) ncclGetErrorString;
  decltype(&::ncclGetUniqueId) ncclGetUniqueId;
  decltype(&::ncclCommInitRank) ncclCommInitRank;
  decltype(&::ncclCommSplit) ncclCommSplit;
  decltype(&::ncclCommUserRank) ncclCommUserRank;
  decltype(&::ncclCommCount) ncclCommCount;
  decltype(&::ncclCommGetAsyncError) ncclCommGetAsyncError;
  decltype(&::ncclCommDestroy) ncclCommDestroy;
  decltype(&::ncclCommAbort) ncclCommAbort;
  decltype(&::ncclBroadcast) ncclBroadcast;
  decltype(&::ncclReduce) ncclReduce;
  decltype(&::ncclAllReduce) ncclAllReduce;
  decltype(&::ncclAllGather) ncclAllGather;
  decltype(&::ncclReduceScatter) ncclReduceScatter;
  decltype(&::ncclSend) ncclSend;
  decltype(&::ncclRecv) ncclRecv;
  decltype(&::ncclGroupStart) ncclGroupStart;
  decltype(&::ncclGroupEnd) ncclGroupEnd;
};

// The soname NCCL is opened by: libnccl.so.<NCCL_MAJOR of the nccl.h built with>.
std::string nccl_soname();

// NCCL, opened on the first call — by soname, then from the directory the build found it in — and kept open until
// the process ends (a loaded library is process-wide; never closing it keeps NCCL's threads' code mapped while objects
// are destroyed at exit). Thread-safe. Throws optimus::Error naming the library and why it did not load; a later call
// tries again.
const Nccl& nccl();

}  // namespace optimus::detail
