// A sweep file's members (optimus/sweep/sweep_file.hpp), read with nlohmann-json.
#include "optimus/sweep/sweep_file.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"

namespace optimus::sweep {
namespace {

using nlohmann::json;

// The member at `index` (from 0) as errors name it: by its name once it has a valid one.
std::string label(std::size_t index, const std::string& name) {
  return name.empty() ? "member " + std::to_string(index + 1) : "member '" + name + "'";
}

// A string field of member `index`; the member's label names it in errors.
std::string string_field(const json& member, const char* field, const std::string& where, const std::string& who) {
  const auto it = member.find(field);
  OPTIMUS_CHECK(it != member.end(), where, ": ", who, ": no \"", field, "\"");
  OPTIMUS_CHECK(it->is_string(), where, ": ", who, ": \"", field, "\" must be a string, not ", it->type_name());
  return it->get<std::string>();
}

MemberOptions member_of(const json& member, std::size_t index, const std::string& where) {
  OPTIMUS_CHECK(member.is_object(), where, ": ", label(index, ""),
                ": a member is an object {\"name\": ..., \"options\": ...}, not ", member.type_name());
  MemberOptions out;
  out.name = string_field(member, "name", where, label(index, ""));
  OPTIMUS_CHECK(!out.name.empty(), where, ": ", label(index, ""), ": \"name\" is empty");
  OPTIMUS_CHECK(out.name.find_first_of(" \t\n\r") == std::string::npos, where, ": ", label(index, ""), ": the name '",
                out.name, "' holds whitespace (a name is one word: it names the member's lines and files)");
  const std::string who = label(index, out.name);
  for (const auto& [key, value] : member.items()) {
    OPTIMUS_CHECK(key == "name" || key == "options", where, ": ", who, ": the unknown field \"", key,
                  "\" (a member has \"name\" and \"options\")");
  }
  out.words = split_words(string_field(member, "options", where, who), where + ": " + who);
  OPTIMUS_CHECK(!out.words.empty(), where, ": ", who, ": \"options\" is empty (a member needs at least its steps)");
  return out;
}

}  // namespace

std::vector<std::string> split_words(std::string_view options, const std::string& who) {
  std::vector<std::string> words;
  std::size_t at = 0;
  while (at < options.size()) {
    const std::size_t start = options.find_first_not_of(" \t\n\r", at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(options.find_first_of(" \t\n\r", start), options.size());
    const std::string_view word = options.substr(start, end - start);
    OPTIMUS_CHECK(word.find_first_of("'\"") == std::string_view::npos, who, ": the option word '",
                  word, "' holds a quote; a sweep file's options are split at whitespace and take no quotes");
    words.emplace_back(word);
    at = end;
  }
  return words;
}

std::vector<MemberOptions> parse_sweep(std::string_view text, const std::string& where) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    OPTIMUS_FAIL(where, ": not JSON (", e.what(), ")");
  }
  OPTIMUS_CHECK(root.is_object(), where, ": a sweep file holds an object {\"members\": [...]}, not ", root.type_name());
  for (const auto& [key, value] : root.items()) {
    OPTIMUS_CHECK(key == "members", where, ": the unknown field \"", key, "\" (a sweep file has \"members\")");
  }
  const auto members = root.find("members");
  OPTIMUS_CHECK(members != root.end(), where, ": no \"members\"");
  OPTIMUS_CHECK(members->is_array(), where, ": \"members\" must be an array, not ", members->type_name());
  OPTIMUS_CHECK(!members->empty(), where, ": \"members\" is empty: a sweep has at least one member");
  std::vector<MemberOptions> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < members->size(); ++i) {
    out.push_back(member_of((*members)[i], i, where));
    OPTIMUS_CHECK(names.insert(out.back().name).second, where, ": member ", i + 1, " is named '", out.back().name,
                  "' as an earlier one is (names are unique in a sweep)");
  }
  return out;
}

std::vector<MemberOptions> read_sweep_file(const std::string& path) {
  std::error_code error;
  OPTIMUS_CHECK(std::filesystem::is_regular_file(path, error), "the sweep file '", path, "' is not a file",
                error ? " (" + error.message() + ")" : std::string());
  std::ifstream in(path, std::ios::binary);
  OPTIMUS_CHECK(in.good(), "cannot read the sweep file '", path, "'");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  OPTIMUS_CHECK(!in.bad(), "cannot read the sweep file '", path, "'");
  return parse_sweep(text, path);
}

}  // namespace optimus::sweep
