// Save directories: a run's lock, its ownership and its branches (save_directory.hpp).
#include "optimus/checkpoint/save_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <span>
#include <sstream>
#include <thread>
#include <vector>

#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/core/error.hpp"

namespace optimus::checkpoint {

namespace fs = std::filesystem;

fs::path step_directory(const fs::path& save_dir, std::uint64_t step) {
  return save_dir / ("step_" + std::to_string(step));
}

bool is_checkpoint(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(path / "metadata.json", error);
}

std::vector<std::pair<std::uint64_t, fs::path>> complete_checkpoints(const fs::path& save_dir) {
  std::vector<std::pair<std::uint64_t, fs::path>> found;
  static const std::regex name("step_([0-9]{1,19})");
  for (const fs::directory_entry& e : fs::directory_iterator(save_dir)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name) && is_checkpoint(e.path())) {
      found.emplace_back(std::stoull(m[1].str()), e.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

fs::path resolve(const fs::path& path) {
  OPTIMUS_CHECK(fs::is_directory(path), "checkpoint '", path.string(), "' does not exist (no such directory)");
  if (fs::exists(path / "metadata.json")) return path;
  const auto found = complete_checkpoints(path);
  OPTIMUS_CHECK(!found.empty(), "'", path.string(), "' is neither a checkpoint (no metadata.json: a save that did not "
                "finish?) nor a save directory with a complete step_N checkpoint");
  return found.back().second;
}

std::string new_run_id() {
  std::random_device entropy;
  const std::uint64_t id = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

std::string shared_run_id(Communicator& world) {
  std::string id = world.rank() == 0 ? new_run_id() : std::string(16, ' ');
  std::vector<std::uint8_t> bytes(id.begin(), id.end());
  world.broadcast(std::span<std::uint8_t>(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

std::string step_names(const std::vector<std::uint64_t>& steps) {
  std::ostringstream out;
  for (std::size_t k = 0; k < steps.size(); ++k) out << (k ? ", " : "") << "step_" << steps[k];
  return out.str();
}

namespace {

// The first line of a held lock `file`: its holder's "process N on HOST". The holder writes it just after it locks a
// new file, so an empty file is read again for up to a second; empty if it stays so.
std::string lock_holder(const fs::path& file) {
  std::string holder;
  for (int attempt = 0; attempt < 100 && holder.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(file);
    std::getline(in, holder);
  }
  return holder;
}

// Takes DIR/.lock, writing the holder's process and host into it; throws naming the holder where another has it.
int take_lock(const fs::path& dir) {
  const fs::path file = dir / ".lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  OPTIMUS_CHECK(fd >= 0, "cannot open ", file.string(), " to lock the save directory: ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      const std::string holder = lock_holder(file);
      OPTIMUS_FAIL("save directory ", dir.string(), " is in use by another run (",
                   holder.empty() ? "it holds " + file.string() : holder, "): save to another directory, or wait for it");
    }
    OPTIMUS_FAIL("cannot lock ", file.string(), ": ", std::strerror(error));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = "process " + std::to_string(::getpid()) + " on " + host + "\n";
  // Written over the last holder's line, then cut to its length: a reader never finds the file empty once it was not.
  if (::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()) ||
      ::ftruncate(fd, static_cast<off_t>(holder.size())) != 0) {
    const int error = errno;
    ::close(fd);
    OPTIMUS_FAIL("cannot write ", file.string(), ": ", std::strerror(error));
  }
  return fd;
}

}  // namespace

SaveDirectory SaveDirectory::open(const fs::path& dir, const RunOrigin& origin) {
  std::error_code error;
  fs::create_directories(dir, error);
  OPTIMUS_CHECK(!error && fs::is_directory(dir), "cannot create the save directory ", dir.string(), ": ",
                error ? error.message() : "a file of that name is in the way");
  SaveDirectory taken(dir, take_lock(dir));
  // What is the directory's besides checkpoints: leftovers of saves and removals cut short (the lock holder's to
  // clear), and step_N entries that are not checkpoints (the user's: refused, never replaced).
  static const std::regex leftover("\\.step_[0-9]{1,19}\\.partial|\\.removing\\.step_[0-9]{1,19}");
  static const std::regex step_name("step_[0-9]{1,19}");
  std::vector<fs::path> leftovers;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, leftover)) leftovers.push_back(e.path());
    OPTIMUS_CHECK(!std::regex_match(name, step_name) || is_checkpoint(e.path()),
                  "save directory ", dir.string(), " holds ", name, ", which is not a checkpoint (no metadata.json): "
                  "a save of that step would replace it; move it out of the way, or save to another directory");
  }
  for (const fs::path& p : leftovers) fs::remove_all(p);
  // Its checkpoints by run: this run's after the resumed step go aside, any other run's stop this one.
  std::map<std::string, std::vector<std::uint64_t>> others;
  std::vector<std::uint64_t> later;
  for (const auto& [step, path] : complete_checkpoints(dir)) {
    const std::string run = inspect(path).state.run;
    if (run != origin.run) others[run].push_back(step);
    else if (origin.resumed_step && step > *origin.resumed_step) later.push_back(step);
  }
  if (!others.empty()) {
    std::ostringstream found;
    for (const auto& [run, steps] : others) {
      found << (found.tellp() > 0 ? "; " : "") << step_names(steps) << " of "
            << (run.empty() ? std::string("a run saved without an identity") : "run " + run);
    }
    OPTIMUS_FAIL("save directory ", dir.string(), " holds another run's checkpoints (", found.str(), "; this run is ",
                 origin.run.empty() ? std::string("one without an identity") : origin.run,
                 "): resume from them to continue that run, or save to another directory");
  }
  if (!later.empty()) {
    int k = 1;
    while (fs::exists(dir / "set_aside" / std::to_string(k))) ++k;
    taken.set_aside_ = dir / "set_aside" / std::to_string(k);
    fs::create_directories(taken.set_aside_);
    for (std::uint64_t step : later) fs::rename(step_directory(dir, step), step_directory(taken.set_aside_, step));
    taken.set_aside_steps_ = later;
  }
  return taken;
}

SaveDirectory::SaveDirectory(SaveDirectory&& other) noexcept
    : dir_(std::move(other.dir_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      set_aside_(std::move(other.set_aside_)),
      set_aside_steps_(std::move(other.set_aside_steps_)) {}

SaveDirectory::~SaveDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing the only descriptor releases the flock
}

void SaveDirectory::keep_newest(int keep) const {
  OPTIMUS_CHECK(keep >= 1, "keep_newest: keep must be >= 1, got ", keep);
  const auto found = complete_checkpoints(dir_);
  for (std::size_t k = 0; k + static_cast<std::size_t>(keep) < found.size(); ++k) {
    // Out of sight first (one rename, to .removing.step_N), then removed: a removal cut short leaves a hidden
    // leftover, never a step_N with metadata.json and missing shards.
    fs::path going = found[k].second;
    going.replace_filename(".removing." + going.filename().string());
    fs::remove_all(going);
    fs::rename(found[k].second, going);
    fs::remove_all(going);
  }
}

}  // namespace optimus::checkpoint
