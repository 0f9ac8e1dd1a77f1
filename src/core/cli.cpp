// Parsing of `--name value` command-line options.
#include "optimus/core/cli.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus::cli {
namespace {

// The whole of `text` converted by `convert` (std::stoll, std::stod, ...), or an error naming the option and
// `kind` ("an integer", "a number").
template <class Convert>
auto parse_whole(const std::string& name, const std::string& text, const char* kind, Convert convert) {
  std::size_t used = 0;
  decltype(convert(text, &used)) x{};
  try {
    x = convert(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  OPTIMUS_CHECK(used == text.size() && !text.empty(), "option --", name, " needs ", kind, ", got '", text, "'");
  return x;
}

std::int64_t parse_integer(const std::string& name, const std::string& text) {
  return parse_whole(name, text, "an integer",
                     [](const std::string& t, std::size_t* used) { return static_cast<std::int64_t>(std::stoll(t, used)); });
}

}  // namespace

Options::Options(int argc, char** argv, int first, const std::vector<std::string>& known) {
  for (int a = first; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help" || flag == "-h") {
      std::ostringstream text;
      text << "options (each takes a value):";
      for (const std::string& k : known) text << " --" << k;
      throw HelpRequested(text.str());
    }
    OPTIMUS_CHECK(flag.rfind("--", 0) == 0, "expected an option starting with --, got '", flag, "'");
    const std::string name = flag.substr(2);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::ostringstream names;
      for (const std::string& k : known) names << " --" << k;
      OPTIMUS_FAIL("unknown option '", flag, "' (known:", names.str(), ")");
    }
    OPTIMUS_CHECK(a + 1 < argc, "option ", flag, " needs a value");
    values_[name] = argv[++a];
  }
}

std::string Options::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::int64_t Options::integer(const std::string& name, std::int64_t fallback) const {
  return parse_integer(name, text(name, std::to_string(fallback)));
}

double Options::real(const std::string& name, double fallback) const {
  return parse_whole(name, text(name, std::to_string(fallback)), "a number",
                     [](const std::string& t, std::size_t* used) { return std::stod(t, used); });
}

std::uint64_t Options::bytes(const std::string& name, std::uint64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string value = text(name, "");
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"TB", 1e12},
      {"GB", 1e9},              {"MB", 1e6},           {"KB", 1e3},       {"B", 1.0}};
  const std::size_t digits = value.find_first_not_of("0123456789.");
  const std::string number = value.substr(0, digits), unit = digits == std::string::npos ? "" : value.substr(digits);
  const auto scale = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& u) { return unit == u.first; });
  OPTIMUS_CHECK(scale != std::end(kUnits), "option --", name, " needs a size with a unit (B, KiB, MiB, GiB, TiB, KB, "
                "MB, GB, TB), such as 512MiB; got '", value, "'");
  const double count = parse_whole(name, number, "a size such as 512MiB",
                                   [](const std::string& t, std::size_t* used) { return std::stod(t, used); });
  const double bytes = count * scale->second;
  OPTIMUS_CHECK(bytes >= 1 && bytes < 1.8e19, "option --", name, " needs a positive size, got '", value, "'");
  return static_cast<std::uint64_t>(bytes);
}

std::vector<std::string> Options::list(const std::string& name, const std::string& fallback) const {
  std::vector<std::string> items;
  std::stringstream in(text(name, fallback));
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  OPTIMUS_CHECK(!items.empty(), "option --", name, " needs at least one value");
  return items;
}

std::vector<std::int64_t> Options::integers(const std::string& name, const std::string& fallback) const {
  std::vector<std::int64_t> values;
  for (const std::string& item : list(name, fallback)) values.push_back(parse_integer(name, item));
  return values;
}

}  // namespace optimus::cli
