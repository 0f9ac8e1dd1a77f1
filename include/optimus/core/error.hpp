// optimus::Error and the check macros every module uses.
//
// OPTIMUS_CHECK(cond, parts...) throws optimus::Error with a message streamed from `parts` (so the values involved are
// printed, not just named) and the file and line that raised it. what() is the message alone — what a user reads;
// where it was raised is for developers (file(), line(); programs print it when OPTIMUS_DEBUG is set: Process::fail).
// Configuration errors are checked on values every rank shares, so every rank throws the same error.
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace optimus {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);

  // The message (what()'s text).
  const std::string& message() const noexcept { return message_; }
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

// What an exception held by `error` says (its what()); for one that is not a std::exception, a phrase saying so.
std::string message_of(const std::exception_ptr& error);

}  // namespace detail
}  // namespace optimus

// Throws optimus::Error built from the streamed parts when `cond` is false.
#define OPTIMUS_CHECK(cond, ...)                                                           \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      ::optimus::detail::throw_error(__FILE__, __LINE__, ::optimus::detail::concat(__VA_ARGS__)); \
    }                                                                                      \
  } while (0)

// Throws optimus::Error unconditionally.
#define OPTIMUS_FAIL(...) ::optimus::detail::throw_error(__FILE__, __LINE__, ::optimus::detail::concat(__VA_ARGS__))
