// Save directories: where a training run writes its checkpoints (checkpoint.hpp), one `step_N` subdirectory each.
//
// A save directory belongs to one run at a time. A run has an identity (`new_run_id`): a fresh run draws one, a
// resumed run carries on the identity of the checkpoint it resumed, and every checkpoint records it (TrainingState).
// `SaveDirectory::open` is how a run takes a directory:
//
//   * it holds DIR/.lock (flock) for as long as the object lives, so two runs never write one directory at once (the
//     second is refused at once, naming the holder; the kernel drops the lock when the holder dies, even by SIGKILL);
//   * it refuses a directory holding complete checkpoints of another run, naming them: a run continues only its own;
//   * it refuses a `step_N` entry that is not a checkpoint (no metadata.json: the user's), which a save would replace,
//     and removes the leftovers of saves and removals cut short (`.step_N.partial`, `.removing.step_N`: the holder's);
//   * a run resumed at step s that finds its own checkpoints after s there (it rolls back, after a loss spike say) sets
//     those aside, moving them whole to DIR/set_aside/K/ — the branch it abandons — so that `resolve(DIR)` and
//     `keep_newest` only ever see the branch being trained. Nothing is deleted but by keep_newest.
//
// Checkpoints still being written are `.step_N.partial` directories, never seen as checkpoints (checkpoint.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus::checkpoint {

std::filesystem::path step_directory(const std::filesystem::path& save_dir, std::uint64_t step);

// Whether `path` is a checkpoint: a directory holding a regular metadata.json (whether its contents check out is
// load's and inspect's to say).
bool is_checkpoint(const std::filesystem::path& path);

// The complete checkpoints (`step_N` holding metadata.json) of a save directory, oldest first.
std::vector<std::pair<std::uint64_t, std::filesystem::path>> complete_checkpoints(
    const std::filesystem::path& save_dir);

// A checkpoint, or a save directory's newest complete checkpoint; throws naming the path where there is none.
std::filesystem::path resolve(const std::filesystem::path& path);

// "step_4, step_6": the checkpoints of `steps`, named as in a save directory.
std::string step_names(const std::vector<std::uint64_t>& steps);

// A new run's identity: 16 hex digits from the system's entropy source.
std::string new_run_id();
// The same drawn by `world`'s rank 0 and the same on every rank (collective).
std::string shared_run_id(Communicator& world);

// Where a run stands when it takes a save directory.
struct RunOrigin {
  std::string run;                           // the run's identity (new_run_id, or the resumed checkpoint's)
  std::optional<std::uint64_t> resumed_step;  // the step it resumed from; none for a fresh run
};

class SaveDirectory {
 public:
  // One process (the run's first rank): creates `dir` where it does not exist, takes its lock, checks that its
  // checkpoints are this run's, and sets aside those after the resumed step. Throws an optimus::Error naming the
  // directory, the other run or the lock's holder.
  static SaveDirectory open(const std::filesystem::path& dir, const RunOrigin& origin);

  SaveDirectory(SaveDirectory&& other) noexcept;
  SaveDirectory& operator=(SaveDirectory&&) = delete;
  SaveDirectory(const SaveDirectory&) = delete;
  SaveDirectory& operator=(const SaveDirectory&) = delete;
  ~SaveDirectory();  // releases the lock

  const std::filesystem::path& path() const { return dir_; }
  // What open() moved out of the way (empty, or DIR/set_aside/K and the steps it holds).
  const std::filesystem::path& set_aside() const { return set_aside_; }
  const std::vector<std::uint64_t>& set_aside_steps() const { return set_aside_steps_; }

  // Removes all but the newest `keep` (>= 1) complete checkpoints, each renamed out of sight (`.removing.step_N`)
  // before its files go; the branch set aside is never touched.
  void keep_newest(int keep) const;

 private:
  SaveDirectory(std::filesystem::path dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}

  std::filesystem::path dir_;
  int lock_fd_ = -1;
  std::filesystem::path set_aside_;
  std::vector<std::uint64_t> set_aside_steps_;
};

}  // namespace optimus::checkpoint
