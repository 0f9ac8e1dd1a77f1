// Fixed-width and JSON rendering of benchmark rows.
#include "report.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::bench {

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[512];
  std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  return buffer;
}

void Report::print(std::FILE* out) const {
  print_header(out);
  for (std::size_t r = 0; r < rows_.size(); ++r) print_row(out, r);
  print_footer(out);
}

void Report::print_header(std::FILE* out) const {
  for (const std::string& h : headers_) std::fprintf(out, "# %s\n", h.c_str());
  std::fprintf(out, "#");
  for (const Column& c : columns_) std::fprintf(out, " %*s", c.width, c.name.c_str());
  std::fprintf(out, "\n");
}

void Report::print_row(std::FILE* out, std::size_t r) const {
  std::fprintf(out, " ");
  for (std::size_t c = 0; c < columns_.size(); ++c) std::fprintf(out, " %*s", columns_[c].width, rows_[r][c].c_str());
  std::fprintf(out, "\n");
  std::fflush(out);
}

void Report::print_footer(std::FILE* out) const {
  for (const std::string& f : footers_) std::fprintf(out, "# %s\n", f.c_str());
}

Report::Report(std::vector<Column> columns) : columns_(std::move(columns)) {
  const cpu::Processor processor = cpu::this_processor();
  headers_ = {cpu::describe(processor), cpu::describe(cpu::blas_kernel(), processor)};
}

namespace {

// A value that parses whole as a number is written as one (an integer when it has no fraction or exponent).
nlohmann::ordered_json value_of(const std::string& s) {
  if (s.empty()) return s;
  char* end = nullptr;
  const long long integer = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() + s.size()) return integer;
  const double real = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size() && std::isfinite(real)) return real;
  return s;
}

// The processor and the GEMM kernel, as the header's first two lines say them.
nlohmann::ordered_json machine() {
  const cpu::Processor p = cpu::this_processor();
  const cpu::BlasKernel k = cpu::blas_kernel();
  nlohmann::ordered_json features = nlohmann::ordered_json::array();
  for (std::string_view name : p.feature_names()) features.push_back(name);
  const cpu::VectorUnits units = cpu::vector_units(p);
  return {{"processor", p.brand},
          {"vendor", p.vendor},
          {"family", p.family},
          {"model", p.model},
          {"cores", p.cores},
          {"features", features},
          {"simd", cpu::name_of(p.simd())},
          {"f32_flops_per_cycle_per_core", units.f32_flops_per_cycle()},
          {"vector_units", units.basis},
          {"blas", k.library},
          {"blas_config", k.config},
          {"kernel", k.kernel},
          {"kernel_simd", cpu::name_of(k.simd)},
          {"kernel_chosen_by", k.chosen_by},
          {"kernel_fit", cpu::name_of(cpu::fit_of(k.simd, p))}};
}

}  // namespace

void Report::write_json(const std::string& path, const std::string& benchmark) const {
  nlohmann::ordered_json doc{{"benchmark", benchmark}, {"machine", machine()}, {"header", headers_}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::vector<std::string>& values : rows_) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    for (std::size_t c = 0; c < columns_.size(); ++c) row[columns_[c].name] = value_of(values[c]);
    rows.push_back(std::move(row));
  }
  doc["rows"] = std::move(rows);
  doc["footer"] = footers_;
  write_file(path, doc.dump(2) + "\n");
}

}  // namespace optimus::bench
