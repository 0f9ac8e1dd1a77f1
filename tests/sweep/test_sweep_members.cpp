// A sweep's members checked with train_gpt's option table (apps/sweep_members.hpp): a member's options read as
// train_gpt reads them, and each way a sweep's members can be wrong refused with one error naming the member.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/sweep/sweep_file.hpp"
#include "sweep_members.hpp"

namespace ex = optimus::apps;
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

// check_members' error for `members` of the sweep file `file` with --record `record`, or "" when they pass.
std::string error_of(const std::vector<sw::MemberOptions>& members, const std::string& file = "s.json",
                     const std::optional<std::string>& record = std::nullopt) {
  try {
    ex::check_members(members, file, record);
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
      "s.json", std::nullopt);
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
  const std::string one_run = ", a save directory: its checkpoints and lock are its run's alone";
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("out/../out/run"))}) ==
        "s.json: member 'a''s --save '" + save + "' is member 'b''s --save '" + s.at("out/../out/run") + "'" + one_run);
  fs::create_directory_symlink(s.dir / "out", s.dir / "link");
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("link/run"))}).find(
            "s.json: member 'a''s --save '" + save + "' is member 'b''s --save") == 0);
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + s.at("out/run2"))}).empty());
  // Two members exporting to one file, or one exporting into another's save directory.
  CHECK(error_of({member("a", "--export " + s.at("out/m.bin")), member("b", "--export " + s.at("link/m.bin"))}) ==
        "s.json: member 'a''s --export '" + s.at("out/m.bin") + "' is member 'b''s --export '" + s.at("link/m.bin") +
            "': each output has one writer");
  fs::create_directories(save);
  // ... or one inside the other's.
  CHECK(error_of({member("a", "--save " + save), member("b", "--save " + save + "/b")}) ==
        "s.json: member 'b''s --save '" + save + "/b' lies inside member 'a''s --save '" + save + "'" + one_run);
  CHECK(error_of({member("a", "--save " + save), member("b", "--export " + save + "/m.bin")}) ==
        "s.json: member 'b''s --export '" + save + "/m.bin' lies inside member 'a''s --save '" + save + "'" + one_run);
  CHECK(error_of({member("a", "--save " + save + " --export " + save + "/m.bin")}).find(
            "s.json: member 'a': option --export '" + save + "/m.bin' is inside --save's directory") == 0);
}

TEST_CASE("sweep members: no output of a sweep over an input, nor inside a save directory, one writer each") {
  const Scratch s;
  const std::string text = s.at("text.txt"), tokens = s.at("tokens.bin"), model = s.at("model.bin");
  const std::string file = s.at("s.json"), save = s.at("out/run");
  for (const std::string& path : {text, tokens, model, file}) std::ofstream(path) << "x";
  fs::create_directories(save);
  const std::string never = "': an output never replaces an input";
  // A member's export onto another member's input (it was replaced after training).
  CHECK(error_of({member("a", "--text " + text), member("b", "--export " + text)}, file) ==
        file + ": member 'b''s --export '" + text + "' is member 'a''s --text '" + text + never);
  CHECK(error_of({member("a", "--data " + tokens + "," + tokens), member("b", "--export " + tokens)}, file) ==
        file + ": member 'b''s --export '" + tokens + "' is member 'a''s --data '" + tokens + never);
  CHECK(error_of({member("a", "--init " + model), member("b", "--export " + model)}, file) ==
        file + ": member 'b''s --export '" + model + "' is member 'a''s --init '" + model + never);
  // ... onto the sweep file.
  CHECK(error_of({member("a", "--export " + file)}, file) ==
        file + ": member 'a''s --export '" + file + "' is the sweep file '" + file + never);
  // --record onto the sweep file, a member's input, a member's export, or into a member's save directory.
  CHECK(error_of({member("a", "--steps 2")}, file, file) ==
        file + ": --record '" + file + "' is the sweep file '" + file + never);
  CHECK(error_of({member("a", "--text " + text)}, file, text) ==
        file + ": --record '" + text + "' is member 'a''s --text '" + text + never);
  CHECK(error_of({member("a", "--export " + s.at("out/a.bin"))}, file, s.at("out/a.bin")) ==
        file + ": --record '" + s.at("out/a.bin") + "' is member 'a''s --export '" + s.at("out/a.bin") +
            "': each output has one writer");
  CHECK(error_of({member("a", "--save " + save)}, file, save + "/record.json") ==
        file + ": --record '" + save + "/record.json' lies inside member 'a''s --save '" + save +
            "', a save directory: its checkpoints and lock are its run's alone");
  // A member reading from inside another's save directory (which that member's run writes and prunes); its own --save
  // holding the checkpoint it resumes is the run it continues.
  fs::create_directories(save + "/step_2");
  CHECK(error_of({member("a", "--save " + save), member("b", "--resume " + save + "/step_2")}, file) ==
        file + ": member 'b''s --resume '" + save + "/step_2' lies inside member 'a''s --save '" + save +
            "', a save directory: its checkpoints and lock are its run's alone");
  CHECK(error_of({member("a", "--save " + save + " --resume " + save)}, file).empty());
  CHECK(error_of({member("a", "--save " + save), member("b", "--export " + s.at("out/b.bin"))}, file,
                 s.at("out/record.json")).empty());
}
