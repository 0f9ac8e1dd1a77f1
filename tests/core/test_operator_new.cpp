// The programs' operator new (programs/operator_new.cpp): a refused request throws optimus::OutOfMemory naming its
// bytes; nothrow new still returns null; the new-handler loop still runs. Linked like the programs; not built under
// the sanitizers, whose own operator new stays there.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "optimus/core/out_of_memory.hpp"

namespace {

// 2^60 bytes: more than any machine's address space (x86-64 and AArch64 map at most 2^57), so malloc refuses it at
// once. Read through a volatile so that the compiler cannot see the size (and warn of it) at compile time.
std::size_t too_many_bytes() {
  volatile std::size_t bytes = std::size_t{1} << 60;
  return bytes;
}

bool names(const std::bad_alloc& e, std::size_t bytes) {
  return std::string(e.what()).find("a request for " + std::to_string(bytes) + " bytes") != std::string::npos;
}

int handler_calls = 0;
void give_up_after_one_call() {
  ++handler_calls;
  std::set_new_handler(nullptr);
}

struct alignas(256) Aligned {
  unsigned char bytes[256];
};

}  // namespace

TEST_CASE("a refused std::vector request throws a std::bad_alloc that names its bytes") {
  std::vector<unsigned char> v;
  const std::size_t bytes = too_many_bytes();
  try {
    v.resize(bytes);
    FAIL("a request for 2^60 bytes succeeded");
  } catch (const std::bad_alloc& e) {
    CHECK(names(e, bytes));
    CHECK(std::string(e.what()).rfind("out of memory: ", 0) == 0);
    const auto* named = dynamic_cast<const optimus::OutOfMemory*>(&e);
    REQUIRE(named != nullptr);
    CHECK(named->bytes() == bytes);
  }
}

TEST_CASE("over-aligned and array requests are named too; nothrow new returns null") {
  const std::size_t count = too_many_bytes() / sizeof(Aligned);
  try {
    Aligned* volatile p = new Aligned[count];  // volatile: the compiler may not elide the pair new/delete
    delete[] p;
    FAIL("an over-aligned request for 2^60 bytes succeeded");
  } catch (const std::bad_alloc& e) {
    CHECK(names(e, count * sizeof(Aligned)));
  }
  CHECK(new (std::nothrow) unsigned char[too_many_bytes()] == nullptr);
  // Ordinary requests still work and keep their alignment.
  Aligned* volatile small = new Aligned[3];
  CHECK(reinterpret_cast<std::uintptr_t>(static_cast<Aligned*>(small)) % alignof(Aligned) == 0);
  delete[] small;
}

TEST_CASE("the new-handler is asked before the request is refused") {
  handler_calls = 0;
  std::set_new_handler(give_up_after_one_call);
  CHECK_THROWS_AS(static_cast<void>(::operator new(too_many_bytes())), optimus::OutOfMemory);
  CHECK(handler_calls == 1);
  CHECK((std::get_new_handler() == nullptr));
}
