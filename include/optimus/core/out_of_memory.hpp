// optimus::OutOfMemory: the std::bad_alloc that names the request which failed.
//
// A plain std::bad_alloc says "std::bad_alloc" and nothing else. Optimus's programs (train_gpt, optimus-plan,
// optimus-bench) replace the global operator new with one that throws this instead (programs/operator_new.cpp,
// the CMake object library optimus::operator_new), so an allocation anywhere — a std::vector, a string, a library's —
// that the machine refuses ends the program with one line naming the bytes asked for and the process's address-space
// limit. The library itself never replaces operator new: that is a program's decision.
//
// It is a std::bad_alloc (catch clauses for that still catch it), and what() allocates nothing: it is built when
// memory has run out.
#pragma once

#include <cstddef>
#include <new>

namespace optimus {

class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::size_t bytes) noexcept;

  std::size_t bytes() const noexcept { return bytes_; }
  const char* what() const noexcept override { return text_; }

 private:
  std::size_t bytes_;
  char text_[192];
};

}  // namespace optimus
