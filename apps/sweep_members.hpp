// A sweep's members as optimus-sweep takes them (optimus/sweep/sweep_file.hpp reads the file): each member's words
// checked with train_gpt's own option table, so that a member trains what `train_gpt WORDS` trains, and what the
// members share checked across them, before any training. Every error is one line naming the member.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <optimus/optimus.hpp>

#include "optimus/programs/cli.hpp"

namespace optimus::apps {

// A member: its name, its words and its options, read with train_gpt's table.
struct SweepMember {
  std::string name;
  std::vector<std::string> words;
  cli::Options options;
};

// The options of train_gpt that describe where and how a run computes rather than what it trains — the GEMM math too,
// since a slot's device computes every member's in one —: the sweep's slots own them (optimus-sweep's own options),
// and a member that gives one is refused.
const std::vector<std::string>& slot_owned_options();

// A member's words and then `slot_words` (what the slots set: --q, --pp, ...) read with train_gpt's table; errors
// begin with `where` and the member.
cli::Options member_options(const sweep::MemberOptions& m, const std::vector<std::string>& slot_words,
                            const std::string& where);

// The members of the sweep file `where` (which errors name), each member's words checked as train_gpt checks its
// command line, and every path the sweep reads or writes checked against the others as train_gpt checks its own, before
// any training — the members' inputs (--data, --text, --init, --resume, --calibration) and the sweep file; their
// outputs (--export, --save) and the sweep's `record` (--record; none: not given) —, compared as absolute paths with
// every symbolic link resolved. optimus::Error, naming the member and the paths, where a member's options are not
// train_gpt's or give one of slot_owned_options(); where an output is or lies inside an input (but a member's own
// --save holding the checkpoint it resumes); where an input lies inside another member's save directory; and where an
// output is or lies inside another output (two members saving into one directory or exporting to one file, an export or
// the record inside a save directory, the record over an export).
std::vector<SweepMember> check_members(const std::vector<sweep::MemberOptions>& members, const std::string& where,
                                       const std::optional<std::string>& record);

}  // namespace optimus::apps
