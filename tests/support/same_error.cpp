// error_on_every_rank: catch, then compare a hash of the message across ranks.
#include "same_error.hpp"

#include <doctest/doctest.h>

#include "optimus/core/error.hpp"

namespace optimus::test {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "accepted";
}

std::string error_on_every_rank(Communicator& comm, const std::function<void()>& fn) {
  std::string message;
  try {
    fn();
  } catch (const Error& e) {
    message = e.message();
  }
  // Equal hashes on all ranks (max == min) means the same message everywhere.
  const double h = static_cast<double>(std::hash<std::string>{}(message) % (1ull << 52));
  CHECK(comm.all_reduce(h, ReduceOp::max) == comm.all_reduce(h, ReduceOp::min));
  return message;
}

}  // namespace optimus::test
