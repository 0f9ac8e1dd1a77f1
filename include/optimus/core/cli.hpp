// Command-line options for Optimus programs (examples, optimus-bench): `--name value` pairs, validated;
// unknown names and malformed values are optimus::Error naming them. `--help` (or `-h`) throws HelpRequested,
// whose text lists the accepted options: programs print it and exit 0.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace optimus::cli {

class HelpRequested : public std::exception {
 public:
  explicit HelpRequested(std::string text) : text_(std::move(text)) {}
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  std::string text_;
};

class Options {
 public:
  // argv[first..argc) are `--name value` pairs; `known` lists the accepted names (without "--").
  Options(int argc, char** argv, int first, const std::vector<std::string>& known);

  std::string text(const std::string& name, const std::string& fallback) const;
  std::int64_t integer(const std::string& name, std::int64_t fallback) const;
  std::vector<std::string> list(const std::string& name, const std::string& fallback) const;  // comma-separated
  std::vector<std::int64_t> integers(const std::string& name, const std::string& fallback) const;
  double real(const std::string& name, double fallback) const;
  // A size in bytes with a unit — B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000) — such as
  // "512MiB" or "1.5GiB" (whole bytes); `fallback` when the option is not given. A number without a unit, an unknown
  // unit or a size of 0 is an error naming the option.
  std::uint64_t bytes(const std::string& name, std::uint64_t fallback) const;
  bool has(const std::string& name) const { return values_.count(name) != 0; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace optimus::cli
