// A sweep file's members (optimus/sweep/sweep_file.hpp), read with nlohmann-json.
#include "optimus/sweep/sweep_file.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>
#include <string_view>
#include <string>
#include <optional>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"

namespace optimus::sweep {
namespace {

using nlohmann::json;

// A JSON text's first key given twice in one object (nlohmann-json keeps the last silently), found by a pass of its
// SAX parser (the text's syntax is the DOM parse's to report: an error here only ends the pass).
class DuplicateKeys : public nlohmann::json_sax<json> {
 public:
  std::optional<std::string> found;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (keys_.back().insert(key).second) return true;
    found = key;
    return false;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::vector<std::set<std::string>> keys_;  // the keys of each object being read, outermost first
};

// `text` for a message: each byte that does not print (a control character: NUL, an escape sequence, \v) as \xHH, so
// that a message never carries what a terminal would act on.
std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7f) {
      out += ch;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", byte);
    out += hex;
  }
  return out;
}

// The offset of the first control character of `text` (a byte below 0x20, or 0x7f) but whitespace (tab, newline,
// carriage return), or none.
std::optional<std::size_t> control_character(std::string_view text) {
  for (std::size_t k = 0; k < text.size(); ++k) {
    const auto byte = static_cast<unsigned char>(text[k]);
    if ((byte < 0x20 || byte == 0x7f) && byte != '\t' && byte != '\n' && byte != '\r') return k;
  }
  return std::nullopt;
}

// A byte of `text` as a message names it.
int byte_at(std::string_view text, std::size_t at) { return static_cast<unsigned char>(text[at]); }

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
                printable(out.name), "' holds whitespace (a name is one word: it names the member's lines and files)");
  const std::optional<std::size_t> control = control_character(out.name);
  OPTIMUS_CHECK(!control, where, ": ", label(index, ""), ": the name '", printable(out.name),
                "' holds a control character (byte ", control ? byte_at(out.name, *control) : 0, " at ",
                control.value_or(0), "): a name starts each of the member's lines, where a terminal would act on it; "
                "use printable characters");
  const std::string who = label(index, out.name);
  for (const auto& [key, value] : member.items()) {
    OPTIMUS_CHECK(key == "name" || key == "options", where, ": ", who, ": the unknown field \"", key,
                  "\" (a member has \"name\" and \"options\")");
  }
  const std::string options = string_field(member, "options", where, who);
  const std::optional<std::size_t> bad = control_character(options);
  OPTIMUS_CHECK(!bad, where, ": ", who, ": \"options\" holds a control character (byte ",
                bad ? byte_at(options, *bad) : 0, " at ", bad.value_or(0), " of '", printable(options),
                "'): options are words of printable characters");
  out.words = split_words(options, where + ": " + who);
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
  DuplicateKeys keys;
  json::sax_parse(text.begin(), text.end(), &keys);
  OPTIMUS_CHECK(!keys.found, where, ": the key \"", printable(keys.found.value_or("")), "\" is given twice in one "
                "object (JSON keeps one of them; say which you mean)");
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
