// A sweep's members checked as train_gpt checks its options (sweep_members.hpp).
#include "sweep_members.hpp"

#include <cstddef>
#include <filesystem>

#include "example_options.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::examples {
namespace {

namespace fs = std::filesystem;

// `path` absolute, with every symbolic link of the part that exists resolved: two spellings of one place compare equal.
// A trailing separator is dropped ("run/" is "run").
fs::path resolved(const std::string& path) {
  const fs::path p = fs::weakly_canonical(fs::absolute(path));
  return p.has_filename() ? p : p.parent_path();
}

}  // namespace

cli::Options member_options(const sweep::MemberOptions& m, const std::vector<std::string>& slot_words,
                            const std::string& where) {
  std::vector<std::string> args{"train_gpt"};
  args.insert(args.end(), m.words.begin(), m.words.end());
  args.insert(args.end(), slot_words.begin(), slot_words.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    return cli::Options(static_cast<int>(argv.size()), argv.data(), 1, train_gpt_options());
  } catch (const cli::HelpRequested&) {
    OPTIMUS_FAIL(where, ": member '", m.name, "': --help is not an option of a member");
  } catch (const Error& e) {
    OPTIMUS_FAIL(where, ": member '", m.name, "': ", e.what());
  }
}

const std::vector<std::string>& slot_owned_options() {
  static const std::vector<std::string> names = {
      "in-process", "device",   "device-memory", "device-bandwidth", "timeout", "q",       "layout", "p",
      "pp",         "schedule", "chunks",        "plan",             "calibration", "cores", "offload", "offload-update",
      "gemm"};
  return names;
}

std::vector<SweepMember> check_members(const std::vector<sweep::MemberOptions>& members, const std::string& where) {
  std::vector<SweepMember> out;
  struct Path {
    fs::path path;
    std::size_t member;
  };
  std::vector<Path> saves, exports;
  for (const sweep::MemberOptions& m : members) {
    SweepMember member{.name = m.name, .words = m.words, .options = member_options(m, {}, where)};
    for (const std::string& name : slot_owned_options()) {
      OPTIMUS_CHECK(!member.options.has(name), where, ": member '", m.name, "': --", name,
                    " is the sweep's to choose (an option of optimus-sweep: where the members' shards compute), "
                    "not a member's");
    }
    OPTIMUS_CHECK(!member.options.has("execution"), where, ": member '", m.name, "': --execution is train_gpt's: a "
                  "sweep's members run their schedules in order, the sweep choosing whichever member's operation is "
                  "ready");
    const std::size_t index = out.size();
    if (member.options.has("save")) saves.push_back({resolved(member.options.text("save", "")), index});
    if (member.options.has("export")) exports.push_back({resolved(member.options.text("export", "")), index});
    out.push_back(std::move(member));
  }
  const auto name = [&](std::size_t i) { return "'" + out[i].name + "'"; };
  for (std::size_t a = 0; a < saves.size(); ++a) {
    for (std::size_t b = a + 1; b < saves.size(); ++b) {
      OPTIMUS_CHECK(saves[a].path != saves[b].path, where, ": members ", name(saves[a].member), " and ",
                    name(saves[b].member), " both save into ", saves[a].path.string(),
                    " (a save directory belongs to one run)");
    }
  }
  for (std::size_t a = 0; a < exports.size(); ++a) {
    for (std::size_t b = a + 1; b < exports.size(); ++b) {
      OPTIMUS_CHECK(exports[a].path != exports[b].path, where, ": members ", name(exports[a].member), " and ",
                    name(exports[b].member), " both export to ", exports[a].path.string());
    }
    for (const Path& save : saves) {  // as train_gpt checks its own export against its own save directory
      check_not_within(exports[a].path, where + ": member " + name(exports[a].member) + ": --export", save.path,
                       "member " + name(save.member) + "'s --save");
    }
  }
  return out;
}

}  // namespace optimus::examples
