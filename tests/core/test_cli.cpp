// Command-line options against a table: values, defaults, lists, flags, and errors that name the option and value.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optimus/programs/cli.hpp"
#include "optimus/core/error.hpp"

namespace {

namespace cli = optimus::cli;

std::vector<cli::Spec> table() {
  return {cli::integers("n", 1, 4096, "sizes"),
          cli::integer("steps", 1, 1000, "steps"),
          cli::positive_real("lr", 10, "learning rate"),
          cli::real("dropout", 0, 0.99, "dropout"),
          cli::choice("gemm", {"f32", "bf16"}, "math"),
          cli::choices("ops", {"ab", "abt", "atb"}, "products"),
          cli::text("name", "a name"),
          cli::bytes("memory", "capacity"),
          cli::output_file("json", "output"),
          cli::output_directory("save", "checkpoints"),
          cli::input_files("data", "inputs"),
          cli::flag("skip", "a flag")};
}

cli::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli::Options(static_cast<int>(argv.size()), argv.data(), 1, table());
}

// The message of the optimus::Error that parsing `args` (then `read`, if given) throws; "" if none.
std::string refusal(std::vector<std::string> args,
                    const std::function<void(const cli::Options&)>& read = [](const cli::Options&) {}) {
  try {
    read(parse(std::move(args)));
  } catch (const optimus::Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("options parse integers, numbers, choices, lists and flags, with the program's defaults") {
  const auto o = parse({"--n", "64,128", "--lr", "3e-3", "--ops", "ab,atb", "--skip", "--memory", "1.5KiB"});
  CHECK(o.integers("n", "1") == std::vector<std::int64_t>{64, 128});
  CHECK(o.real("lr", 1.0) == doctest::Approx(3e-3));
  CHECK(o.list("ops", "ab,abt") == std::vector<std::string>{"ab", "atb"});
  CHECK(o.integer("steps", 7) == 7);  // not given: the fallback
  CHECK(o.has("skip"));
  CHECK_FALSE(o.has("gemm"));
  CHECK(o.bytes("memory", 0) == 1536);
}

TEST_CASE("every bad value is refused when the options are parsed, naming the option and the value") {
  CHECK(refusal({"--steps", "0"}) == "option --steps: 0 is out of range [1, 1000]");
  CHECK(refusal({"--steps", "-1"}) == "option --steps: -1 is out of range [1, 1000]");
  CHECK(refusal({"--steps", "4294967297"}) == "option --steps: 4294967297 is out of range [1, 1000]");  // not 1
  CHECK(refusal({"--steps", "99999999999999999999"}) ==
        "option --steps: 99999999999999999999 is out of range [1, 1000]");  // beyond 64 bits: not wrapped
  CHECK(refusal({"--steps", "1e3"}) == "option --steps needs an integer, got '1e3'");
  CHECK(refusal({"--steps", " 5"}) == "option --steps needs an integer, got ' 5'");
  CHECK(refusal({"--steps", "nan"}) == "option --steps needs an integer, got 'nan'");
  CHECK(refusal({"--n", "64,,128"}) == "option --n needs a comma-separated list without empty items, got '64,,128'");
  CHECK(refusal({"--n", "64,"}) == "option --n needs a comma-separated list without empty items, got '64,'");
  CHECK(refusal({"--n", ",64"}) == "option --n needs a comma-separated list without empty items, got ',64'");
  CHECK(refusal({"--data", "/etc/passwd,"}) ==
        "option --data needs a comma-separated list without empty items, got '/etc/passwd,'");
  CHECK(refusal({"--n", "64,0"}) == "option --n: 0 is out of range [1, 4096]");
  CHECK(refusal({"--lr", "nan"}) == "option --lr needs a finite number, got 'nan'");
  CHECK(refusal({"--lr", "inf"}) == "option --lr needs a finite number, got 'inf'");
  CHECK(refusal({"--lr", "-inf"}) == "option --lr needs a finite number, got '-inf'");
  CHECK(refusal({"--lr", "1e999"}) == "option --lr needs a finite number, got '1e999'");
  CHECK(refusal({"--lr", "0"}) == "option --lr: 0 is out of range (0, 10]");
  CHECK(refusal({"--lr", "fast"}) == "option --lr needs a finite number, got 'fast'");
  CHECK(refusal({"--dropout", "1"}) == "option --dropout: 1 is out of range [0, 0.99]");
  CHECK(refusal({"--dropout", "0"}).empty());
  CHECK(refusal({"--gemm", "fp8"}) == "option --gemm: 'fp8' is not one of f32, bf16");
  CHECK(refusal({"--ops", "ab,ba"}) == "option --ops: 'ba' is not one of ab, abt, atb");
  CHECK(refusal({"--name", ""}) == "option --name needs a non-empty value");
  CHECK(refusal({"--memory", "0MiB"}) == "option --memory needs a positive size, got '0MiB'");
  CHECK(refusal({"--memory", "12"}).find("option --memory needs a size with a unit") == 0);
  // A decimal exponent is a number (it was taken for the unit), and a size past 2^64 is named as such (it was "needs a
  // positive size").
  CHECK(refusal({"--memory", "1e3MiB"}).empty());
  CHECK(refusal({"--memory", "1.5e-1KiB"}).empty());
  CHECK(refusal({"--memory", "99999999999TiB"}) ==
        "option --memory '99999999999TiB' is 1.09951e+23 bytes, more than any machine's 2^64");
  CHECK(refusal({"--memory", "0x10MiB"}).find("option --memory needs a size with a unit") == 0);
  CHECK(refusal({"--memory", "-1MiB"}) == "option --memory needs a size such as 512MiB, got '-1MiB'");
  CHECK(refusal({"--memory", "1eGiB"}).find("option --memory needs a size with a unit") == 0);
  CHECK(refusal({"--memory", "MiB"}) == "option --memory needs a size such as 512MiB, got 'MiB'");
  CHECK(refusal({"--json", "/nonexistent/x.json"}) ==
        "option --json: the directory '/nonexistent' of '/nonexistent/x.json' does not exist");
  CHECK(refusal({"--json", "/tmp"}) == "option --json: '/tmp' is a directory: only a regular file (or a new one) is "
                                        "replaced");
  CHECK(refusal({"--json", "/dev/null"}) == "option --json: '/dev/null' is a character device: only a regular file "
                                            "(or a new one) is replaced");
  CHECK(refusal({"--data", "/etc/passwd", "--json", "/etc/passwd"}) ==
        "option --json '/etc/passwd' is --data's input '/etc/passwd': an output never replaces an input");
  CHECK(refusal({"--json", "out.json"}).empty());
  CHECK(refusal({"--save", "/nonexistent/runs"}) ==
        "option --save: the directory '/nonexistent' of '/nonexistent/runs' does not exist");
  CHECK(refusal({"--save", "/tmp"}).empty());  // an existing directory is fine
  // A new directory written with a trailing separator is the directory (it was taken for its own parent: "the directory
  // 'newdir' of 'newdir/' does not exist").
  CHECK(refusal({"--save", "newdir/"}).empty());
  CHECK(refusal({"--save", "/tmp/newdir//"}).empty());
  CHECK(refusal({"--save", "/nonexistent/runs/"}) ==
        "option --save: the directory '/nonexistent' of '/nonexistent/runs/' does not exist");
  CHECK(refusal({"--save", "/"}).empty());
  CHECK(refusal({"--data", "/nonexistent/a.bin"}) == "option --data: '/nonexistent/a.bin' does not exist");
  CHECK(refusal({"--data", "/etc/passwd,/nonexistent/b"}) == "option --data: '/nonexistent/b' does not exist");
  CHECK(refusal({"--data", "/tmp"}) == "option --data: '/tmp' is a directory, not a file to read");
  CHECK(refusal({"--steps", "5", "--steps", "6"}) == "option --steps is given twice");
  CHECK(refusal({"--steps"}) == "option --steps needs a value");
  CHECK(refusal({"steps", "1"}) == "expected an option starting with --, got 'steps'");
  CHECK(refusal({"--stepz", "1"}).find("unknown option '--stepz' (known: --n --steps --lr") == 0);
}

namespace {

// `args` parsed against `specs`, as "prog ARGS..." would be.
cli::Options parsed(const std::vector<cli::Spec>& specs, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli::Options(static_cast<int>(argv.size()), argv.data(), 1, specs);
}

}  // namespace

TEST_CASE("inputs: a file is one path, commas included; a directory; outputs are never inputs") {
  const std::vector<cli::Spec> specs{cli::input_file("text", "a text"), cli::input_directory("resume", "a run"),
                                     cli::output_file("export", "a model")};
  const auto parse_with = [&](std::vector<std::string> args) { return parsed(specs, std::move(args)); };
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "optimus_cli_sa,ve";
  std::filesystem::create_directories(dir);
  CHECK(parse_with({"--resume", dir.string()}).text("resume", "") == dir.string());
  CHECK_THROWS_WITH_AS(parse_with({"--text", dir.string()}),
                       doctest::Contains(("option --text: '" + dir.string() + "' is a directory, not a file to read")
                                             .c_str()),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(parse_with({"--resume", "/etc/passwd"}),
                       doctest::Contains("option --resume: '/etc/passwd' is not a directory"), optimus::Error);
  CHECK_THROWS_WITH_AS(parse_with({"--resume", dir.string(), "--export", (dir / "model.bin").string()}),
                       doctest::Contains(("option --export '" + (dir / "model.bin").string() +
                                          "' is inside --resume's input '" + dir.string() +
                                          "': an output never replaces an input")
                                             .c_str()),
                       optimus::Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an output never goes into a directory another option writes (a run's save directory)") {
  const std::vector<cli::Spec> specs{cli::output_directory("save", "the run's checkpoints"),
                                     cli::output_file("export", "a model")};
  const auto parse_with = [&](std::vector<std::string> args) { return parsed(specs, std::move(args)); };
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "optimus_cli_run";
  std::filesystem::create_directories(dir / "step_2");
  const std::string shard = (dir / "step_2" / "rank_00000.safetensors").string();
  CHECK_THROWS_WITH_AS(parse_with({"--save", dir.string(), "--export", shard}),
                       doctest::Contains(("option --export '" + shard + "' is inside --save's directory '" +
                                          dir.string() + "', which holds the run's checkpoints and its lock")
                                             .c_str()),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(parse_with({"--save", dir.string(), "--export", (dir / ".lock").string()}),
                       doctest::Contains("is inside --save's directory"), optimus::Error);
  CHECK_NOTHROW(parse_with({"--save", dir.string(), "--export", dir.string() + ".safetensors"}));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the watchdog is on by default at ten minutes; --timeout 0 turns it off") {
  const std::vector<cli::Spec> specs{cli::timeout_option()};
  const auto timeout = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return cli::Options(static_cast<int>(argv.size()), argv.data(), 1, specs).timeout();
  };
  CHECK(timeout({}) == std::chrono::minutes(10));
  CHECK(timeout({"--timeout", "0"}) == std::chrono::milliseconds(0));
  CHECK(timeout({"--timeout", "2.5"}) == std::chrono::milliseconds(2500));
  CHECK_THROWS_WITH_AS(timeout({"--timeout", "-1"}), doctest::Contains("option --timeout: -1 is out of range [0, 1e+06]"),
                       optimus::Error);
}

TEST_CASE("reading an option the table does not declare, or as another kind, is a programming error") {
  CHECK(refusal({}, [](const cli::Options& o) { o.integer("epochs", 1); }) ==
        "option --epochs is read but not declared in the program's option table");
  CHECK(refusal({}, [](const cli::Options& o) { o.real("steps", 1); }) ==
        "option --steps is declared as integer in [1, 1000], not read as a number");
  CHECK(refusal({}, [](const cli::Options& o) { o.integer("lr", 1); }) ==
        "option --lr is declared as number in (0, 10], not read as an integer");
}

TEST_CASE("--help lists every option of the table with what it takes, one per line") {
  std::string help;
  try {
    parse({"--steps", "3", "--help"});
  } catch (const cli::HelpRequested& h) {
    help = h.what();
  }
  for (const cli::Spec& s : table()) {
    CAPTURE(s.name);
    CHECK(help.find("\n  --" + s.name + "  (" + cli::describe(s) + ")  " + s.help) != std::string::npos);
  }
  CHECK(help.find("--steps  (integer in [1, 1000])  steps") != std::string::npos);
}
