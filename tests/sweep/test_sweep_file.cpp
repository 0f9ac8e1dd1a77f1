// A sweep file's members (optimus/sweep/sweep_file.hpp): the words of each member's options in file order, and each
// way a file can be wrong refused with one error naming the file and the member.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/sweep/sweep_file.hpp"

namespace sw = optimus::sweep;

namespace {

using Words = std::vector<std::string>;

// parse_sweep's error for `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    sw::parse_sweep(text, "s.json");
  } catch (const optimus::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sweep file: members in file order, options split into words at any whitespace") {
  const auto members = sw::parse_sweep(R"({"members": [
      {"name": "lr3e-4", "options": "--layers 4  --lr 3e-4\t--seed 2\n--export out/a.bin "},
      {"options": "--steps 5", "name": "b"}]})",
                                       "s.json");
  REQUIRE(members.size() == 2);
  CHECK(members[0].name == "lr3e-4");
  CHECK(members[0].words == Words{"--layers", "4", "--lr", "3e-4", "--seed", "2", "--export", "out/a.bin"});
  CHECK(members[1].name == "b");
  CHECK(members[1].words == Words{"--steps", "5"});
  CHECK(sw::split_words("  --a 1  ", "member 'm'") == Words{"--a", "1"});
  CHECK(sw::split_words(" \t\n", "member 'm'").empty());
}

TEST_CASE("sweep file: read from disk, and a path that is not a readable file refused") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "optimus_test_sweep_file";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sweep.json").string();
  std::ofstream(path) << R"({"members": [{"name": "only", "options": "--steps 3"}]})";
  const auto members = sw::read_sweep_file(path);
  REQUIRE(members.size() == 1);
  CHECK(members[0].words == Words{"--steps", "3"});
  CHECK_THROWS_WITH_AS(sw::read_sweep_file((dir / "missing.json").string()),
                       doctest::Contains("missing.json' is not a file"), optimus::Error);
  CHECK_THROWS_WITH_AS(sw::read_sweep_file(dir.string()), doctest::Contains("is not a file"), optimus::Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("sweep file: every malformed file is one error naming the file and the member") {
  const std::string good = R"({"name": "a", "options": "--steps 1"})";
  CHECK(error_of(R"({"members": [)" + good + "]}").empty());
  // Not JSON, or not the sweep's shape.
  CHECK(error_of("{\"members\": [").find("s.json: not JSON (") == 0);
  CHECK(error_of("[]") == "s.json: a sweep file holds an object {\"members\": [...]}, not array");
  CHECK(error_of("{}") == "s.json: no \"members\"");
  CHECK(error_of(R"({"members": {}})") == "s.json: \"members\" must be an array, not object");
  CHECK(error_of(R"({"members": []})") == "s.json: \"members\" is empty: a sweep has at least one member");
  CHECK(error_of(R"({"members": [], "slots": 2})") ==
        "s.json: the unknown field \"slots\" (a sweep file has \"members\")");
  // A member: named by its place until its name is known, then by its name.
  CHECK(error_of(R"({"members": [)" + good + R"(, 7]})") ==
        "s.json: member 2: a member is an object {\"name\": ..., \"options\": ...}, not number");
  CHECK(error_of(R"({"members": [{"options": "--steps 1"}]})") == "s.json: member 1: no \"name\"");
  CHECK(error_of(R"({"members": [{"name": 3, "options": "--steps 1"}]})") ==
        "s.json: member 1: \"name\" must be a string, not number");
  CHECK(error_of(R"({"members": [{"name": "", "options": "--steps 1"}]})") == "s.json: member 1: \"name\" is empty");
  CHECK(error_of(R"({"members": [{"name": "a b", "options": "--steps 1"}]})") ==
        "s.json: member 1: the name 'a b' holds whitespace (a name is one word: it names the member's lines and files)");
  CHECK(error_of(R"({"members": [{"name": "lr1"}]})") == "s.json: member 'lr1': no \"options\"");
  CHECK(error_of(R"({"members": [{"name": "lr1", "options": ["--steps", "1"]}]})") ==
        "s.json: member 'lr1': \"options\" must be a string, not array");
  CHECK(error_of(R"({"members": [{"name": "lr1", "options": "  "}]})") ==
        "s.json: member 'lr1': \"options\" is empty (a member needs at least its steps)");
  CHECK(error_of(R"({"members": [{"name": "lr1", "options": "--steps 1", "seed": 2}]})") ==
        "s.json: member 'lr1': the unknown field \"seed\" (a member has \"name\" and \"options\")");
  CHECK(error_of(R"({"members": [{"name": "lr1", "options": "--text 'my file'"}]})") ==
        "s.json: member 'lr1': the option word ''my' holds a quote; a sweep file's options are split at whitespace and take "
        "no quotes");
  CHECK(error_of(R"({"members": [)" + good + ", " + good + "]}") ==
        "s.json: member 2 is named 'a' as an earlier one is (names are unique in a sweep)");
}

TEST_CASE("sweep file: no control character in a name or the options, no key given twice; messages print none") {
  // A name starts each of its member's lines: an escape sequence there (one that clears the terminal), a NUL or a
  // vertical tab was printed raw. The message shows each such byte as \xHH.
  CHECK(error_of(R"({"members": [{"name": "a\u001b[2J", "options": "--steps 1"}]})") ==
        "s.json: member 1: the name 'a\\x1b[2J' holds a control character (byte 27 at 1): a name starts each of the "
        "member's lines, where a terminal would act on it; use printable characters");
  CHECK(error_of(R"({"members": [{"name": "a\u0000b", "options": "--steps 1"}]})").find(
            "s.json: member 1: the name 'a\\x00b' holds a control character (byte 0 at 1)") == 0);
  CHECK(error_of(R"({"members": [{"name": "a\u000b", "options": "--steps 1"}]})").find(
            "the name 'a\\x0b' holds a control character (byte 11 at 1)") != std::string::npos);
  CHECK(error_of(R"({"members": [{"name": "a\tb", "options": "--steps 1"}]})") ==
        "s.json: member 1: the name 'a\\x09b' holds whitespace (a name is one word: it names the member's lines and "
        "files)");
  CHECK(error_of(R"({"members": [{"name": "a", "options": "--steps 1 --export x\u001b.bin"}]})") ==
        "s.json: member 'a': \"options\" holds a control character (byte 27 at 20 of '--steps 1 --export "
        "x\\x1b.bin'): options are words of printable characters");
  // A key given twice: JSON parsers keep the last one silently.
  CHECK(error_of(R"({"members": [{"name": "a", "options": "--steps 1", "options": "--steps 9"}]})") ==
        "s.json: the key \"options\" is given twice in one object (JSON keeps one of them; say which you mean)");
  CHECK(error_of(R"({"members": [], "members": [{"name": "a", "options": "--steps 1"}]})") ==
        "s.json: the key \"members\" is given twice in one object (JSON keeps one of them; say which you mean)");
  // The same key in two objects is no duplicate.
  CHECK(error_of(R"({"members": [{"name": "a", "options": "--steps 1"}, {"name": "b", "options": "--steps 1"}]})")
            .empty());
}
