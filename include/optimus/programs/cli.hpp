// Command-line options for Optimus programs (apps/, examples/, optimus-bench), table-driven: each program declares its options
// as a table of Specs — name, what it takes, its range, a line of help — and Options validates every option given
// against the table when it is constructed, before any work starts. A bad option is one optimus::Error naming the
// option and the value:
//
//   unknown option '--stepz' (known: --q --steps ...)     option --steps: 0 is out of range [1, 100000000]
//   option --steps needs an integer, got '1e3'           option --lr needs a finite number, got 'nan'
//   option --gemm: 'fp8' is not one of f32, bf16         option --json: the directory '/nope' does not exist
//
// Integers that overflow 64 bits are out of range, never wrapped; NaN and inf are never numbers. `--help` (or `-h`)
// throws HelpRequested, whose text lists the table (one option per line): programs print it and exit 0.
//
// The getters read a declared option's value, or the program's fallback when it was not given (fallbacks are not
// checked against the table: the program chooses them). Reading an option the table does not declare, or as another
// kind, is a programming error (optimus::Error naming it).
//
// (CLI11, Debian's libcli11-dev 2.1.2, was considered: its CLI::Range lets NaN through and it reports '1e3' for an
// integer as out of range; this table is small and says exactly what is wrong.)
#pragma once

#include <chrono>
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

// What an option takes.
//   integer, integers: a 64-bit integer in [min, max] (integers: a comma-separated list of them)
//   real, reals      : a finite number in [real_min, real_max] ((real_min, real_max] when min_open; reals: a
//                      comma-separated list of them)
//   choice, choices  : one of `choices` (choices: a comma-separated list of them)
//   text             : any non-empty text
//   bytes            : a size with a unit (Options::bytes)
//   output_file      : a file to write, whose directory exists: new, or a regular file (never a device, a FIFO or a
//                      directory), and none of the options' inputs (output_file.hpp)
//   output_directory : a directory to write into (it may exist), whose parent exists
//   input_file       : a regular file that exists (input_files: a comma-separated list of them); the whole value is
//                      one path, commas included, for input_file
//   input_directory  : a directory that exists (the whole value one path)
//   input_path       : a regular file or a directory that exists (a model that is one file or a directory of them)
//   flag             : no value: given or not (`--skip-nonfinite`)
enum class Kind {
  integer, integers, real, reals, choice, choices, text, bytes, output_file, output_directory, input_file, input_files,
  input_directory, input_path, flag
};

struct Spec {
  std::string name;  // without "--"
  Kind kind = Kind::text;
  std::int64_t min = 0, max = 0;
  double real_min = 0, real_max = 0;
  bool min_open = false;
  std::vector<std::string> choices;
  std::string help;
};

Spec integer(std::string name, std::int64_t min, std::int64_t max, std::string help);
Spec integers(std::string name, std::int64_t min, std::int64_t max, std::string help);
Spec real(std::string name, double min, double max, std::string help);
Spec positive_real(std::string name, double max, std::string help);   // (0, max]
Spec real_above(std::string name, double min, double max, std::string help);  // (min, max]
Spec positive_reals(std::string name, double max, std::string help);  // each in (0, max]
Spec choice(std::string name, std::vector<std::string> choices, std::string help);
Spec choices(std::string name, std::vector<std::string> choices, std::string help);
Spec text(std::string name, std::string help);
Spec bytes(std::string name, std::string help);
Spec output_file(std::string name, std::string help);
Spec output_directory(std::string name, std::string help);
Spec input_file(std::string name, std::string help);
Spec input_files(std::string name, std::string help);
Spec input_directory(std::string name, std::string help);
Spec input_path(std::string name, std::string help);
Spec flag(std::string name, std::string help);

// --timeout SECONDS, the watchdog (Communicator::set_timeout) a program turns on: seconds, 0 for off. On by default:
// a rank stopped or lost (SIGSTOP, a hung driver) would otherwise hang every other rank for good. Ten minutes, as
// PyTorch's NCCL process groups: far above any one operation of a healthy run (a step's longest wait, a checkpoint's
// save), short enough that a stuck job ends the same hour, naming the operation and the ranks missing.
inline constexpr double kDefaultTimeoutSeconds = 600;
Spec timeout_option();

// How a spec reads in --help: "integer in [1, 64]", "one of f32, bf16", ...
std::string describe(const Spec& spec);

class Options {
 public:
  // argv[first..argc) are `--name value` pairs (a flag without its value), each name declared once in `table` and given
  // at most once; every value is checked against its spec here, and no output_file given is one of the inputs given.
  Options(int argc, char** argv, int first, std::vector<Spec> table);

  std::string text(const std::string& name, const std::string& fallback) const;
  std::int64_t integer(const std::string& name, std::int64_t fallback) const;
  std::vector<std::string> list(const std::string& name, const std::string& fallback) const;  // comma-separated
  std::vector<std::int64_t> integers(const std::string& name, const std::string& fallback) const;
  std::vector<double> reals(const std::string& name, const std::string& fallback) const;
  double real(const std::string& name, double fallback) const;
  // A size in bytes with a unit — B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000) — such as
  // "512MiB" or "1.5GiB" (whole bytes); `fallback` when the option is not given. A number without a unit, an unknown
  // unit or a size of 0 is an error naming the option.
  std::uint64_t bytes(const std::string& name, std::uint64_t fallback) const;
  bool has(const std::string& name) const;  // also: whether a flag was given
  // --timeout's value (timeout_option): kDefaultTimeoutSeconds when it is not given, 0 (the watchdog off) for 0.
  std::chrono::milliseconds timeout() const;

  const std::vector<Spec>& table() const { return table_; }

 private:
  const Spec& spec(const std::string& name) const;  // throws unless declared

  std::vector<Spec> table_;
  std::map<std::string, std::string> values_;
};

}  // namespace optimus::cli
