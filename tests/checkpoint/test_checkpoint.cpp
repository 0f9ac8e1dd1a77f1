// Distributed checkpoints: exact resume, resharding to other layouts, atomic saves under SIGKILL, and refusal of
// damaged, incomplete or mismatched checkpoints (in-process ranks; the MPI path is train_gpt's CTest runs).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_INLINE_ALL  // header-only, as checkpoint/shards.cpp uses it
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "checkpoint_support.hpp"
#include "test_world.hpp"

namespace fs = std::filesystem;
using optimus::GlobalMatrix;
using optimus::test::batch_of;
using optimus::test::fresh_directory;
using optimus::test::gather_state;
using optimus::test::global_batch;
using optimus::test::small_config;

namespace {

struct Trainer {
  optimus::Grid grid;
  optimus::Gpt2D<float> model;
  optimus::AdamW<float> optimizer;

  Trainer(optimus::Communicator& world, int q)
      : grid(optimus::Grid::create(world, q)),
        model(grid, small_config()),
        optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{.lr = 3e-3}}) {}

  double step(std::uint64_t step) {
    std::vector<int> tokens, targets;
    batch_of(step, grid.dp_index(), grid.dp(), tokens, targets);
    model.zero_grad();
    const double loss = model.train_step(tokens, targets, global_batch / grid.dp(), step);
    optimizer.step();
    return loss;
  }

  // Every parameter and both moments, gathered (collective over the grid).
  std::map<std::string, GlobalMatrix> gather_all() { return gather_state(model, optimizer, grid.grid(), grid.device()); }
};

// The 1D baseline on all of `world` (one group of p ranks), trained on the same global batches.
struct Trainer1D {
  optimus::megatron::Group group;
  optimus::Gpt1D<float> model;
  optimus::AdamW<float> optimizer;

  explicit Trainer1D(optimus::Communicator& world)
      : group(world),
        model(group, small_config()),
        optimizer(group, model.parameters(), {.config = optimus::AdamWConfig{.lr = 3e-3}}) {}

  double step(std::uint64_t step) {
    std::vector<int> tokens, targets;
    batch_of(step, 0, 1, tokens, targets);
    model.zero_grad();
    const double loss = model.train_step(tokens, targets, global_batch, step);
    optimizer.step();
    return loss;
  }

  std::map<std::string, GlobalMatrix> gather_all() {
    return gather_state(model, optimizer, group.tp(), group.local().device());
  }
};

// Saves after `steps` steps at q = 2 (4 ranks), returning the losses and the gathered state.
struct Saved {
  std::vector<double> losses;
  std::map<std::string, GlobalMatrix> state;
};

Saved train_and_save(const fs::path& dir, int steps) {
  Saved saved;
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    Trainer t(w, 2);
    std::vector<double> losses;
    for (int s = 1; s <= steps; ++s) losses.push_back(t.step(static_cast<std::uint64_t>(s)));
    optimus::checkpoint::save(optimus::checkpoint::step_directory(dir, static_cast<std::uint64_t>(steps)), t.model,
                              &t.optimizer, {.step = static_cast<std::uint64_t>(steps), .extra = {{"data", "test"}}});
    auto state = t.gather_all();
    if (w.rank() == 0) {
      saved.losses = losses;
      saved.state = std::move(state);
    }
  });
  return saved;
}

// Loads `dir` on `ranks` in-process ranks as a q x q grid and returns the gathered state and the following losses.
Saved load_and_continue(const fs::path& dir, int ranks, int q, int more_steps, optimus::checkpoint::IoStats* io) {
  Saved out;
  std::mutex lock;
  optimus::test::run_in_process(ranks, [&](optimus::Communicator& w) {
    Trainer t(w, q);
    optimus::checkpoint::IoStats stats;
    const optimus::checkpoint::TrainingState state = optimus::checkpoint::load(dir, t.model, &t.optimizer, &stats);
    auto gathered = t.gather_all();
    std::vector<double> losses;
    for (int s = 1; s <= more_steps; ++s) losses.push_back(t.step(state.step + static_cast<std::uint64_t>(s)));
    std::lock_guard<std::mutex> guard(lock);
    if (w.rank() == 0) {
      out.state = std::move(gathered);
      out.losses = losses;
      CHECK(state.extra.at("data") == "test");
      CHECK(t.optimizer.steps_taken() == static_cast<int>(state.step) + more_steps);
    }
    if (io != nullptr && w.rank() == 0) *io = stats;
  });
  return out;
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// load() on a fresh q = 2 model must throw, on every rank, an error containing `expected`.
// Edits a checkpoint's metadata body and writes it back with a checksum that matches, as another tool might.
template <class Edit>
void rewrite_metadata(const fs::path& file, Edit edit) {
  std::ifstream in(file);
  nlohmann::json whole = nlohmann::json::parse(in);
  edit(whole["body"]);
  const std::string body = whole["body"].dump();
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(XXH3_64bits(body.data(), body.size())));
  whole["xxh3"] = sum;
  std::ofstream(file) << whole.dump();
}

void expect_refused(const fs::path& dir, const std::string& expected) {
  std::vector<std::string> messages(4);
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    Trainer t(w, 2);
    try {
      optimus::checkpoint::load(dir, t.model, &t.optimizer, nullptr);
    } catch (const optimus::Error& e) {
      messages[static_cast<std::size_t>(w.rank())] = e.message();
    }
  });
  CAPTURE(expected);
  for (const std::string& m : messages) {
    CAPTURE(m);
    CHECK(m.find(expected) != std::string::npos);
    CHECK(m == messages[0]);  // the same error on every rank
  }
}

}  // namespace

TEST_CASE("resume on the same layout is bitwise the uninterrupted run (dropout on)") {
  const fs::path dir = fresh_directory("resume");
  const Saved whole = [&] {
    Saved s;
    optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
      Trainer t(w, 2);
      std::vector<double> losses;
      for (int k = 1; k <= 8; ++k) losses.push_back(t.step(static_cast<std::uint64_t>(k)));
      if (w.rank() == 0) s.losses = losses;
    });
    return s;
  }();
  const Saved first = train_and_save(dir, 4);
  for (int k = 0; k < 4; ++k) CHECK(first.losses[static_cast<std::size_t>(k)] == whole.losses[static_cast<std::size_t>(k)]);
  optimus::checkpoint::IoStats io;
  const Saved resumed = load_and_continue(optimus::checkpoint::resolve(dir), 4, 2, 4, &io);
  REQUIRE(resumed.losses.size() == 4);
  for (int k = 0; k < 4; ++k) CHECK(resumed.losses[static_cast<std::size_t>(k)] == whole.losses[static_cast<std::size_t>(k + 4)]);
  CHECK(resumed.state == first.state);
  // Rank 0 reads exactly its own file's data on the same layout: its header plus what it wrote, no more.
  const optimus::checkpoint::Info info = optimus::checkpoint::inspect(dir / "step_4");
  CHECK(info.state.step == 4);
  CHECK(info.mesh.tensor == optimus::TensorParallel::two_d);
  CHECK(info.mesh.side == 2);
  CHECK(info.adamw_steps == 4);
  CHECK(io.bytes_read == fs::file_size(dir / "step_4" / "rank_00000.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint saved at q = 2 loads at q = 1, q = 3 and dp = 2 x q = 2: state bitwise, losses close") {
  const fs::path dir = fresh_directory("reshard");
  const Saved saved = train_and_save(dir, 3);
  const Saved same = load_and_continue(dir / "step_3", 4, 2, 2, nullptr);
  for (const auto& [ranks, q] : {std::pair{1, 1}, {9, 3}, {8, 2}}) {
    CAPTURE_BINDING(ranks);
    CAPTURE_BINDING(q);
    const Saved other = load_and_continue(dir / "step_3", ranks, q, 2, nullptr);
    REQUIRE(other.state.size() == saved.state.size());
    for (const auto& [name, value] : saved.state) {
      CAPTURE_BINDING(name);
      CHECK(other.state.at(name) == value);  // parameters and both moments, bit for bit
    }
    for (std::size_t k = 0; k < 2; ++k) {
      CHECK(std::abs(other.losses[k] - same.losses[k]) <= 1e-5 * std::abs(same.losses[k]));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("the mesh: recorded by name, and a checkpoint of format 1 (its older spelling) still loads bit for bit") {
  const fs::path dir = fresh_directory("mesh_record");
  train_and_save(dir, 2);
  const fs::path step = dir / "step_2";
  const optimus::checkpoint::Info info = optimus::checkpoint::inspect(step);
  CHECK(info.mesh.dp == 1);
  CHECK(info.mesh.pp == 1);
  CHECK(info.mesh.tensor == optimus::TensorParallel::two_d);
  CHECK(info.mesh.side == 2);
  const Saved now = load_and_continue(step, 4, 2, 1, nullptr);
  // What version 1 wrote for a 2D run: the kind, q, dp and pp beside the schedule.
  rewrite_metadata(step / "metadata.json", [](nlohmann::json& body) {
    nlohmann::json& layout = body["layout"];
    CHECK(layout.at("mesh") == nlohmann::json{{"dp", 1}, {"pp", 1}, {"tensor", "2d"}, {"side", 2}});
    layout.erase("mesh");
    layout["kind"] = "2d";
    layout["q"] = 2;
    layout["dp"] = 1;
    layout["pp"] = 1;
    body["version"] = 1;
  });
  const optimus::checkpoint::Info old = optimus::checkpoint::inspect(step);
  CHECK(old.mesh.describe() == info.mesh.describe());
  const Saved then = load_and_continue(step, 4, 2, 1, nullptr);
  CHECK(then.state == now.state);
  CHECK(then.losses == now.losses);
  // A 1D checkpoint of version 1 named p (and no replicas); a later version is refused naming it.
  rewrite_metadata(step / "metadata.json", [](nlohmann::json& body) {
    nlohmann::json& layout = body["layout"];
    layout.erase("q");
    layout.erase("dp");
    layout["kind"] = "1d";
    layout["p"] = 4;
  });
  const optimus::Mesh one_d = optimus::checkpoint::inspect(step).mesh;
  CHECK(one_d.tensor == optimus::TensorParallel::one_d);
  CHECK(one_d.side == 4);
  CHECK(one_d.dp == 1);
  rewrite_metadata(step / "metadata.json", [](nlohmann::json& body) { body["version"] = 3; });
  CHECK_THROWS_WITH_AS(optimus::checkpoint::inspect(step),
                       doctest::Contains("format version 3 (this build reads 1 to 2)"), optimus::Error);
  fs::remove_all(dir);
}

TEST_CASE("a q = 2 checkpoint loads into the 1D baseline at p = 4, and the 1D baseline's loads at q = 2 and p = 4") {
  const fs::path dir = fresh_directory("one_d");
  const Saved saved = train_and_save(dir, 3);
  const Saved uninterrupted = load_and_continue(dir / "step_3", 4, 2, 3, nullptr);  // steps 4, 5, 6 at q = 2
  // 2D -> 1D: the state bit for bit, two more steps within f32 rounding; then the 1D run saves step 5 and takes step 6.
  Saved one_d, one_d_saved;
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    Trainer1D t(w);
    const optimus::checkpoint::TrainingState state =
        optimus::checkpoint::load(dir / "step_3", t.model, &t.optimizer, nullptr);
    auto loaded = t.gather_all();
    std::vector<double> losses;
    for (std::uint64_t s = 1; s <= 2; ++s) losses.push_back(t.step(state.step + s));
    optimus::checkpoint::save(dir / "step_5", t.model, &t.optimizer, {.step = 5, .extra = {{"data", "test"}}});
    auto at_save = t.gather_all();
    losses.push_back(t.step(6));
    if (w.rank() == 0) {
      CHECK(state.step == 3);
      one_d = {.losses = losses, .state = std::move(loaded)};
      one_d_saved.state = std::move(at_save);
    }
  });
  REQUIRE(one_d.state.size() == saved.state.size());
  for (const auto& [name, value] : saved.state) {
    CAPTURE_BINDING(name);
    CHECK(one_d.state.at(name) == value);  // parameters and both moments
  }
  for (std::size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(std::abs(one_d.losses[k] - uninterrupted.losses[k]) <= 1e-5 * std::abs(uninterrupted.losses[k]));
  }
  // What the 1D run wrote: its layout, and each element once (replicated tensors by group rank 0 only).
  const optimus::checkpoint::Info info = optimus::checkpoint::inspect(dir / "step_5");
  CHECK(info.mesh.tensor == optimus::TensorParallel::one_d);
  CHECK(info.mesh.side == 4);
  CHECK(info.bytes == optimus::checkpoint::inspect(dir / "step_3").bytes);
  // 1D -> 2D at q = 2: the state bit for bit and step 6 within f32 rounding; 1D -> 1D: step 6 bit for bit.
  const Saved two_d = load_and_continue(dir / "step_5", 4, 2, 1, nullptr);
  for (const auto& [name, value] : one_d_saved.state) {
    CAPTURE_BINDING(name);
    CHECK(two_d.state.at(name) == value);
  }
  CHECK(std::abs(two_d.losses[0] - one_d.losses[2]) <= 1e-5 * std::abs(one_d.losses[2]));
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    Trainer1D t(w);
    optimus::checkpoint::load(dir / "step_5", t.model, &t.optimizer, nullptr);
    const double loss = t.step(6);
    if (w.rank() == 0) CHECK(loss == one_d.losses[2]);
  });
  fs::remove_all(dir);
}

TEST_CASE("damaged, incomplete, missing and mismatched checkpoints are refused naming the file, on every rank") {
  const fs::path dir = fresh_directory("damage");
  train_and_save(dir, 1);
  const fs::path good = dir / "step_1", bad = dir / "bad";
  const auto copy = [&] {
    fs::remove_all(bad);
    fs::copy(good, bad);
  };
  const std::string shard = (bad / "rank_00003.safetensors").string();
  copy();
  flip_byte(bad / "rank_00003.safetensors", fs::file_size(bad / "rank_00003.safetensors") - 5);
  expect_refused(bad, "'" + shard + "' is damaged: tensor ");
  copy();
  flip_byte(bad / "rank_00003.safetensors", 20);  // in the JSON header
  expect_refused(bad, "'" + shard + "' is damaged: its header's checksum does not match");
  copy();
  fs::resize_file(bad / "rank_00003.safetensors", fs::file_size(bad / "rank_00003.safetensors") - 100);
  expect_refused(bad, "'" + shard + "' is damaged: ");
  copy();
  fs::remove(bad / "rank_00003.safetensors");
  expect_refused(bad, "'" + shard + "' is missing");
  copy();
  flip_byte(bad / "metadata.json", 200);
  expect_refused(bad, "metadata.json' is damaged");
  copy();
  rewrite_metadata(bad / "metadata.json", [](nlohmann::json& body) { body["files"][0].erase("bytes"); });
  expect_refused(bad, "metadata.json' does not describe the checkpoint's files and tensors: [json.exception");
  copy();
  fs::remove(bad / "metadata.json");
  expect_refused(bad, "is incomplete: it has no metadata.json");
  expect_refused(dir / "nowhere", "does not exist");
  // Another model shape.
  std::vector<std::string> messages(4);
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    optimus::GptConfig other = small_config();
    other.hidden = 72;
    optimus::Gpt2D<float> model(grid, other);
    try {
      optimus::checkpoint::load(good, model, static_cast<optimus::AdamW<float>*>(nullptr), nullptr);
    } catch (const optimus::Error& e) {
      messages[static_cast<std::size_t>(w.rank())] = e.message();
    }
  });
  for (const std::string& m : messages) CHECK(m.find("is of another model: hidden 36 there, 72 here") != std::string::npos);
  // The undamaged original still loads.
  CHECK_NOTHROW(load_and_continue(good, 4, 2, 0, nullptr));
  fs::remove_all(dir);
}

TEST_CASE("a save killed (SIGKILL) before its commit leaves the previous checkpoint loadable and invisible itself") {
  for (const char* stage : {"files written", "metadata written"}) {
    CAPTURE(stage);
    const fs::path dir = fresh_directory("kill");
    const Saved before = train_and_save(dir, 2);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // A second save of the same step (replacing it) and a new one, each killed in the middle.
      optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
        Trainer t(w, 2);
        t.step(1);
        const auto kill = [&](std::string_view at) {
          if (at == stage && w.rank() == 0) ::raise(SIGKILL);
        };
        optimus::checkpoint::save(dir / "step_2", t.model, &t.optimizer, {.step = 2, .extra = {}}, kill);
      });
      ::_exit(0);  // not reached
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(fs::exists(dir / ".step_2.partial"));  // the interrupted save's files, never visible as a checkpoint
    CHECK(optimus::checkpoint::resolve(dir) == dir / "step_2");
    const Saved loaded = load_and_continue(dir / "step_2", 4, 2, 0, nullptr);
    CHECK(loaded.state == before.state);
    // The next save of that name clears the leftover.
    train_and_save(dir, 2);
    CHECK_FALSE(fs::exists(dir / ".step_2.partial"));
    fs::remove_all(dir);
  }
}

// A checkpoint of one step on one rank, saved as `step` of the run `run` (what the save directory sees of it).
void save_as(const fs::path& dir, std::uint64_t step, const std::string& run) {
  optimus::test::run_in_process(1, [&](optimus::Communicator& w) {
    Trainer t(w, 1);
    t.step(1);
    optimus::checkpoint::save(optimus::checkpoint::step_directory(dir, step), t.model, &t.optimizer,
                              {.step = step, .run = run, .extra = {}});
  });
}

TEST_CASE("save directories: the newest complete step, keep_newest, and a directory with none") {
  const fs::path dir = fresh_directory("dirs");
  for (std::uint64_t step : {1, 3, 2}) save_as(dir, step, "a1");
  fs::create_directory(dir / "step_9");  // no metadata.json: not complete
  std::ofstream(dir / "step_9" / "notes.txt") << "the user's";
  CHECK(optimus::checkpoint::resolve(dir) == dir / "step_3");
  CHECK(optimus::checkpoint::inspect(dir / "step_3").state.run == "a1");
  // A step_N that is not a checkpoint is the user's: a run would replace it when it saves that step, so taking the
  // directory is refused, and nothing is deleted; a save of that name refuses too.
  CHECK_THROWS_WITH_AS(optimus::checkpoint::SaveDirectory::open(dir, {.run = "a1", .resumed_step = 3}),
                       doctest::Contains("holds step_9, which is not a checkpoint (no metadata.json)"), optimus::Error);
  CHECK_THROWS_WITH_AS(save_as(dir, 9, "a1"), doctest::Contains("it exists and is not a checkpoint"), optimus::Error);
  CHECK(fs::exists(dir / "step_9" / "notes.txt"));
  fs::rename(dir / "step_9", dir / "notes_9");
  // Leftovers of a save and a removal cut short are the directory owner's: taking it clears them.
  fs::create_directory(dir / ".step_7.partial");
  fs::create_directory(dir / ".removing.step_0");
  {
    const auto taken = optimus::checkpoint::SaveDirectory::open(dir, {.run = "a1", .resumed_step = 3});
    CHECK(taken.set_aside().empty());
    CHECK_FALSE(fs::exists(dir / ".step_7.partial"));
    CHECK_FALSE(fs::exists(dir / ".removing.step_0"));
    CHECK(fs::exists(dir / "notes_9" / "notes.txt"));
    taken.keep_newest(2);
  }
  CHECK_FALSE(fs::exists(dir / "step_1"));
  CHECK(fs::exists(dir / "step_2"));
  CHECK(fs::exists(dir / "step_3"));
  const fs::path empty = fresh_directory("empty");
  CHECK_THROWS_WITH_AS(optimus::checkpoint::resolve(empty), doctest::Contains("is neither a checkpoint"),
                       optimus::Error);
  fs::remove_all(dir);
  fs::remove_all(empty);
}

TEST_CASE("a save directory belongs to one run: locked while taken, another run's checkpoints refused") {
  const std::string a = optimus::checkpoint::new_run_id(), b = optimus::checkpoint::new_run_id();
  CHECK(a.size() == 16);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
  const fs::path dir = fresh_directory("owned") / "runs" / "a";  // created with its parents
  {
    const auto taken = optimus::checkpoint::SaveDirectory::open(dir, {.run = a, .resumed_step = std::nullopt});
    CHECK(fs::is_directory(dir));
    // A second run (or the same one started twice) is refused while the first holds the directory.
    CHECK_THROWS_WITH_AS(optimus::checkpoint::SaveDirectory::open(dir, {.run = b, .resumed_step = std::nullopt}),
                         doctest::Contains(("is in use by another run (process " + std::to_string(::getpid())).c_str()),
                         optimus::Error);
    save_as(dir, 2, a);
    save_as(dir, 4, a);
  }
  // Released: a fresh run, or one resumed from elsewhere, finds run a's checkpoints and stops, naming them.
  for (const std::optional<std::uint64_t> resumed : {std::optional<std::uint64_t>(), std::optional<std::uint64_t>(2)}) {
    CHECK_THROWS_WITH_AS(optimus::checkpoint::SaveDirectory::open(dir, {.run = b, .resumed_step = resumed}),
                         doctest::Contains(("holds another run's checkpoints (step_2, step_4 of run " + a).c_str()),
                         optimus::Error);
  }
  CHECK(fs::exists(dir / "step_4"));
  // Checkpoints saved before runs had identities are another run's too.
  save_as(dir, 5, "");
  CHECK_THROWS_WITH_AS(optimus::checkpoint::SaveDirectory::open(dir, {.run = a, .resumed_step = 4}),
                       doctest::Contains("step_5 of a run saved without an identity"), optimus::Error);
  // A file where the directory should be.
  std::ofstream(dir / "file") << "x";
  CHECK_THROWS_WITH_AS(optimus::checkpoint::SaveDirectory::open(dir / "file", {.run = a, .resumed_step = 4}),
                       doctest::Contains("cannot create the save directory"), optimus::Error);
  fs::remove_all(dir.parent_path().parent_path());
}

TEST_CASE("a run resumed at an earlier step sets its later branch aside; keep_newest and resolve see only the new one") {
  const fs::path dir = fresh_directory("branches");
  for (std::uint64_t step : {2, 4, 6}) save_as(dir, step, "r");
  {
    // Rolled back to step 2: step_4 and step_6 go aside whole, and the new branch's step_4 is saved beside step_2.
    const auto taken = optimus::checkpoint::SaveDirectory::open(dir, {.run = "r", .resumed_step = 2});
    CHECK(taken.set_aside() == dir / "set_aside" / "1");
    CHECK(taken.set_aside_steps() == std::vector<std::uint64_t>{4, 6});
    CHECK(optimus::checkpoint::resolve(dir) == dir / "step_2");
    save_as(dir, 4, "r");
    save_as(dir, 5, "r");
    taken.keep_newest(2);
  }
  CHECK_FALSE(fs::exists(dir / "step_2"));
  CHECK(optimus::checkpoint::resolve(dir) == dir / "step_5");
  for (std::uint64_t step : {4, 6}) {
    CHECK(optimus::checkpoint::inspect(dir / "set_aside" / "1" / ("step_" + std::to_string(step))).state.step == step);
  }
  // Rolled back again: the next set-aside directory, the first left as it was.
  const auto again = optimus::checkpoint::SaveDirectory::open(dir, {.run = "r", .resumed_step = 4});
  CHECK(again.set_aside() == dir / "set_aside" / "2");
  CHECK(again.set_aside_steps() == std::vector<std::uint64_t>{5});
  CHECK(fs::exists(dir / "set_aside" / "1" / "step_6"));
  CHECK(optimus::checkpoint::resolve(dir) == dir / "step_4");
  fs::remove_all(dir);
}
