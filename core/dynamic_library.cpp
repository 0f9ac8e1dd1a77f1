// A shared library opened at run time (dynamic_library.hpp): dlopen, dlsym and dlclose, with dlerror's reason in
// every error.
#include "optimus/core/dynamic_library.hpp"

#include <dlfcn.h>

#include <iostream>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus::detail {
namespace {

// dlerror's text for the last failure on this thread (dlerror's state is per thread), or `fallback` if it has none.
std::string last_dl_error(const char* fallback) {
  const char* reason = ::dlerror();
  return reason != nullptr ? reason : fallback;
}

}  // namespace

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& candidates, std::string needed_by)
    : needed_by_(std::move(needed_by)) {
  OPTIMUS_CHECK(!candidates.empty(), "DynamicLibrary for ", needed_by_, ": no library named");
  std::string reasons;
  for (const std::string& candidate : candidates) {
    handle_ = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      name_ = candidate;
      return;
    }
    reasons += concat(reasons.empty() ? "" : "; ", last_dl_error("dlopen failed"));
  }
  OPTIMUS_FAIL("cannot load ", candidates.front(), ", needed by ", needed_by_, ": ", reasons);
}

bool DynamicLibrary::loaded(const std::string& soname) {
  void* handle = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  ::dlclose(handle);  // the reference RTLD_NOLOAD took
  return true;
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      name_(std::move(other.name_)),
      needed_by_(std::move(other.needed_by_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    DynamicLibrary closing(std::move(*this));  // closes this one's library as it goes out of scope
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
    needed_by_ = std::move(other.needed_by_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ == nullptr) return;
  if (::dlclose(handle_) != 0) {
    std::cerr << "optimus: dlclose(" << name_ << ") failed: " << last_dl_error("no reason given") << '\n';
  }
}

void* DynamicLibrary::address(const char* symbol) const {
  OPTIMUS_CHECK(handle_ != nullptr, "looking up ", symbol, " in a DynamicLibrary moved from");
  ::dlerror();  // clear an earlier failure, so that the one read below is dlsym's
  void* found = ::dlsym(handle_, symbol);
  OPTIMUS_CHECK(found != nullptr, name_, " has no function ", symbol, " (needed by ", needed_by_,
                "): ", last_dl_error("dlsym returned null"));
  return found;
}

void* DynamicLibrary::address_if_any(const char* symbol) const {
  OPTIMUS_CHECK(handle_ != nullptr, "looking up ", symbol, " in a DynamicLibrary moved from");
  return ::dlsym(handle_, symbol);
}

}  // namespace optimus::detail
