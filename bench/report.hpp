// Benchmark output in the style of nccl-tests: `#` header lines, fixed-width rows, a footer, and the
// same rows as JSON on request.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace optimus::bench {

// One column: its header, printf width, and whether values are numbers (right-aligned) or text.
struct Column {
  std::string name;
  int width;
};

// Every report's header starts with the processor and the CPU GEMM's kernel (blas_kernel.hpp), and its JSON holds them
// as the object "machine".
class Report {
 public:
  explicit Report(std::vector<Column> columns);

  void header(const std::string& line) { headers_.push_back(line); }
  void footer(const std::string& line) { footers_.push_back(line); }
  // Values in column order, already formatted; numbers are written to JSON unquoted when they parse.
  void row(std::vector<std::string> values) { rows_.push_back(std::move(values)); }

  // The header, every row and the footer.
  void print(std::FILE* out) const;
  void print_header(std::FILE* out) const;
  void print_row(std::FILE* out, std::size_t r) const;
  void print_footer(std::FILE* out) const;
  void write_json(const std::string& path, const std::string& benchmark) const;

  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::string> headers_;
  std::vector<std::string> footers_;
  std::vector<std::vector<std::string>> rows_;
};

// printf into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace optimus::bench
