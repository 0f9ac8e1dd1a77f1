// The files a program writes, and the check of those it reads (output_file.hpp).
#include "optimus/core/output_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus {

namespace fs = std::filesystem;

std::string kind_of(const fs::file_status& s) {
  switch (s.type()) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

void check_regular_input(const fs::path& path, std::string_view what) {
  std::error_code error;
  const fs::file_status s = fs::status(path, error);  // through links
  OPTIMUS_CHECK(fs::exists(s), what, ": '", path.string(), "' does not exist");
  OPTIMUS_CHECK(fs::is_regular_file(s), what, ": '", path.string(), "' is ", kind_of(s), ", not a file to read");
}

void check_replaceable(const fs::path& path, std::string_view what) {
  std::error_code error;
  const fs::file_status s = fs::status(path, error);  // through links: what the name leads to
  if (error || !fs::exists(s)) return;                  // a new file (or a dangling link, replaced by the file)
  OPTIMUS_CHECK(fs::is_regular_file(s), what, ": '", path.string(), "' is ", kind_of(s),
                ": only a regular file (or a new one) is replaced");
}

void check_not_input(const fs::path& output, std::string_view what, const std::vector<fs::path>& inputs,
                     const std::vector<std::string>& input_names) {
  OPTIMUS_CHECK(inputs.size() == input_names.size(), "check_not_input: ", inputs.size(), " inputs but ",
                input_names.size(), " names");
  std::error_code error;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const fs::path& in = inputs[k];
    const bool same = fs::exists(output, error) && fs::exists(in, error) && fs::equivalent(output, in, error);
    const bool inside = fs::is_directory(in, error) && path_within(output, in);
    OPTIMUS_CHECK(!same && !inside, what, " '", output.string(), "' is ", same ? "" : "inside ", input_names[k],
                  "'s input '", in.string(), "': an output never replaces an input");
  }
}

std::optional<fs::path> path_within(const fs::path& path, const fs::path& dir) {
  std::error_code error;
  const fs::path rel =
      fs::weakly_canonical(fs::absolute(path), error).lexically_relative(fs::weakly_canonical(fs::absolute(dir), error));
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel;
}

void check_not_within(const fs::path& output, std::string_view what, const fs::path& dir, std::string_view dir_name) {
  const std::optional<fs::path> rel = path_within(output, dir);
  OPTIMUS_CHECK(!rel, what, " '", output.string(), "' is ", rel == fs::path(".") ? "" : "inside ", dir_name,
                "'s directory '", dir.string(),
                "', which holds the run's checkpoints and its lock: write it elsewhere");
}

void fail_writes_past_file_size_limit() { std::signal(SIGXFSZ, SIG_IGN); }

void write_file(const fs::path& path, std::string_view bytes) {
  OutputFile file(path);
  file.append(bytes.data(), bytes.size());
  file.commit();
}

namespace {

std::string this_host() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "host";
  std::string name(host);
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

// ".NAME.HOST." for `target`: the start of this host's writers' temporary names beside it.
std::string host_prefix(const fs::path& target) {
  std::string prefix = ".";
  prefix.append(target.filename().string()).append(".").append(this_host()).append(".");
  return prefix;
}

fs::path parent_of(const fs::path& target) {
  const fs::path parent = target.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// An exclusive lock on `dir` for as long as it lives, where the file system allows one (best effort: a rename with
// RENAME_NOREPLACE does not need it; comparing a target's identity before replacing it does, among Optimus' writers).
class DirectoryLock {
 public:
  explicit DirectoryLock(const fs::path& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);  // (releases the lock)
  }
  void sync() const {
    if (fd_ >= 0) ::fsync(fd_);
  }

 private:
  int fd_;
};

[[noreturn]] void written_meanwhile(const fs::path& target) {
  OPTIMUS_FAIL("'", target.string(), "' was written (or removed) by another writer while this one was writing it: it "
               "is left as that writer made it, and this writer's output is discarded (write to another path, or one "
               "at a time)");
}

}  // namespace

fs::path temporary_beside(const fs::path& target, std::string_view suffix) {
  std::random_device entropy;
  char random[16];
  std::snprintf(random, sizeof random, "%08x", static_cast<unsigned>(entropy()));
  std::string name = host_prefix(target);
  name.append(std::to_string(::getpid())).append(".").append(random).append(suffix);
  return parent_of(target) / name;
}

void remove_dead_writers_leftovers(const fs::path& target, std::string_view suffix) {
  const std::string prefix = host_prefix(target);
  std::error_code error;
  for (fs::directory_iterator it(parent_of(target), error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) continue;
    const std::string rest = name.substr(prefix.size());  // PID.RANDOM + suffix
    char* stop = nullptr;
    const long pid = std::strtol(rest.c_str(), &stop, 10);
    if (stop == rest.c_str() || *stop != '.' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

void rename_new(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  const int error = errno;
  std::error_code ignored;
  if (error == EEXIST || error == ENOTEMPTY) {
    fs::remove_all(from, ignored);
    written_meanwhile(to);
  }
  if ((error == EINVAL || error == ENOSYS) && fs::is_regular_file(fs::symlink_status(from, ignored))) {
    // A file system without RENAME_NOREPLACE (NFS): a hard link is made only where `to` does not exist, atomically.
    if (::link(from.c_str(), to.c_str()) == 0) {
      ::unlink(from.c_str());
      return;
    }
    if (errno == EEXIST) {
      ::unlink(from.c_str());
      written_meanwhile(to);
    }
  } else if (error == EINVAL || error == ENOSYS) {  // a directory there: check and rename under the lock
    const DirectoryLock lock(parent_of(to));
    if (fs::exists(fs::symlink_status(to, ignored))) {
      fs::remove_all(from, ignored);
      written_meanwhile(to);
    }
    if (::rename(from.c_str(), to.c_str()) == 0) return;
  }
  const int last = errno;
  fs::remove_all(from, ignored);
  OPTIMUS_FAIL("cannot rename '", from.string(), "' to '", to.string(), "': ", std::strerror(last));
}

OutputFile::Identity OutputFile::identity_of(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {.exists = true,
          .device = static_cast<unsigned long long>(st.st_dev),
          .inode = static_cast<unsigned long long>(st.st_ino),
          .size = static_cast<unsigned long long>(st.st_size),
          .modified_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

OutputFile::OutputFile(fs::path path) : path_(std::move(path)) {
  check_replaceable(path_, "output");
  remove_dead_writers_leftovers(path_, ".partial");
  started_ = identity_of(path_);
  partial_ = temporary_beside(path_, ".partial");
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  OPTIMUS_CHECK(fd_ >= 0, "cannot create '", partial_.string(), "' to write '", path_.string(), "': ",
                std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(partial_.c_str());
}

void OutputFile::append(const void* data, std::size_t bytes) {
  OPTIMUS_CHECK(fd_ >= 0, "'", path_.string(), "' is already committed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    OPTIMUS_CHECK(n > 0, "cannot write '", path_.string(), "' (through '", partial_.string(), "'): ",
                  n == 0 ? "nothing written" : std::strerror(errno));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void OutputFile::commit() {
  OPTIMUS_CHECK(fd_ >= 0, "'", path_.string(), "' is already committed");
  const bool synced = ::fsync(fd_) == 0;
  const int sync_error = errno;
  const bool closed = ::close(std::exchange(fd_, -1)) == 0;
  const int close_error = errno;
  if (!synced || !closed) ::unlink(partial_.c_str());
  OPTIMUS_CHECK(synced && closed, "cannot write '", path_.string(), "' (through '", partial_.string(), "'): ",
                std::strerror(synced ? close_error : sync_error));
  if (!started_.exists) {  // nothing to compare: the rename itself refuses a file made meanwhile
    rename_new(partial_, path_);
    DirectoryLock(parent_of(path_)).sync();
    return;
  }
  const DirectoryLock lock(parent_of(path_));  // the comparison and the rename, one writer at a time
  if (identity_of(path_) != started_) {
    ::unlink(partial_.c_str());
    written_meanwhile(path_);
  }
  try {
    check_replaceable(path_, "output");
  } catch (...) {
    ::unlink(partial_.c_str());
    throw;
  }
  if (::rename(partial_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(partial_.c_str());
    OPTIMUS_FAIL("cannot rename '", partial_.string(), "' to '", path_.string(), "': ", std::strerror(error));
  }
  lock.sync();
}

}  // namespace optimus
