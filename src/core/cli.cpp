// Parsing of `--name value` command-line options.
#include "optimus/core/cli.hpp"

#include <algorithm>
#include <sstream>

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
