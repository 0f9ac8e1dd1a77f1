// optimus::Error and OPTIMUS_CHECK: messages carry the values; the source location is kept beside them.
#include <doctest/doctest.h>

#include <string>

#include "optimus/core/error.hpp"

TEST_CASE("OPTIMUS_CHECK throws optimus::Error with the values, and the location beside them") {
  const int rows = 7;
  const int q = 3;
  try {
    OPTIMUS_CHECK(rows % q == 0, "rows = ", rows, " is not divisible by q = ", q);
    FAIL("OPTIMUS_CHECK did not throw");
  } catch (const optimus::Error& e) {
    CHECK(e.message() == "rows = 7 is not divisible by q = 3");
    CHECK(std::string(e.what()) == e.message());  // what a user reads: no source location
    CHECK(std::string(e.file()).find("test_error.cpp") != std::string::npos);
    CHECK(e.line() > 0);
  }
  CHECK_NOTHROW(OPTIMUS_CHECK(rows > q, "never"));
  CHECK_THROWS_AS(OPTIMUS_FAIL("always ", 1), optimus::Error);
}
