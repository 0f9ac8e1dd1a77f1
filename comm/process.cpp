// Process's parts common to every build: the text of a reported error (process_mpi.cpp and process_self.cpp report).
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "optimus/comm/process.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

int Process::launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const int n = std::atoi(value);
    if (n > 0) return n;
  }
  return 1;
}

bool Process::debug_from_environment() {
  const char* debug = std::getenv("OPTIMUS_DEBUG");
  return debug != nullptr && *debug != '\0' && std::string_view(debug) != "0";
}

std::string Process::text_of(const std::exception& error) const noexcept {
  try {
    const auto* ours = dynamic_cast<const Error*>(&error);
    if (ours == nullptr || !debug_) return error.what();
    return detail::concat(ours->message(), " [", ours->file(), ":", ours->line(), "]");
  } catch (...) {  // (out of memory for the text)
    return {};
  }
}

void Process::print_line(std::string_view program, int rank, const std::string& text) noexcept {
  const std::string_view shown = text.empty() ? std::string_view("(no memory left for the error's text)") : text;
  if (rank < 0) {
    std::fprintf(stderr, "%.*s: error: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(shown.size()), shown.data());
  } else {
    std::fprintf(stderr, "%.*s: error on rank %d: %.*s\n", static_cast<int>(program.size()), program.data(), rank,
                 static_cast<int>(shown.size()), shown.data());
  }
  std::fflush(stderr);
}

void Process::end_process_if_left_running(const std::exception& error) noexcept {
  if (dynamic_cast<const RanksLeftRunning*>(&error) == nullptr) return;
  std::fflush(nullptr);
  std::_Exit(1);  // no destructor: a rank thread left running still uses its caller's objects
}

}  // namespace optimus
