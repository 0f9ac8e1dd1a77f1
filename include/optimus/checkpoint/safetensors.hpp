// The safetensors file format (Hugging Face): what Optimus writes its checkpoint shards and exported models in, and
// reads imported ones from. A file is
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data]
//
// where the header maps each tensor's name to {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}
// (byte offsets into the data, which the tensors tile exactly, in order) and "__metadata__" to a map of strings.
// Tensors are row-major and little-endian. The writer streams: it writes the header from the tensors' names, types and
// shapes, then takes their bytes one tensor after another, so no caller has to hold the whole file.
//
// Errors (optimus::Error naming the file): an unreadable or short file, a header that is not JSON or not
// safetensors (unknown dtype, bytes that disagree with the shape, offsets that overlap, leave holes or run past the
// end of the file), a tensor asked for that the file does not have, and on writing any failed write or fsync.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "optimus/core/output_file.hpp"

namespace optimus::safetensors {

// The element types Optimus reads and writes ("F32", "F64", "BF16", "U8", "U16", "I32", "I64"); others are refused.
std::size_t element_size(std::string_view dtype);

struct TensorInfo {
  std::string name;
  std::string dtype;                 // "F32", "F64", ...
  std::vector<std::int64_t> shape;   // row-major; {} for a scalar
  std::uint64_t bytes() const;       // element_size(dtype) * product of shape
};

// Writes `path` as an optimus::OutputFile (core/output_file.hpp: a partial file of this writer's own beside it, every
// byte checked, renamed over `path` at the end unless another writer wrote `path` meanwhile; only a regular file or a
// new path is replaced): the header at once, then each tensor's
// bytes through append(), in the order given; finish() checks that every byte came, fsyncs and renames. Destroying an
// unfinished writer removes the partial file and leaves `path` as it was.
class Writer {
 public:
  Writer(std::string path, std::vector<TensorInfo> tensors, const std::map<std::string, std::string>& metadata);

  // The next `bytes` of the data (any split of the tensors' bytes into calls is allowed).
  void append(const void* data, std::uint64_t bytes);
  void finish();

  // The header as written: its 8-byte length and the JSON (what a checkpoint's checksums cover).
  const std::string& header() const { return header_; }
  // Where tensor k's bytes start in the file.
  std::uint64_t file_offset(std::size_t k) const;
  std::uint64_t file_bytes() const { return header_.size() + data_bytes_; }

 private:
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::uint64_t> begins_;
  std::string header_;
  std::uint64_t data_bytes_ = 0, written_ = 0;
  OutputFile file_;
};

struct Entry {
  TensorInfo info;
  std::uint64_t offset = 0;  // in the file
};

// Opens and validates `path`'s header; reads byte ranges of its tensors with pread (nothing else is read).
class Reader {
 public:
  explicit Reader(std::string path);
  ~Reader();
  Reader(Reader&& other) noexcept;
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  Reader& operator=(Reader&&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The header as it is in the file (length and JSON).
  const std::string& header() const { return header_; }
  std::uint64_t file_bytes() const { return file_bytes_; }
  // The entry named `name`; throws naming the file and the tensor where there is none.
  const Entry& find(std::string_view name) const;
  bool has(std::string_view name) const;
  // Reads `bytes` bytes of the file at `offset` (absolute) into `out`; throws naming the file on a short read.
  void read(std::uint64_t offset, std::uint64_t bytes, void* out) const;

 private:
  void parse();  // the header, validated

  std::string path_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::string header_;
  std::uint64_t file_bytes_ = 0;
  int fd_ = -1;
};

}  // namespace optimus::safetensors
