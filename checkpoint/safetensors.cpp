// safetensors: header JSON through nlohmann-json; data written through an OutputFile, read with pread.
#include "optimus/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"

namespace optimus::safetensors {

namespace {

constexpr std::uint64_t max_header = 100'000'000;  // the format's own limit on the JSON header

std::string why() { return std::strerror(errno); }

std::uint64_t product(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    OPTIMUS_CHECK(d >= 0, "safetensors: a negative dimension ", d);
    OPTIMUS_CHECK(d == 0 || n <= std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d),
                  "safetensors: a shape whose element count overflows 64 bits");
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

}  // namespace

std::size_t element_size(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "BF16" || dtype == "F16" || dtype == "U16" || dtype == "I16") return 2;
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL") return 1;
  OPTIMUS_FAIL("safetensors: unsupported dtype '", dtype, "'");
}

std::uint64_t TensorInfo::bytes() const { return product(shape) * element_size(dtype); }

// ---- Writer ----

Writer::Writer(std::string path, std::vector<TensorInfo> tensors, const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)), file_(path_) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const TensorInfo& t : tensors_) {
    OPTIMUS_CHECK(t.name != "__metadata__" && !header.contains(t.name), "safetensors: '", path_,
                  "' would hold two tensors named '", t.name, "'");
    const std::uint64_t bytes = t.bytes();
    begins_.push_back(data_bytes_);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data_bytes_, data_bytes_ + bytes}}};
    data_bytes_ += bytes;
  }
  std::string json = header.dump();
  json.resize((json.size() + 7) / 8 * 8, ' ');  // the data starts 8-byte aligned
  header_.resize(8);
  const std::uint64_t n = json.size();
  for (int b = 0; b < 8; ++b) header_[static_cast<std::size_t>(b)] = static_cast<char>((n >> (8 * b)) & 0xff);
  header_ += json;
  file_.append(header_.data(), header_.size());
}

void Writer::append(const void* data, std::uint64_t bytes) {
  OPTIMUS_CHECK(written_ + bytes <= data_bytes_, "safetensors: '", path_, "' takes ", data_bytes_,
                " bytes of data, but ", written_ + bytes, " were given");
  file_.append(data, bytes);
  written_ += bytes;
}

void Writer::finish() {
  OPTIMUS_CHECK(written_ == data_bytes_, "safetensors: '", path_, "' was given ", written_, " of its ", data_bytes_,
                " bytes of data");
  file_.commit();
}

std::uint64_t Writer::file_offset(std::size_t k) const { return header_.size() + begins_.at(k); }

// ---- Reader ----

Reader::Reader(std::string path) : path_(std::move(path)) {
  check_regular_input(path_, "safetensors");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // (a FIFO put there since must not block the open)
  OPTIMUS_CHECK(fd_ >= 0, "cannot open '", path_, "': ", why());
  try {
    parse();
  } catch (...) {
    ::close(std::exchange(fd_, -1));  // a constructor that throws runs no destructor
    throw;
  }
}

void Reader::parse() {
  struct stat st {};
  OPTIMUS_CHECK(::fstat(fd_, &st) == 0, "cannot stat '", path_, "': ", why());
  OPTIMUS_CHECK(S_ISREG(st.st_mode), "safetensors: '", path_, "' is not a regular file, not a file to read");
  file_bytes_ = static_cast<std::uint64_t>(st.st_size);
  OPTIMUS_CHECK(file_bytes_ >= 8, "'", path_, "' is not a safetensors file: ", file_bytes_, " bytes");
  unsigned char length[8];
  read(0, 8, length);
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | length[b];
  OPTIMUS_CHECK(n <= max_header && n <= file_bytes_ - 8, "'", path_, "' is not a safetensors file: its header of ", n,
                " bytes does not fit its ", file_bytes_, " bytes");
  header_.resize(8 + n);
  read(0, 8 + n, header_.data());
  const nlohmann::json header = nlohmann::json::parse(header_.begin() + 8, header_.end(), nullptr, false);
  OPTIMUS_CHECK(header.is_object(), "'", path_, "' is not a safetensors file: its header is not a JSON object");
  const std::uint64_t data_start = 8 + n, data_bytes = file_bytes_ - data_start;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      OPTIMUS_CHECK(value.is_object(), "'", path_, "': __metadata__ is not a map of strings");
      for (const auto& [key, text] : value.items()) {
        OPTIMUS_CHECK(text.is_string(), "'", path_, "': __metadata__['", key, "'] is not a string");
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    const bool well_formed = value.is_object() && value.contains("dtype") && value["dtype"].is_string() &&
                             value.contains("shape") && value["shape"].is_array() &&
                             value.contains("data_offsets") && value["data_offsets"].is_array() &&
                             value["data_offsets"].size() == 2 && value["data_offsets"][0].is_number_unsigned() &&
                             value["data_offsets"][1].is_number_unsigned();
    OPTIMUS_CHECK(well_formed, "'", path_, "': tensor '", name, "' lacks dtype, shape or data_offsets [begin, end]");
    Entry e;
    e.info.name = name;
    e.info.dtype = value["dtype"].get<std::string>();
    for (const auto& d : value["shape"]) {
      OPTIMUS_CHECK(d.is_number_unsigned(), "'", path_, "': tensor '", name, "' has a shape that is not sizes");
      e.info.shape.push_back(d.get<std::int64_t>());
    }
    const auto begin = value["data_offsets"][0].get<std::uint64_t>(), end = value["data_offsets"][1].get<std::uint64_t>();
    std::uint64_t bytes = 0;
    try {
      bytes = e.info.bytes();
    } catch (const Error& bad) {
      OPTIMUS_FAIL("'", path_, "': tensor '", name, "': ", bad.message());
    }
    OPTIMUS_CHECK(begin <= end && end - begin == bytes, "'", path_, "': tensor '", name, "' has data_offsets [",
                  begin, ", ", end, "] but its dtype and shape take ", bytes, " bytes");
    OPTIMUS_CHECK(end <= data_bytes, "'", path_, "': tensor '", name, "' ends at byte ", end, " of the data, but the "
                  "file holds ", data_bytes, " (truncated?)");
    e.offset = data_start + begin;
    spans.emplace_back(begin, end);
    entries_.push_back(std::move(e));
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [begin, end] : spans) {
    OPTIMUS_CHECK(begin == at, "'", path_, "': tensors ", begin < at ? "overlap" : "leave a hole", " at byte ", at,
                  " of the data");
    at = end;
  }
  OPTIMUS_CHECK(at == data_bytes, "'", path_, "': the tensors take ", at, " bytes but the file holds ", data_bytes,
                " after its header");
}

Reader::Reader(Reader&& other) noexcept
    : path_(std::move(other.path_)),
      entries_(std::move(other.entries_)),
      metadata_(std::move(other.metadata_)),
      header_(std::move(other.header_)),
      file_bytes_(other.file_bytes_),
      fd_(std::exchange(other.fd_, -1)) {}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

bool Reader::has(std::string_view name) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.info.name == name; });
}

const Entry& Reader::find(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.info.name == name) return e;
  }
  OPTIMUS_FAIL("'", path_, "' has no tensor named '", name, "'");
}

void Reader::read(std::uint64_t offset, std::uint64_t bytes, void* out) const {
  OPTIMUS_CHECK(offset <= file_bytes_ && bytes <= file_bytes_ - offset, "'", path_, "': bytes [", offset, ", ",
                offset + bytes, ") are past its end (", file_bytes_, " bytes; truncated?)");
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, std::min<std::uint64_t>(bytes, 1u << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    OPTIMUS_CHECK(n > 0, "cannot read '", path_, "' at byte ", offset, ": ", n == 0 ? "unexpected end" : why());
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace optimus::safetensors
