// optimus::Error: a runtime_error whose what() is the message; where it was raised is kept beside it.
#include "optimus/core/error.hpp"

namespace optimus {

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(message),
      message_(message),
      file_(file),
      line_(line) {}

namespace detail {

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(message, file, line);
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace detail
}  // namespace optimus
