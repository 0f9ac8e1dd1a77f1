// Token files: llm.c's header or raw uint16, memory-mapped.
#include "optimus/checkpoint/token_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus::checkpoint {

namespace {
constexpr std::int32_t llmc_magic = 20240520;
constexpr std::size_t llmc_header = 256 * sizeof(std::int32_t);
}  // namespace

TokenFile::TokenFile(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  OPTIMUS_CHECK(fd >= 0, "cannot open token file '", path_, "': ", std::strerror(errno));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  map_bytes_ = stated ? static_cast<std::size_t>(st.st_size) : 0;
  if (stated && map_bytes_ > 0) {
    map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) map_ = nullptr;
  }
  ::close(fd);
  OPTIMUS_CHECK(stated && map_bytes_ > 0, "token file '", path_, "' is empty or cannot be read");
  OPTIMUS_CHECK(map_ != nullptr, "cannot map token file '", path_, "': ", std::strerror(errno));
  try {
    parse();
  } catch (...) {
    ::munmap(std::exchange(map_, nullptr), map_bytes_);  // a constructor that throws runs no destructor
    throw;
  }
}

void TokenFile::parse() {
  const auto* bytes = static_cast<const char*>(map_);
  std::int32_t header[3] = {0, 0, 0};
  if (map_bytes_ >= sizeof header) std::memcpy(header, bytes, sizeof header);
  llmc_ = header[0] == llmc_magic;
  if (llmc_) {
    OPTIMUS_CHECK(map_bytes_ >= llmc_header, "token file '", path_, "' has llm.c's magic but no whole header");
    OPTIMUS_CHECK(header[1] == 1, "token file '", path_, "': llm.c version ", header[1], " (version 1 is read)");
    count_ = static_cast<std::size_t>(header[2]);
    OPTIMUS_CHECK(header[2] > 0 && map_bytes_ == llmc_header + 2 * count_, "token file '", path_, "': its header says ",
                  header[2], " tokens but holds ", map_bytes_ - llmc_header, " bytes of them (truncated?)");
    tokens_ = reinterpret_cast<const std::uint16_t*>(bytes + llmc_header);
  } else {
    OPTIMUS_CHECK(map_bytes_ % 2 == 0, "token file '", path_, "' is neither llm.c's (magic ", llmc_magic,
                  ") nor raw uint16 tokens: it has an odd number of bytes, ", map_bytes_);
    count_ = map_bytes_ / 2;
    tokens_ = reinterpret_cast<const std::uint16_t*>(bytes);
  }
}

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(other.map_bytes_),
      count_(other.count_),
      tokens_(other.tokens_),
      llmc_(other.llmc_) {}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

int TokenFile::max_token() const { return count_ == 0 ? -1 : *std::max_element(tokens_, tokens_ + count_); }

void write_llmc_tokens(const std::string& path, const std::uint16_t* tokens, std::size_t count) {
  std::int32_t header[256] = {};
  header[0] = llmc_magic;
  header[1] = 1;
  header[2] = static_cast<std::int32_t>(count);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(tokens), static_cast<std::streamsize>(count * sizeof(std::uint16_t)));
  OPTIMUS_CHECK(out.good(), "cannot write token file '", path, "'");
}

}  // namespace optimus::checkpoint
