#include "optimus/comm/all_or_throw.hpp"

#include <cstdint>
#include <exception>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus {

std::optional<std::string> first_failure(Communicator& comm, const std::optional<std::string>& mine) {
  // The lowest failing rank, or size() where none failed (a double holds every rank index exactly).
  const double first =
      comm.all_reduce(static_cast<double>(mine ? comm.rank() : comm.size()), ReduceOp::min);
  if (first >= comm.size()) return std::nullopt;
  const int root = static_cast<int>(first);
  double length = mine ? static_cast<double>(mine->size()) : 0.0;
  comm.broadcast(&length, 1, DType::f64, root);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(length));
  if (comm.rank() == root) bytes.assign(mine->begin(), mine->end());
  if (!bytes.empty()) comm.broadcast(bytes.data(), bytes.size(), DType::u8, root);
  return std::string(bytes.begin(), bytes.end());
}

void DeferredFailure::attempt(const std::function<void()>& step) {
  if (!active_ || failure_) return;
  try {
    step();
  } catch (const Error& e) {
    failure_ = e.message();
  } catch (const std::exception& e) {
    failure_ = e.what();
  }
}

void DeferredFailure::agree(const std::vector<Communicator*>& comms) const {
  std::optional<std::string> failure = failure_;
  for (Communicator* comm : comms) failure = first_failure(*comm, failure);
  if (failure) OPTIMUS_FAIL(*failure);
}

void prepare_gemm_together(Communicator& comm) {
  const int threads_at_once = comm.backend().starts_with("in-process") ? comm.size() : 1;
  comm.barrier();
  // Each rank holds its buffer until the agreement (an all-reduce) shows every rank took one: then OpenBLAS's pool
  // holds one per rank thread.
  struct Release {
    ~Release() { cpu::release_gemm_buffer(); }
  } release;
  all_or_throw({&comm}, [threads_at_once] { cpu::prepare_gemm(threads_at_once); });
}

void all_or_throw(const std::vector<Communicator*>& comms, const std::function<void()>& work) {
  DeferredFailure outcome(true);
  outcome.attempt(work);
  outcome.agree(comms);
}

}  // namespace optimus
