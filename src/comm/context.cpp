// Context's parts common to every build: the text of a reported error (context_mpi.cpp and context_self.cpp report).
#include <cstdlib>
#include <string_view>

#include "optimus/comm/context.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

bool Context::debug_from_environment() {
  const char* debug = std::getenv("OPTIMUS_DEBUG");
  return debug != nullptr && *debug != '\0' && std::string_view(debug) != "0";
}

std::string Context::text_of(const std::exception& error) const {
  const auto* ours = dynamic_cast<const Error*>(&error);
  if (ours == nullptr || !debug_) return error.what();
  return detail::concat(ours->message(), " [", ours->file(), ":", ours->line(), "]");
}

}  // namespace optimus
