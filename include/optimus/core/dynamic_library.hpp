// For the library's backends (core, the CUDA backend's loaders): a shared library opened at run time (dlopen) and its
// functions looked up by name (dlsym). Optimus opens this way the libraries that only a device path needs — cuBLASLt
// (cuda/cublaslt_library.hpp) and NCCL (cuda/nccl_library.hpp) — so that a program does not map them as it
// loads, and a CPU run never does; and OpenBLAS (core/gemm_openblas.cpp), so that the thread pool it starts as it
// loads is sized as Optimus asks.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace optimus::detail {

class DynamicLibrary {
 public:
  // Opens the first of `candidates` that loads, each a soname (looked for as the dynamic linker looks: LD_LIBRARY_PATH,
  // the ld.so cache, the default directories) or a path, with RTLD_NOW | RTLD_LOCAL. If none loads, throws
  // optimus::Error naming each candidate with dlerror's reason, and `needed_by` (what the library is for).
  DynamicLibrary(const std::vector<std::string>& candidates, std::string needed_by);
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  // Closes the library (dlclose); a failure is logged.
  ~DynamicLibrary();

  // The candidate that loaded.
  const std::string& name() const noexcept { return name_; }

  // Whether the process has already loaded a library of this soname (dlopen with RTLD_NOLOAD: nothing is loaded).
  static bool loaded(const std::string& soname);

  // The library's function `symbol` as a pointer of type F, which the caller takes from the library's header
  // (decltype(&cublasLtCreate)) so that the signature is the header's. Throws optimus::Error naming the symbol, the
  // library and what it is needed by if the library has no such symbol.
  template <class F>
  F function(const char* symbol) const {
    static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>,
                  "DynamicLibrary::function<F>: F is a pointer to a function");
    return reinterpret_cast<F>(address(symbol));
  }
  // The same for a function some builds of the library lack: null where it has none.
  template <class F>
  F function_if_any(const char* symbol) const {
    static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>,
                  "DynamicLibrary::function_if_any<F>: F is a pointer to a function");
    return reinterpret_cast<F>(address_if_any(symbol));
  }

 private:
  // dlsym's address of `symbol`; throws if there is none.
  void* address(const char* symbol) const;
  void* address_if_any(const char* symbol) const;  // null if there is none

  void* handle_ = nullptr;
  std::string name_;
  std::string needed_by_;
};

}  // namespace optimus::detail

// Sets `member` — a function pointer named like the library's function, in a table with a DynamicLibrary `library` —
// to that function, typed by the library's header. A macro: the name is both the symbol's text and the member's.
#define OPTIMUS_RESOLVE(member) member = library.function<decltype(&::member)>(#member)
