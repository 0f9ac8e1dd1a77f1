// The programs' global operator new: std::malloc, as the standard library's, but a request the machine refuses
// throws optimus::OutOfMemory, which names its bytes (include/optimus/core/out_of_memory.hpp). Linked into
// train_gpt, optimus-plan, optimus-bench and summa_2x2 through the object library optimus::operator_new; never part
// of the library, since replacing operator new is the program's decision.
//
// Only the two allocating forms are replaced: libstdc++'s array, nothrow and sized forms call these. The deletes free
// with std::free, as libstdc++'s do; they are written here all the same, sized forms too, so that each pair is in one
// file. Under AddressSanitizer the sanitizer's own operator new stays: it checks new/delete pairing, which this would
// hide, and it reports a failed request itself.
#include <cstdint>
#include <cstdlib>
#include <new>

#include "optimus/core/out_of_memory.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define OPTIMUS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OPTIMUS_SANITIZED 1
#endif
#endif

#ifndef OPTIMUS_SANITIZED

namespace {

// `bytes` from the C library, aligned to `alignment` when that exceeds malloc's own; the new-handler loop of the
// standard ([new.delete.single]): a handler may free memory and ask for another try, or give up by removing itself.
void* allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes == 0) bytes = 1;
  for (;;) {
    void* p = nullptr;
    if (alignment <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      p = std::malloc(bytes);
    } else if (bytes <= SIZE_MAX - alignment) {
      p = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
    }
    if (p != nullptr) return p;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw optimus::OutOfMemory(bytes);
    handler();
  }
}

}  // namespace

void* operator new(std::size_t bytes) { return allocate(bytes, 0); }
void* operator new(std::size_t bytes, std::align_val_t alignment) {
  return allocate(bytes, static_cast<std::size_t>(alignment));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#endif
