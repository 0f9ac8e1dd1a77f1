// CachingAllocator: size-class free lists over a raw allocator.
#include "optimus/core/caching_allocator.hpp"

#include <algorithm>
#include <iostream>

#include "optimus/core/error.hpp"

namespace optimus {

CachingAllocator::CachingAllocator(Raw raw, std::string what) : raw_(std::move(raw)), what_(std::move(what)) {}

CachingAllocator::~CachingAllocator() {
  if (!in_use_.empty()) {
    std::cerr << "optimus: " << what_ << " allocator destroyed with " << in_use_.size() << " blocks ("
              << stats_.bytes_in_use << " bytes) still in use\n";
  }
  empty_cache();
}

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t kSmall = 512, kLarge = 2u << 20, kSmallLimit = 1u << 20;
  const std::size_t unit = bytes <= kSmallLimit ? kSmall : kLarge;
  return std::max<std::size_t>(unit, (bytes + unit - 1) / unit * unit);
}

void* CachingAllocator::allocate(std::size_t bytes) {
  ++stats_.requests;
  const std::size_t size = size_class(bytes);
  void* p = nullptr;
  auto cached = free_.find(size);
  if (cached != free_.end() && !cached->second.empty()) {
    p = cached->second.back();
    cached->second.pop_back();
    stats_.bytes_cached -= size;
  } else {
    p = raw_.allocate(size);
    if (p == nullptr) {  // give the cache back and try once more
      empty_cache();
      p = raw_.allocate(size);
    }
    OPTIMUS_CHECK(p != nullptr, what_, " out of memory: requested ", bytes, " bytes (", size, " with rounding); ",
                  raw_.describe_free ? raw_.describe_free() : std::string("free memory unknown"), "; Optimus holds ",
                  stats_.bytes_in_use, " bytes in use");
    ++stats_.raw_allocations;
  }
  in_use_[p] = size;
  stats_.bytes_in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.bytes_in_use);
  return p;
}

std::size_t CachingAllocator::release(void* p) noexcept {
  if (p == nullptr) return 0;
  auto it = in_use_.find(p);
  if (it == in_use_.end()) {
    std::cerr << "optimus: " << what_ << " allocator asked to release an unknown block\n";
    return 0;
  }
  const std::size_t size = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
  free_[size].push_back(p);
  return size;
}

void CachingAllocator::empty_cache() noexcept {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      raw_.release(p);
      ++stats_.raw_releases;
      stats_.bytes_cached -= size;
    }
    blocks.clear();
  }
}

}  // namespace optimus
