// The files a program writes: never over one of its inputs, never over anything but a regular file, never
// half-written, and never two writers' bytes in one file. A file is written beside its target under a name of its
// writer's own (`.NAME.HOST.PID.RANDOM.partial`, created exclusively), every byte checked (a full disk fails the write,
// not later), fsynced, and renamed over the target, so a reader sees the old file or the whole new one. The rename
// refuses to replace a file another writer finished after this one started (the target's identity is taken at the
// start and compared, under a lock on the directory, before the rename; a target that did not exist must still not):
// of two runs writing one path at once, one refuses with a line naming the path. (Where the file system takes no flock
// on a directory — some NFS and Lustre mounts — two writers replacing an existing file are not told apart: the one
// that finishes last wins, wholly; a new target is still made by one writer only.) A writer that was killed leaves
// its partial file; the next writer of the same name on the same host removes those of processes that no longer run.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optimus {

// What a file that is not a regular one is, for messages: "a directory", "a character device", "a FIFO", ...
std::string kind_of(const std::filesystem::file_status& status);

// An input a program reads — a checkpoint's metadata.json and shards, a Hugging Face directory's config.json and
// safetensors files, a token or text file: throws unless `path` exists and is a regular file (or a link to one), naming
// it, `what` it is for ("--init's config.json") and what it is instead. Opening a FIFO would block until some writer
// came, reading a directory fails with a stream error that names no path.
void check_regular_input(const std::filesystem::path& path, std::string_view what);

// Throws unless `path` is new or a regular file (or a link to one): a directory, a device (/dev/full), a FIFO or a
// socket is never replaced. `what` names the output in the message ("--export", "the trace").
void check_replaceable(const std::filesystem::path& path, std::string_view what);

// Throws where `output` is one of `inputs` (the same file by any name: links, "./x" and "x") or lies inside one that is
// a directory (a checkpoint's files). Each input is named by `input_names` alongside it ("--data").
void check_not_input(const std::filesystem::path& output, std::string_view what,
                     const std::vector<std::filesystem::path>& inputs, const std::vector<std::string>& input_names);

// `path` below `dir` — "." where it is `dir` itself — or none where it lies elsewhere; both taken absolute, with every
// symbolic link of the part that exists resolved ("./run/" and "run" are one place).
std::optional<std::filesystem::path> path_within(const std::filesystem::path& path, const std::filesystem::path& dir);

// Throws where `output` is the directory `dir` or lies inside it (a run's save directory: its checkpoints and its lock
// are the run's), named by `dir_name` ("--save").
void check_not_within(const std::filesystem::path& output, std::string_view what, const std::filesystem::path& dir,
                      std::string_view dir_name);

// Makes a file-size limit (`ulimit -f`) an error of the write that meets it (EFBIG: "cannot write ... File too large",
// the partial file removed) instead of SIGXFSZ, which kills the process with nothing said. For a program's start
// (Context does it; a program without one calls it first).
void fail_writes_past_file_size_limit();

// Writes `bytes` to `path` as above (check_replaceable first).
void write_file(const std::filesystem::path& path, std::string_view bytes);

// `.NAME.HOST.PID.RANDOM` + suffix beside `target`: a temporary name of this writer's own (this process, and a random
// part for each call), for a file or a directory being built.
std::filesystem::path temporary_beside(const std::filesystem::path& target, std::string_view suffix);

// Removes `.NAME.HOST.*` + suffix entries beside `target` left by processes of this host that no longer run.
void remove_dead_writers_leftovers(const std::filesystem::path& target, std::string_view suffix);

// Renames `from` (a complete file or directory of this writer's) to `to`, which must not exist: refused (an
// optimus::Error naming `to`, and `from` removed) where another writer made `to` meanwhile.
void rename_new(const std::filesystem::path& from, const std::filesystem::path& to);

// A file written piece by piece (a streamed model export): append() checks every byte, commit() fsyncs and renames the
// writer's partial file over the target (see above). Destroyed uncommitted, it removes the partial file and leaves the
// target as it was.
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
  // What the target was when this writer started: the rename refuses a target that changed since.
  struct Identity {
    bool exists = false;
    unsigned long long device = 0, inode = 0, size = 0;
    long long modified_ns = 0;
    bool operator==(const Identity&) const = default;
  };
  static Identity identity_of(const std::filesystem::path& path);

  std::filesystem::path path_, partial_;
  Identity started_;
  int fd_ = -1;
};

}  // namespace optimus
