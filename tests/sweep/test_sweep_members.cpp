// A sweep's members checked with train_gpt's option table (examples/sweep_members.hpp): a member's options read as
// train_gpt reads them, and each way a sweep's members can be wrong refused with one error naming the member.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/sweep/sweep_file.hpp"
#include "sweep_members.hpp"

namespace ex = optimus::examples;
namespace sw = optimus::sweep;
namespace fs = std::filesystem;

namespace {

// A scratch directory, removed at the end of the test case.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / "optimus_test_sweep_members";
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir / "out");
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string at(const std::string& name) const { return (dir / name).string(); }
};

sw::MemberOptions member(const std::string& name, const std::string& options) {
  return {.name = name, .words = sw::split_words(options, "member '" + name + "'")};
}

// check_members' error for `members`, or "" when they pass.
std::string error_of(const std::vector<sw::MemberOptions>& members) {
  try {
    ex::check_members(members, "s.json");
  } catch (const optimus::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sweep members: each member's options as train_gpt reads them") {
  const Scratch s;
  const auto members = ex::check_members(
      {member("lr1", "--layers 4 --lr 1e-3 --seed 2 --save " + s.at("out/a")),
       member("lr2", "--layers 4 --lr 3e-4 --seed 2 --export " + s.at("out/b.bin"))},
      "s.json");
  REQUIRE(members.size() == 2);
  CHECK(members[0].name == "lr1");
  CHECK(members[0].options.integer("layers", 0) == 4);
  CHECK(members[0].options.real("lr", 0) == 1e-3);
  CHECK(members[1].options.real("lr", 0) == 3e-4);
  CHECK(members[1].options.text("export", "") == s.at("out/b.bin"));
  CHECK_FALSE(members[1].options.has("save"));
}

TEST_CASE("sweep members: train_gpt's checks and the sweep's, each one error naming the member") {
  const Scratch s;
  const std::string ok = "--steps 2";
  CHECK(error_of({member("a", ok)}).empty());
  // train_gpt's own checks, with the member named first.
  CHECK(error_of({member("a", ok), member("b", "--steps 0")}) ==
        "s.json: member 'b': option --steps: 0 is out of range [1, 100000000]");
  CHECK(error_of({member("a", "--stepz 3")}).find("s.json: member 'a': unknown option '--stepz'") == 0);
  CHECK(error_of({member("a", "--lr nan")}) == "s.json: member 'a': option --lr needs a finite number, got 'nan'");
  CHECK(error_of({member("a", "--help")}) == "s.json: member 'a': --help is not an option of a member");
  // Where the members compute is the sweep's.
  for (const std::string& name : ex::slot_owned_options()) {
    CAPTURE(name);
    const std::string value = name == "device" ? "sim" : name == "layout" ? "2d" : name == "plan" ? "auto"
                              : name == "schedule" ? "1f1b" : name == "offload" ? "spill"
                              : name == "offload-update" ? "host" : name == "device-memory" ? "1GiB"
                              : name == "gemm" ? "bf16"
                              : name == "calibration" ? s.at("out") : "1";
    const std::string error = error_of({member("m", "--" + name + " " + value)});
    // A value train_gpt refuses is reported as train_gpt reports it (--calibration names a directory here).
    if (name == "calibration") {
      CHECK(error.find("s.json: member 'm': option --calibration") == 0);
      continue;
    }
    CHECK(error == "s.json: member 'm': --" + name +
                       " is the sweep's to choose (an option of optimus-sweep: where the members' shards compute), "
                       "not a member's");
  }
  // A member's order of execution: its schedule's, the sweep being message-driven across members.
  CHECK(error_of({member("m", "--execution dynamic")}) ==
        "s.json: member 'm': --execution is train_gpt's: a sweep's members run their schedules in order, the sweep "
        "choosing whichever member's operation is ready");
  // Two members saving into one directory, however the path is spelled.
  const std::string save = s.at("out/run");
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("out/../out/run"))}) ==
        "s.json: members 'a' and 'b' both save into " + fs::weakly_canonical(save).string() +
            " (a save directory belongs to one run)");
  fs::create_directory_symlink(s.dir / "out", s.dir / "link");
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("link/run"))}).find(
            "s.json: members 'a' and 'b' both save into") == 0);
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("out/run2"))}).empty());
  // Two members exporting to one file, or one exporting into another's save directory.
  CHECK(error_of({member("a", "--export " + s.at("out/m.bin")), member("b", "--export " + s.at("link/m.bin"))}) ==
        "s.json: members 'a' and 'b' both export to " + fs::weakly_canonical(s.at("out/m.bin")).string());
  fs::create_directories(save);
  CHECK(error_of({member("a", "--save " + save), member("b", "--export " + save + "/m.bin")}) ==
        "s.json: member 'b': --export '" + fs::weakly_canonical(save + "/m.bin").string() + "' is inside member 'a''s "
            "--save's directory '" + fs::weakly_canonical(save).string() + "', which holds the run's checkpoints and "
            "its lock: write it elsewhere");
  CHECK(error_of({member("a", "--save " + save + " --export " + save + "/m.bin")}).find(
            "s.json: member 'a': option --export '" + save + "/m.bin' is inside --save's directory") == 0);
}
