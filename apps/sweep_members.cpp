// A sweep's members checked as train_gpt checks its options (sweep_members.hpp).
#include "sweep_members.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "program_options.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::apps {
namespace {

namespace fs = std::filesystem;

// A path a sweep reads or writes: whose (a member's index, or none for the sweep's own) and as what.
struct Place {
  std::string given;                // as written
  std::optional<std::size_t> member;
  std::string who;                  // "member 'a''s --data", "the sweep file", "--record"
  bool directory = false;           // a save directory (its checkpoints and lock are its run's alone)
};

// Every path the members and the sweep read (inputs) and write (outputs), before any training: no output is or lies
// inside an input (a member's own save directory may be the checkpoint it resumes); no input of one member lies inside
// another's save directory; no output is or lies inside another (one writer each, nothing inside a save directory).
void check_paths(const std::vector<SweepMember>& members, const std::string& where,
                 const std::optional<std::string>& record) {
  std::vector<Place> inputs{{.given = where, .member = std::nullopt, .who = "the sweep file"}};
  std::vector<Place> outputs;
  if (record) outputs.push_back({.given = *record, .member = std::nullopt, .who = "--record"});
  for (std::size_t k = 0; k < members.size(); ++k) {
    const cli::Options& o = members[k].options;
    const std::string whose = "member '" + members[k].name + "''s --";
    for (const cli::Spec& spec : o.table()) {
      if (!o.has(spec.name)) continue;
      const bool input = spec.kind == cli::Kind::input_file || spec.kind == cli::Kind::input_directory ||
                         spec.kind == cli::Kind::input_path || spec.kind == cli::Kind::input_files;
      const bool output = spec.kind == cli::Kind::output_file || spec.kind == cli::Kind::output_directory;
      const std::vector<std::string> values = spec.kind == cli::Kind::input_files
                                                  ? o.list(spec.name, "")
                                                  : std::vector<std::string>{o.text(spec.name, "")};
      for (const std::string& value : values) {
        Place p{.given = value, .member = k, .who = whose + spec.name,
                .directory = spec.kind == cli::Kind::output_directory};
        if (input) inputs.push_back(std::move(p));
        if (output) outputs.push_back(std::move(p));
      }
    }
  }
  const auto own = [](const Place& a, const Place& b) { return a.member && a.member == b.member; };
  // "is " or "lies inside ", as path_within found `a` in `b` (one place by any spelling: links, "./", "run/").
  const auto in = [](const Place& a, const Place& b) { return path_within(a.given, b.given); };
  const auto how = [](const fs::path& rel) { return rel == "." ? "is " : "lies inside "; };
  for (const Place& o : outputs) {
    for (const Place& i : inputs) {
      // A member's own --resume inside its own --save: the run it continues.
      if (o.directory && own(o, i)) continue;
      const std::optional<fs::path> over = in(o, i);
      OPTIMUS_CHECK(!over, where, ": ", o.who, " '", o.given, "' ", over ? how(*over) : "", i.who, " '", i.given,
                    "': an output never replaces an input");
      OPTIMUS_CHECK(!o.directory || own(o, i) || !in(i, o), where, ": ", i.who, " '", i.given, "' lies inside ", o.who,
                    " '", o.given, "', a save directory: its checkpoints and lock are its run's alone");
    }
    for (const Place& p : outputs) {
      const std::optional<fs::path> over = &p == &o ? std::nullopt : in(o, p);
      OPTIMUS_CHECK(!over, where, ": ", o.who, " '", o.given, "' ", over ? how(*over) : "", p.who, " '", p.given, "'",
                    p.directory ? ", a save directory: its checkpoints and lock are its run's alone"
                                : ": each output has one writer");
    }
  }
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
      "gemm",       "dp"};
  return names;
}

std::vector<SweepMember> check_members(const std::vector<sweep::MemberOptions>& members, const std::string& where,
                                       const std::optional<std::string>& record) {
  std::vector<SweepMember> out;
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
    out.push_back(std::move(member));
  }
  check_paths(out, where, record);
  return out;
}

}  // namespace optimus::apps
