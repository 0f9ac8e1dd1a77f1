// The files a program writes (output_file.hpp).
#include "optimus/core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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
  const fs::path out = fs::weakly_canonical(fs::absolute(output), error);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const fs::path& in = inputs[k];
    const bool same = fs::exists(output, error) && fs::exists(in, error) && fs::equivalent(output, in, error);
    const fs::path within = fs::weakly_canonical(fs::absolute(in), error);
    const auto rel = out.lexically_relative(within);
    const bool inside = fs::is_directory(in, error) && !rel.empty() && *rel.begin() != "..";
    OPTIMUS_CHECK(!same && !inside, what, " '", output.string(), "' is ", same ? "" : "inside ", input_names[k],
                  "'s input '", in.string(), "': an output never replaces an input");
  }
}

void write_file(const fs::path& path, std::string_view bytes) {
  OutputFile file(path);
  file.append(bytes.data(), bytes.size());
  file.commit();
}

OutputFile::OutputFile(fs::path path) : path_(std::move(path)), partial_(path_.string() + ".partial") {
  check_replaceable(path_, "output");
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  OPTIMUS_CHECK(fd_ >= 0, "cannot create '", partial_.string(), "': ", std::strerror(errno));
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
    OPTIMUS_CHECK(n > 0, "cannot write '", partial_.string(), "': ", n == 0 ? "nothing written" : std::strerror(errno));
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
  OPTIMUS_CHECK(synced && closed, "cannot write '", partial_.string(), "': ",
                std::strerror(synced ? close_error : sync_error));
  check_replaceable(path_, "output");  // nothing else appeared there meanwhile
  OPTIMUS_CHECK(::rename(partial_.c_str(), path_.c_str()) == 0, "cannot rename '", partial_.string(), "' to '",
                path_.string(), "': ", std::strerror(errno));
}

}  // namespace optimus
