// Parsing of `--name value` command-line options against a program's table of Specs.
#include "optimus/programs/cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::cli {
namespace {

// "a,b" -> {a, b}; every comma separates two items, so "a," and ",a" each hold an empty one (which lists refuse).
std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  if (!text.empty() && text.back() == ',') items.emplace_back();
  return items;
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// The whole of `text` as a decimal 64-bit integer; nullopt-like: ok false when it is not one. `overflow` is set where it
// is an integer too large for 64 bits.
bool parse_int64(const std::string& text, std::int64_t& value, bool& overflow) {
  overflow = false;
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size()) return false;
  if (errno == ERANGE) {
    overflow = true;
    return false;
  }
  value = v;
  return true;
}

std::int64_t checked_integer(const Spec& s, const std::string& text) {
  std::int64_t v = 0;
  bool overflow = false;
  if (!parse_int64(text, v, overflow)) {
    OPTIMUS_CHECK(!overflow, "option --", s.name, ": ", text, " is out of range [", s.min, ", ", s.max, "]");
    OPTIMUS_FAIL("option --", s.name, " needs an integer, got '", text, "'");
  }
  OPTIMUS_CHECK(v >= s.min && v <= s.max, "option --", s.name, ": ", text, " is out of range [", s.min, ", ", s.max,
                "]");
  return v;
}

std::string real_range(const Spec& s) {
  std::ostringstream out;
  out << (s.min_open ? "(" : "[") << s.real_min << ", " << s.real_max << "]";
  return out.str();
}

double checked_real(const Spec& s, const std::string& text) {
  char* end = nullptr;
  const double v = text.empty() || std::isspace(static_cast<unsigned char>(text[0])) ? 0.0
                                                                                       : std::strtod(text.c_str(), &end);
  OPTIMUS_CHECK(end == text.c_str() + text.size() && !text.empty() && std::isfinite(v), "option --", s.name,
                " needs a finite number, got '", text, "'");
  const bool above = s.min_open ? v > s.real_min : v >= s.real_min;
  OPTIMUS_CHECK(above && v <= s.real_max, "option --", s.name, ": ", text, " is out of range ", real_range(s));
  return v;
}

void check_choice(const Spec& s, const std::string& value) {
  OPTIMUS_CHECK(std::find(s.choices.begin(), s.choices.end(), value) != s.choices.end(), "option --", s.name, ": '",
                value, "' is not one of ", joined(s.choices, ", "));
}

std::vector<std::string> checked_list(const Spec& s, const std::string& text) {
  std::vector<std::string> items = split(text);
  OPTIMUS_CHECK(!items.empty() && std::none_of(items.begin(), items.end(), [](const auto& i) { return i.empty(); }),
                "option --", s.name, " needs a comma-separated list without empty items, got '", text, "'");
  return items;
}

// An input file: it exists and is a regular file (a FIFO would block the reader's open, a directory fail its read).
void check_input_file(const Spec& s, const std::string& path) {
  namespace fs = std::filesystem;
  OPTIMUS_CHECK(fs::exists(path), "option --", s.name, ": '", path, "' does not exist");
  const fs::file_status status = fs::status(path);
  OPTIMUS_CHECK(fs::is_regular_file(status), "option --", s.name, ": '", path, "' is ", kind_of(status),
                ", not a file to read");
}

// Throws the error naming the option unless `value` is what `s` takes.
void check_value(const Spec& s, const std::string& value) {
  namespace fs = std::filesystem;
  switch (s.kind) {
    case Kind::integer: checked_integer(s, value); return;
    case Kind::integers:
      for (const std::string& item : checked_list(s, value)) checked_integer(s, item);
      return;
    case Kind::real: checked_real(s, value); return;
    case Kind::reals:
      for (const std::string& item : checked_list(s, value)) checked_real(s, item);
      return;
    case Kind::choice: check_choice(s, value); return;
    case Kind::choices:
      for (const std::string& item : checked_list(s, value)) check_choice(s, item);
      return;
    case Kind::text: OPTIMUS_CHECK(!value.empty(), "option --", s.name, " needs a non-empty value"); return;
    case Kind::bytes: return;  // checked by bytes(), which the constructor calls
    case Kind::output_file: {
      OPTIMUS_CHECK(!value.empty(), "option --", s.name, " needs a file name");
      const fs::path parent = fs::path(value).parent_path();
      OPTIMUS_CHECK(parent.empty() || fs::is_directory(parent), "option --", s.name, ": the directory '",
                    parent.string(), "' of '", value, "' does not exist");
      check_replaceable(value, "option --" + s.name);
      return;
    }
    case Kind::output_directory: {
      OPTIMUS_CHECK(!value.empty(), "option --", s.name, " needs a directory name");
      fs::path dir = fs::path(value).lexically_normal();
      if (!dir.has_filename() && dir.has_relative_path()) dir = dir.parent_path();  // "run/": the directory "run"
      const fs::path parent = dir.parent_path();
      OPTIMUS_CHECK(parent.empty() || fs::is_directory(parent), "option --", s.name, ": the directory '",
                    parent.string(), "' of '", value, "' does not exist");
      OPTIMUS_CHECK(!fs::exists(value) || fs::is_directory(value), "option --", s.name, ": '", value,
                    "' is not a directory");
      return;
    }
    case Kind::flag: return;
    case Kind::input_file: check_input_file(s, value); return;
    case Kind::input_files:
      for (const std::string& item : checked_list(s, value)) check_input_file(s, item);
      return;
    case Kind::input_directory:
      OPTIMUS_CHECK(fs::exists(value), "option --", s.name, ": '", value, "' does not exist");
      OPTIMUS_CHECK(fs::is_directory(value), "option --", s.name, ": '", value, "' is not a directory");
      return;
    case Kind::input_path:
      if (fs::is_directory(value)) return;
      check_input_file(s, value);
      return;
  }
}

Spec numeric(std::string name, Kind kind, std::int64_t min, std::int64_t max, std::string help) {
  return Spec{.name = std::move(name), .kind = kind, .min = min, .max = max, .real_min = 0, .real_max = 0,
              .min_open = false, .choices = {}, .help = std::move(help)};
}

Spec of_kind(std::string name, Kind kind, std::vector<std::string> choices, std::string help) {
  return Spec{.name = std::move(name), .kind = kind, .min = 0, .max = 0, .real_min = 0, .real_max = 0,
              .min_open = false, .choices = std::move(choices), .help = std::move(help)};
}

}  // namespace

Spec integer(std::string name, std::int64_t min, std::int64_t max, std::string help) {
  return numeric(std::move(name), Kind::integer, min, max, std::move(help));
}
Spec integers(std::string name, std::int64_t min, std::int64_t max, std::string help) {
  return numeric(std::move(name), Kind::integers, min, max, std::move(help));
}
Spec real(std::string name, double min, double max, std::string help) {
  return Spec{.name = std::move(name), .kind = Kind::real, .min = 0, .max = 0, .real_min = min, .real_max = max,
              .min_open = false, .choices = {}, .help = std::move(help)};
}
Spec real_above(std::string name, double min, double max, std::string help) {
  Spec s = real(std::move(name), min, max, std::move(help));
  s.min_open = true;
  return s;
}
Spec positive_real(std::string name, double max, std::string help) {
  return real_above(std::move(name), 0.0, max, std::move(help));
}
Spec positive_reals(std::string name, double max, std::string help) {
  Spec s = positive_real(std::move(name), max, std::move(help));
  s.kind = Kind::reals;
  return s;
}
Spec choice(std::string name, std::vector<std::string> choices, std::string help) {
  return of_kind(std::move(name), Kind::choice, std::move(choices), std::move(help));
}
Spec choices(std::string name, std::vector<std::string> choices, std::string help) {
  return of_kind(std::move(name), Kind::choices, std::move(choices), std::move(help));
}
Spec text(std::string name, std::string help) { return of_kind(std::move(name), Kind::text, {}, std::move(help)); }
Spec bytes(std::string name, std::string help) { return of_kind(std::move(name), Kind::bytes, {}, std::move(help)); }
Spec output_file(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::output_file, {}, std::move(help));
}
Spec output_directory(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::output_directory, {}, std::move(help));
}
Spec flag(std::string name, std::string help) { return of_kind(std::move(name), Kind::flag, {}, std::move(help)); }
Spec input_file(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::input_file, {}, std::move(help));
}
Spec input_files(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::input_files, {}, std::move(help));
}
Spec input_directory(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::input_directory, {}, std::move(help));
}
Spec input_path(std::string name, std::string help) {
  return of_kind(std::move(name), Kind::input_path, {}, std::move(help));
}

Spec timeout_option() {
  return real("timeout", 0, 1e6, "watchdog: seconds an operation may wait before the job stops, naming it and the "
                                 "ranks that have not joined or stopped (default 600, as PyTorch's NCCL; 0: off). A "
                                 "stopped or lost rank ends the job within about SECONDS after the others reach it "
                                 "(10 minutes by default), 1.2 x SECONDS on device communicators, and SECONDS plus "
                                 "max(SECONDS, 2) with --in-process ranks");
}

std::chrono::milliseconds Options::timeout() const {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(real("timeout", kDefaultTimeoutSeconds) * 1e3)));
}

std::string describe(const Spec& s) {
  std::ostringstream out;
  switch (s.kind) {
    case Kind::integer: out << "integer in [" << s.min << ", " << s.max << "]"; break;
    case Kind::integers: out << "integers in [" << s.min << ", " << s.max << "], comma-separated"; break;
    case Kind::real: out << "number in " << real_range(s); break;
    case Kind::reals: out << "numbers in " << real_range(s) << ", comma-separated"; break;
    case Kind::choice: out << "one of " << joined(s.choices, ", "); break;
    case Kind::choices: out << "comma-separated, each one of " << joined(s.choices, ", "); break;
    case Kind::text: out << "text"; break;
    case Kind::bytes: out << "size such as 512MiB"; break;
    case Kind::output_file: out << "file to write"; break;
    case Kind::output_directory: out << "directory to write into"; break;
    case Kind::flag: out << "flag, no value"; break;
    case Kind::input_file: out << "existing file"; break;
    case Kind::input_files: out << "existing files, comma-separated"; break;
    case Kind::input_directory: out << "existing directory"; break;
    case Kind::input_path: out << "existing file or directory"; break;
  }
  return out.str();
}

Options::Options(int argc, char** argv, int first, std::vector<Spec> table) : table_(std::move(table)) {
  for (int a = first; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--help" || arg == "-h") {
      std::ostringstream text;
      text << "options:";
      for (const Spec& s : table_) text << "\n  --" << s.name << "  (" << describe(s) << ")  " << s.help;
      throw HelpRequested(text.str());
    }
    OPTIMUS_CHECK(arg.rfind("--", 0) == 0, "expected an option starting with --, got '", arg, "'");
    const std::string name = arg.substr(2);
    const auto declared = std::find_if(table_.begin(), table_.end(), [&](const Spec& s) { return s.name == name; });
    if (declared == table_.end()) {
      std::ostringstream names;
      for (const Spec& s : table_) names << " --" << s.name;
      OPTIMUS_FAIL("unknown option '", arg, "' (known:", names.str(), ")");
    }
    OPTIMUS_CHECK(values_.count(name) == 0, "option ", arg, " is given twice");
    if (declared->kind == Kind::flag) {
      values_[name] = "";
      continue;
    }
    OPTIMUS_CHECK(a + 1 < argc, "option ", arg, " needs a value");
    values_[name] = argv[++a];
    check_value(*declared, values_[name]);
    if (declared->kind == Kind::bytes) bytes(name, 0);
  }
  // No output replaces an input given beside it (--export over --data's file, say).
  std::vector<std::filesystem::path> inputs;
  std::vector<std::string> input_names;
  for (const Spec& s : table_) {
    if (!values_.count(s.name)) continue;
    const std::string& value = values_.at(s.name);
    const bool input = s.kind == Kind::input_file || s.kind == Kind::input_directory || s.kind == Kind::input_path;
    for (const std::string& item : s.kind == Kind::input_files ? split(value) : std::vector<std::string>{}) {
      inputs.emplace_back(item);
      input_names.push_back("--" + s.name);
    }
    if (input) {
      inputs.emplace_back(value);
      input_names.push_back("--" + s.name);
    }
  }
  for (const Spec& s : table_) {
    if (s.kind == Kind::output_file && values_.count(s.name)) {
      check_not_input(values_.at(s.name), "option --" + s.name, inputs, input_names);
    }
  }
  // Nor does it go into a directory another option writes (--export into --save's directory), before any work.
  for (const Spec& s : table_) {
    if (s.kind != Kind::output_file || !values_.count(s.name)) continue;
    for (const Spec& d : table_) {
      if (d.kind == Kind::output_directory && values_.count(d.name)) {
        check_not_within(values_.at(s.name), "option --" + s.name, values_.at(d.name), "--" + d.name);
      }
    }
  }
}

const Spec& Options::spec(const std::string& name) const {
  const auto it = std::find_if(table_.begin(), table_.end(), [&](const Spec& s) { return s.name == name; });
  OPTIMUS_CHECK(it != table_.end(), "option --", name, " is read but not declared in the program's option table");
  return *it;
}

bool Options::has(const std::string& name) const {
  spec(name);
  return values_.count(name) != 0;
}

std::string Options::text(const std::string& name, const std::string& fallback) const {
  spec(name);
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::int64_t Options::integer(const std::string& name, std::int64_t fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::integer, "option --", name, " is declared as ", describe(s), ", not read as an integer");
  return has(name) ? checked_integer(s, text(name, "")) : fallback;
}

double Options::real(const std::string& name, double fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::real, "option --", name, " is declared as ", describe(s), ", not read as a number");
  return has(name) ? checked_real(s, text(name, "")) : fallback;
}

std::uint64_t Options::bytes(const std::string& name, std::uint64_t fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::bytes, "option --", name, " is declared as ", describe(s), ", not read as a size");
  if (!has(name)) return fallback;
  const std::string value = text(name, "");
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"TB", 1e12},
      {"GB", 1e9},              {"MB", 1e6},           {"KB", 1e3},       {"B", 1.0}};
  // A decimal number (1.5, or 1e3: strtod's, but neither hexadecimal nor inf), then its unit.
  const std::size_t digits = value.find_first_not_of("0123456789.eE+-");
  std::string number = value.substr(0, digits), unit = digits == std::string::npos ? "" : value.substr(digits);
  char* end = nullptr;
  const double count = number.empty() || number[0] == '-' || number[0] == '+' ? 0.0 : std::strtod(number.c_str(), &end);
  if (end != nullptr && end != number.c_str() + number.size()) {  // "1e" of "1eGiB": the number ends earlier
    unit = number.substr(static_cast<std::size_t>(end - number.c_str())) + unit;
    number.resize(static_cast<std::size_t>(end - number.c_str()));
  }
  OPTIMUS_CHECK(end != nullptr && !number.empty(), "option --", name, " needs a size such as 512MiB, got '", value,
                "'");
  const auto scale = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& u) { return unit == u.first; });
  OPTIMUS_CHECK(scale != std::end(kUnits), "option --", name, " needs a size with a unit (B, KiB, MiB, GiB, TiB, KB, "
                "MB, GB, TB), such as 512MiB; got '", value, "'");
  const double total = count * scale->second;
  OPTIMUS_CHECK(total >= 1, "option --", name, " needs a positive size, got '", value, "'");
  OPTIMUS_CHECK(total < 1.8e19, "option --", name, " '", value, "' is ", total, " bytes, more than any machine's 2^64");
  return static_cast<std::uint64_t>(total);
}

std::vector<std::string> Options::list(const std::string& name, const std::string& fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::choices || s.kind == Kind::input_files, "option --", name, " is declared as ",
                describe(s), ", not read as a list");
  return checked_list(s, text(name, fallback));
}

std::vector<double> Options::reals(const std::string& name, const std::string& fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::reals, "option --", name, " is declared as ", describe(s), ", not read as numbers");
  std::vector<double> values;
  for (const std::string& item : checked_list(s, text(name, fallback))) values.push_back(checked_real(s, item));
  return values;
}

std::vector<std::int64_t> Options::integers(const std::string& name, const std::string& fallback) const {
  const Spec& s = spec(name);
  OPTIMUS_CHECK(s.kind == Kind::integers, "option --", name, " is declared as ", describe(s),
                ", not read as integers");
  std::vector<std::int64_t> values;
  for (const std::string& item : checked_list(s, text(name, fallback))) values.push_back(checked_integer(s, item));
  return values;
}

}  // namespace optimus::cli
