// For bad-input tests: the message of the optimus::Error that fn throws ("" if none), checked (with doctest) to
// be the same on every rank of `comm`.
#pragma once

#include <functional>
#include <string>

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

// The message of the optimus::Error that fn throws; "accepted" if it throws none.
std::string error_of(const std::function<void()>& fn);

std::string error_on_every_rank(Communicator& comm, const std::function<void()>& fn);

}  // namespace optimus::test
