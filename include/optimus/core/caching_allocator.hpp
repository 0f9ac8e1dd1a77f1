// A caching allocator over a raw allocator (cudaMalloc on the GPU): released blocks are kept on free lists
// by size class and handed out again, so a training step that repeats its allocations makes no raw
// allocation after its first run — stats() counts them, and tests and benchmarks assert it.
// Size classes: multiples of 512 B up to 1 MiB, then multiples of 2 MiB. Not thread-safe: one per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace optimus {

class CachingAllocator {
 public:
  struct Raw {
    std::function<void*(std::size_t)> allocate;  // nullptr when out of memory (never throws)
    std::function<void(void*)> release;
    std::function<std::string()> describe_free;  // e.g. "1.2 GiB free of 80 GiB", for the out-of-memory error
  };
  struct Stats {
    std::uint64_t requests = 0;
    std::uint64_t raw_allocations = 0;
    std::uint64_t raw_releases = 0;
    std::uint64_t bytes_in_use = 0;
    std::uint64_t bytes_cached = 0;  // held on free lists
    std::uint64_t peak_in_use = 0;
  };

  CachingAllocator(Raw raw, std::string what);
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();  // returns cached blocks; logs (never throws) if blocks are still in use

  // Throws optimus::Error naming the request, what is free and what the cache holds, when the raw allocator
  // fails even after the cache has been emptied.
  void* allocate(std::size_t bytes);
  // Returns the block's size class (0, with a message on stderr, for a pointer it did not hand out).
  std::size_t release(void* p) noexcept;
  void empty_cache() noexcept;

  const Stats& stats() const { return stats_; }
  static std::size_t size_class(std::size_t bytes);

 private:
  Raw raw_;
  std::string what_;
  Stats stats_;
  std::map<std::size_t, std::vector<void*>> free_;      // size class -> cached blocks
  std::unordered_map<void*, std::size_t> in_use_;       // block -> size class
};

}  // namespace optimus
