// The caching allocator's policy, on a counting host allocator: reuse by size class, no raw allocation in a
// repeated steady state, and a clear out-of-memory error.
#include <doctest/doctest.h>

#include <cstdlib>

#include "optimus/core/caching_allocator.hpp"
#include "optimus/core/error.hpp"

namespace {
// A raw allocator with a byte budget, like a device with limited memory.
struct Budget {
  std::size_t left;
  std::map<void*, std::size_t> live;
  optimus::CachingAllocator::Raw raw() {
    return {[this](std::size_t n) -> void* {
              if (n > left) return nullptr;
              left -= n;
              void* p = std::malloc(n);
              live[p] = n;
              return p;
            },
            [this](void* p) {
              left += live.at(p);
              live.erase(p);
              std::free(p);
            },
            [this] { return std::to_string(left) + " bytes free"; }};
  }
};
}  // namespace

TEST_CASE("a repeated step makes no raw allocation after the first") {
  Budget budget{1u << 30, {}};
  optimus::CachingAllocator a(budget.raw(), "test device");
  const std::vector<std::size_t> step = {100, 4096, 3u << 20, 513, 100, 700000};
  for (int iteration = 0; iteration < 4; ++iteration) {
    std::vector<void*> blocks;
    for (std::size_t n : step) blocks.push_back(a.allocate(n));
    for (void* p : blocks) a.release(p);
    if (iteration == 0) CHECK(a.stats().raw_allocations == step.size());
  }
  CHECK(a.stats().raw_allocations == step.size());
  CHECK(a.stats().requests == 4 * step.size());
  CHECK(a.stats().bytes_in_use == 0);
  CHECK(optimus::CachingAllocator::size_class(100) == 512);
  CHECK(optimus::CachingAllocator::size_class(513) == 1024);
  CHECK(optimus::CachingAllocator::size_class((1u << 20) + 1) == (2u << 20));
  a.empty_cache();
  CHECK(budget.live.empty());
}

TEST_CASE("out of memory empties the cache, retries, then names the request and what is free") {
  Budget budget{4u << 20, {}};
  optimus::CachingAllocator a(budget.raw(), "test device");
  void* big = a.allocate(2u << 20);
  a.release(big);  // cached, still counted against the budget
  void* other = a.allocate(3u << 20);  // needs the cache emptied first
  CHECK(other != nullptr);
  CHECK(a.stats().raw_releases == 1);
  CHECK_THROWS_WITH_AS(a.allocate(2u << 20), doctest::Contains("test device out of memory: requested 2097152 bytes"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(a.allocate(2u << 20), doctest::Contains("bytes free"), optimus::Error);
  a.release(other);
}
