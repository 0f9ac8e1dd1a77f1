// The files a program writes: never over one of its inputs, never over anything but a regular file, and never
// half-written — a file is written beside its target as `NAME.partial`, every byte checked (a full disk fails the
// write, not later), fsynced, and renamed over the target, so a reader sees the old file or the whole new one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace optimus {

// What a file that is not a regular one is, for messages: "a directory", "a character device", "a FIFO", ...
std::string kind_of(const std::filesystem::file_status& status);

// Throws unless `path` is new or a regular file (or a link to one): a directory, a device (/dev/full), a FIFO or a
// socket is never replaced. `what` names the output in the message ("--export", "the trace").
void check_replaceable(const std::filesystem::path& path, std::string_view what);

// Throws where `output` is one of `inputs` (the same file by any name: links, "./x" and "x") or lies inside one that is
// a directory (a checkpoint's files). Each input is named by `input_names` alongside it ("--data").
void check_not_input(const std::filesystem::path& output, std::string_view what,
                     const std::vector<std::filesystem::path>& inputs, const std::vector<std::string>& input_names);

// Writes `bytes` to `path` as above (check_replaceable first).
void write_file(const std::filesystem::path& path, std::string_view bytes);

// A file written piece by piece (a streamed model export): append() checks every byte, commit() fsyncs and renames
// `NAME.partial` over the target. Destroyed uncommitted, it removes the partial file and leaves the target as it was.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  OutputFile(OutputFile&&) = delete;
  OutputFile& operator=(OutputFile&&) = delete;

  void append(const void* data, std::size_t bytes);
  void commit();
  const std::filesystem::path& partial() const { return partial_; }

 private:
  std::filesystem::path path_, partial_;
  int fd_ = -1;
};

}  // namespace optimus
