// Token files: llm.c's header (uint16 or uint32 ids) or raw uint16, read with pread where used (token_file.hpp).
#include "optimus/checkpoint/token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint {

namespace {
constexpr std::int32_t llmc_magic = 20240520;
constexpr std::size_t llmc_header = 256 * sizeof(std::int32_t);

// `bytes` bytes at `offset` of `fd`, all of them, or false (end of file first); throws on a read error.
bool read_exactly(int fd, std::size_t offset, std::size_t bytes, void* out, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    OPTIMUS_CHECK(n >= 0, "cannot read token file '", path, "': ", std::strerror(errno));
    if (n == 0) return false;
    p += n;
    offset += static_cast<std::size_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}
}  // namespace

std::string_view name_of(TokenFormat format) { return format == TokenFormat::llmc ? "llm.c" : "raw uint16"; }

TokenFile::TokenFile(std::string path, TokenFormat format) : path_(std::move(path)), format_(format) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  OPTIMUS_CHECK(fd_ >= 0, "cannot open token file '", path_, "': ", std::strerror(errno));
  try {
    struct stat st {};
    OPTIMUS_CHECK(::fstat(fd_, &st) == 0, "cannot read token file '", path_, "': ", std::strerror(errno));
    OPTIMUS_CHECK(S_ISREG(st.st_mode), "token file '", path_, "' is not a regular file");
    const auto bytes = static_cast<std::size_t>(st.st_size);
    OPTIMUS_CHECK(bytes > 0, "token file '", path_, "' is empty");
    if (format_ == TokenFormat::raw_uint16) {
      OPTIMUS_CHECK(bytes % 2 == 0, "token file '", path_, "' is not raw uint16 tokens: it has an odd number of bytes, ",
                    bytes);
      count_ = bytes / 2;
      return;
    }
    std::int32_t header[3] = {0, 0, 0};
    const bool whole = bytes >= llmc_header && read_exactly(fd_, 0, sizeof header, header, path_);
    OPTIMUS_CHECK(whole && header[0] == llmc_magic, "token file '", path_, "' is not an llm.c token file: ",
                  whole ? "it starts with " + std::to_string(header[0]) : "it is shorter than llm.c's header",
                  ", not the magic ", llmc_magic, " (a damaged llm.c file, or nanoGPT's raw uint16 tokens: those "
                  "are read as raw when told so)");
    OPTIMUS_CHECK(header[1] == 1 || header[1] == 2, "token file '", path_, "': llm.c version ", header[1],
                  " (version 1, uint16 ids, and version 2, uint32 ids, are read)");
    id_bytes_ = header[1] == 1 ? 2 : 4;
    OPTIMUS_CHECK(header[2] > 0 && bytes == llmc_header + id_bytes_ * static_cast<std::size_t>(header[2]),
                  "token file '", path_, "': its header says ", header[2], " tokens of ", id_bytes_,
                  " bytes but it holds ", bytes - llmc_header, " bytes of them (truncated?)");
    offset_ = llmc_header;
    count_ = static_cast<std::size_t>(header[2]);
  } catch (...) {
    ::close(fd_);  // a constructor that throws runs no destructor
    throw;
  }
}

TokenFile::~TokenFile() { ::close(fd_); }

void TokenFile::read(std::size_t first, std::size_t count, std::uint32_t* out) const {
  OPTIMUS_CHECK(first <= count_ && count <= count_ - first, "token file '", path_, "': tokens [", first, ", ",
                first + count, ") are outside its ", count_);
  const auto whole = [&](void* to) {
    OPTIMUS_CHECK(read_exactly(fd_, offset_ + id_bytes_ * first, id_bytes_ * count, to, path_), "token file '", path_,
                  "' no longer holds its ", count_, " tokens (it ends before token ", first + count,
                  "): it was truncated or replaced while in use");
  };
  if (id_bytes_ == 4) {
    whole(out);
    return;
  }
  std::vector<std::uint16_t> narrow(count);
  whole(narrow.data());
  std::copy(narrow.begin(), narrow.end(), out);
}

std::vector<std::int64_t> TokenFile::histogram() const {
  std::vector<std::uint32_t> piece(std::min(count_, (std::size_t{1} << 20) / id_bytes_));  // 1 MiB at most
  std::vector<std::int64_t> counts;
  for (std::size_t first = 0; first < count_; first += piece.size()) {
    const std::size_t n = std::min(piece.size(), count_ - first);
    read(first, n, piece.data());
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t id = piece[k];
      OPTIMUS_CHECK(id < kLargestVocab, "token file '", path_, "' holds id ", id, " at token ", first + k,
                    ", beyond the largest vocabulary Optimus takes (", kLargestVocab, " ids): a damaged file?");
      if (id >= counts.size()) counts.resize(id + 1, 0);
      ++counts[id];
    }
  }
  return counts;
}

namespace {
template <class Id>
void write_llmc(const std::string& path, const Id* tokens, std::size_t count, int version) {
  OPTIMUS_CHECK(count > 0 && count <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
                "an llm.c token file holds 1 to 2^31 - 1 tokens (its header's count is an int32), not ", count);
  std::int32_t header[256] = {};
  header[0] = llmc_magic;
  header[1] = version;
  header[2] = static_cast<std::int32_t>(count);
  OutputFile out(path);
  out.append(header, sizeof header);
  out.append(tokens, count * sizeof(Id));
  out.commit();
}
}  // namespace

void write_llmc_tokens(const std::string& path, const std::uint16_t* tokens, std::size_t count) {
  write_llmc(path, tokens, count, 1);
}

void write_llmc_tokens(const std::string& path, const std::uint32_t* tokens, std::size_t count) {
  write_llmc(path, tokens, count, 2);
}

}  // namespace optimus::checkpoint
