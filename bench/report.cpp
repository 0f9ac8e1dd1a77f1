// Fixed-width and JSON rendering of benchmark rows.
#include "report.hpp"

#include <cstdarg>
#include <cstdlib>
#include <fstream>

#include "optimus/core/error.hpp"

namespace optimus::bench {

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[512];
  std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  return buffer;
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

namespace {
bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}
}  // namespace

void Report::write_json(const std::string& path, const std::string& benchmark) const {
  std::ofstream out(path);
  OPTIMUS_CHECK(out.good(), "cannot write JSON to '", path, "'");
  out << "{\n  \"benchmark\": " << quoted(benchmark) << ",\n  \"header\": [";
  for (std::size_t h = 0; h < headers_.size(); ++h) out << (h ? ", " : "") << quoted(headers_[h]);
  out << "],\n  \"rows\": [\n";
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    out << "    {";
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string& v = rows_[r][c];
      out << (c ? ", " : "") << quoted(columns_[c].name) << ": " << (is_number(v) ? v : quoted(v));
    }
    out << (r + 1 < rows_.size() ? "},\n" : "}\n");
  }
  out << "  ],\n  \"footer\": [";
  for (std::size_t f = 0; f < footers_.size(); ++f) out << (f ? ", " : "") << quoted(footers_[f]);
  out << "]\n}\n";
}

}  // namespace optimus::bench
