// Command-line options: values, lists, and errors that name the option.
#include <doctest/doctest.h>

#include "optimus/core/cli.hpp"
#include "optimus/core/error.hpp"

namespace {
optimus::cli::Options parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return optimus::cli::Options(static_cast<int>(argv.size()), argv.data(), 1, {"n", "lr", "ops"});
}
}  // namespace

TEST_CASE("options parse integers, numbers and lists, with defaults") {
  const auto o = parse({"prog", "--n", "64,128", "--lr", "3e-3"});
  CHECK(o.integers("n", "1") == std::vector<std::int64_t>{64, 128});
  CHECK(o.real("lr", 1.0) == doctest::Approx(3e-3));
  CHECK(o.list("ops", "ab,abt") == std::vector<std::string>{"ab", "abt"});
  CHECK(o.integer("missing", 7) == 7);
  CHECK_FALSE(o.has("ops"));
}

TEST_CASE("bad options are errors naming them") {
  CHECK_THROWS_WITH_AS(parse({"prog", "--m", "1"}), doctest::Contains("unknown option '--m'"), optimus::Error);
  CHECK_THROWS_WITH_AS(parse({"prog", "--n"}), doctest::Contains("option --n needs a value"), optimus::Error);
  CHECK_THROWS_WITH_AS(parse({"prog", "n", "1"}), doctest::Contains("starting with --"), optimus::Error);
  CHECK_THROWS_WITH_AS(parse({"prog", "--n", "12x"}).integer("n", 0), doctest::Contains("needs an integer, got '12x'"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(parse({"prog", "--lr", "fast"}).real("lr", 0), doctest::Contains("needs a number"),
                       optimus::Error);
}
