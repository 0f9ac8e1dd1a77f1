// A sweep file: the members of a sweep, each a name and the trainer's own options (train_gpt's), as JSON
// (nlohmann-json):
//
//   {"members": [{"name": "lr3e-4", "options": "--layers 4 --hidden 64 --lr 3e-4 --seed 2 --export out/lr3e-4.bin"},
//                {"name": "lr1e-4", "options": "--layers 4 --hidden 64 --lr 1e-4 --seed 2 --export out/lr1e-4.bin"}]}
//
// The options are split at whitespace into words, as a shell splits a line without quotes (a word that needs a
// space or a quote cannot be written: such a line is refused). What the options mean is the trainer's to check
// (optimus-sweep checks each member's with train_gpt's table): this reads the file's structure. Every error is one
// optimus::Error naming the file and, where there is one, the member (by name, or by its place when the name is what
// is wrong).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optimus::sweep {

// A member as the file writes it: its name (unique in the sweep, not empty, no whitespace) and its options' words.
struct MemberOptions {
  std::string name;
  std::vector<std::string> words;
};

// The members of the JSON text `text` (read from `where`, the name errors give), in file order. optimus::Error unless
// the text is JSON holding an object with exactly the field "members", a non-empty array of objects with exactly the
// fields "name" (a string) and "options" (a string of at least one word), with names that are unique.
std::vector<MemberOptions> parse_sweep(std::string_view text, const std::string& where);
// parse_sweep of the file at `path`; optimus::Error naming the path where it cannot be read.
std::vector<MemberOptions> read_sweep_file(const std::string& path);

// The words of `options` (split at spaces, tabs and newlines); where a word holds a quote (' or "), which this does
// not interpret, optimus::Error beginning with `who` (the member, as errors name it).
std::vector<std::string> split_words(std::string_view options, const std::string& who);

}  // namespace optimus::sweep
