// Every option of every program (summa_2x2, train_gpt, each optimus-bench command) against a table of bad values:
// non-numeric, 0, -1, 2^32 + 1, NaN, inf and a value past the option's range. What the option's Spec says is valid
// is decided here independently of the parser; every invalid value must be refused when the options are parsed, with
// one line naming the option and the value, and every valid one accepted. (The CTests example_bad_* run the programs
// themselves: one line and a non-zero exit.)
#include <doctest/doctest.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "optimus/programs/cli.hpp"
#include "optimus/core/error.hpp"
#include "bench_options.hpp"
#include "program_options.hpp"

namespace {

namespace cli = optimus::cli;

struct Program {
  std::string name;
  std::vector<cli::Spec> table;
};

std::vector<Program> programs() {
  std::vector<Program> all = {{"summa_2x2", optimus::apps::summa_2x2_options()},
                              {"train_gpt", optimus::apps::train_gpt_options()},
                              {"optimus-plan", optimus::apps::optimus_plan_options()},
                              {"optimus-sweep", optimus::apps::optimus_sweep_options()}};
  for (const std::string& command : optimus::bench::commands()) {
    all.push_back({"optimus-bench " + command, optimus::bench::options_of(command)});
  }
  return all;
}

// A value past the spec's range (or otherwise not what it takes).
std::string past_range(const cli::Spec& s) {
  switch (s.kind) {
    case cli::Kind::integer:
    case cli::Kind::integers:
      return s.max == std::numeric_limits<std::int64_t>::max() ? "9223372036854775808" : std::to_string(s.max + 1);
    case cli::Kind::real:
    case cli::Kind::reals: return std::to_string(s.real_max * 2 + 1);
    case cli::Kind::choice:
    case cli::Kind::choices: return "none-of-these";
    case cli::Kind::text: return "";
    case cli::Kind::bytes: return "0B";
    case cli::Kind::output_file:
    case cli::Kind::output_directory:
    case cli::Kind::input_file:
    case cli::Kind::input_files:
    case cli::Kind::input_directory:
    case cli::Kind::input_path: return "/nonexistent/optimus/x";
    case cli::Kind::flag: return "";
  }
  return "";
}

// Whether `value` is what `s` takes, judged without the parser.
bool valid(const cli::Spec& s, const std::string& value) {
  namespace fs = std::filesystem;
  switch (s.kind) {
    case cli::Kind::integer:
    case cli::Kind::integers: {
      if (!std::regex_match(value, std::regex("-?[0-9]{1,18}"))) return false;  // 19+ digits: past any range here
      const long long v = std::stoll(value);
      return v >= s.min && v <= s.max;
    }
    case cli::Kind::real:
    case cli::Kind::reals: {  // (one item: the values tried have no comma)
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v)) return false;
      return (s.min_open ? v > s.real_min : v >= s.real_min) && v <= s.real_max;
    }
    case cli::Kind::choice:
    case cli::Kind::choices:
      for (const std::string& c : s.choices) {
        if (c == value) return true;
      }
      return false;
    case cli::Kind::text: return !value.empty();
    case cli::Kind::bytes: return false;  // none of the values tried has a unit
    case cli::Kind::output_file:
    case cli::Kind::output_directory:
      return !value.empty() && fs::path(value).parent_path().empty() && !fs::is_directory(value);
    case cli::Kind::input_file:
    case cli::Kind::input_files: return fs::is_regular_file(value);  // (one item: the values tried have no comma)
    case cli::Kind::input_directory: return fs::is_directory(value);
    case cli::Kind::input_path: return fs::is_regular_file(value) || fs::is_directory(value);
    case cli::Kind::flag: return true;
  }
  return false;
}

std::string refusal(const std::vector<cli::Spec>& table, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    cli::Options(static_cast<int>(argv.size()), argv.data(), 1, table);
  } catch (const optimus::Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("every option of every program refuses bad values with one line naming the option and the value") {
  int refused = 0, accepted = 0, options = 0;
  for (const Program& program : programs()) {
    CAPTURE(program.name);
    for (const cli::Spec& s : program.table) {
      CAPTURE(s.name);
      ++options;
      if (s.kind == cli::Kind::flag) {
        CHECK(refusal(program.table, {"--" + s.name}).empty());
        CHECK(refusal(program.table, {"--" + s.name, "--" + s.name}) == "option --" + s.name + " is given twice");
        continue;
      }
      for (const std::string& value : {std::string("abc"), std::string("0"), std::string("-1"),
                                       std::string("4294967297"), std::string("nan"), std::string("inf"),
                                       past_range(s)}) {
        CAPTURE(value);
        const std::string message = refusal(program.table, {"--" + s.name, value});
        if (valid(s, value)) {
          CHECK(message.empty());
          ++accepted;
          continue;
        }
        ++refused;
        CHECK(message.find("--" + s.name) != std::string::npos);
        CHECK(message.find(value) != std::string::npos);
        CHECK(message.find('\n') == std::string::npos);
      }
      CHECK(refusal(program.table, {"--" + s.name}) == "option --" + s.name + " needs a value");
    }
  }
  MESSAGE("options: " << options << ", values refused: " << refused << ", accepted (in range): " << accepted);
  CHECK(options > 100);
}
