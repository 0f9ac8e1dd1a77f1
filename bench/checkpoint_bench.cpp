// optimus-bench checkpoint: distributed checkpoint write and read throughput per rank, beside a plain file of the same
// bytes per rank written and read on the same disk at the same time (the peer: what the disk gives one sequential
// file).
//
//   mpirun -np 4 optimus-bench checkpoint [--h 768] [--layers 12] [--heads 12] [--vocab 50257] [--seq 1024]
//                                         [--dir DIR] [--iters 3] [--json FILE]
//
// The model (GPT-2 124M by default) and AdamW live on a q x q grid of the world's ranks (p = q^2). A save writes the
// parameters and both moments (3 x 4 bytes per parameter, split over the ranks) with fsync and the atomic commit; a
// load reads them back with every chunk verified. The plain file is written as a checkpoint's files are (OutputFile:
// 1 MiB appends, each byte checked, fsync, renamed into place) and read back in 1 MiB reads, on every rank at once, as
// many bytes as the rank's checkpoint. Times are the slowest rank's, the median over --iters; reads may come from the
// page cache for both (the same for both). No shell: --dir is a path, never a command. DIR is taken as a save directory
// is (checkpoint/save_directory.hpp: locked while the bench runs; one holding a training run's checkpoints, or locked
// by a running one, is refused) and left as it was found: the bench's checkpoint and files are removed at the end.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "bench_options.hpp"
#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/checkpoint/save_directory.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/core/error.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace optimus::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `io` on every rank at once; the slowest rank's seconds. An error on any rank is every rank's (all_or_throw).
double timed_io(Communicator& world, const std::function<void()>& io) {
  world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  all_or_throw({&world}, io);
  return world.all_reduce(seconds_since(t0), ReduceOp::max);
}

constexpr std::size_t kPiece = std::size_t{1} << 20;  // the plain file's writes and reads

// The plain file: `bytes` zero bytes written as a checkpoint's files are (OutputFile: checked, fsynced, renamed).
void write_plain(const std::filesystem::path& path, std::uint64_t bytes) {
  const std::vector<char> zeros(kPiece, 0);
  OutputFile file(path);
  for (std::uint64_t done = 0; done < bytes; done += kPiece) {
    file.append(zeros.data(), static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, bytes - done)));
  }
  file.commit();
}

// The plain file read back whole; throws naming it where it is short or cannot be read.
void read_plain(const std::filesystem::path& path, std::uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> piece(kPiece);
  std::uint64_t done = 0;
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
    done += static_cast<std::uint64_t>(in.gcount());
  }
  OPTIMUS_CHECK(!in.bad() && done == bytes, "checkpoint bench: read ", done, " bytes of ", bytes, " from '",
                path.string(), "'");
}

}  // namespace

int run_checkpoint_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("checkpoint"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  const int q = static_cast<int>(std::lround(std::sqrt(world.size())));
  OPTIMUS_CHECK(q * q == world.size(), "checkpoint bench: world size ", world.size(), " is not a square");
  const GptConfig config{.vocab = o.integer("vocab", 50257), .padded_vocab = 0, .max_seq = o.integer("seq", 1024),
                         .layers = o.integer("layers", 12), .hidden = o.integer("h", 768),
                         .heads = o.integer("heads", 12), .ffn = 4 * o.integer("h", 768), .dropout = 0.0, .seed = 1,
                         .block = {}};
  const int iters = static_cast<int>(o.integer("iters", 3));
  OPTIMUS_CHECK(iters >= 1, "checkpoint bench: --iters must be >= 1, got ", iters);
  const std::filesystem::path dir = o.text("dir", "checkpoint-bench");
  // Taken as a run takes its save directory, by rank 0 for the whole bench (a new identity: another run's checkpoints
  // there refuse it); a directory it made is removed at the end.
  const bool made = world.rank() == 0 && !std::filesystem::exists(dir);
  const std::string run = checkpoint::shared_run_id(world);
  std::optional<checkpoint::SaveDirectory> taken;
  all_or_throw({&world}, [&] {
    if (world.rank() == 0) taken.emplace(checkpoint::SaveDirectory::open(dir, {.run = run, .resumed_step = {}}));
  });

  const Grid grid = Grid::create(world, q);
  Gpt2D<float> model(grid, config);
  AdamW<float> optimizer(grid, model.parameters(), {.config = AdamWConfig{}});
  std::vector<double> save_s, load_s, plain_write_s, plain_read_s;
  checkpoint::IoStats saved, loaded;
  const std::filesystem::path target = checkpoint::step_directory(dir, 0);
  const std::filesystem::path plain = dir / ("plain_rank_" + std::to_string(world.rank()));
  for (int it = 0; it < iters; ++it) {
    world.barrier();
    saved = checkpoint::save(target, model, &optimizer, {.step = 0, .run = run, .extra = {}});
    save_s.push_back(world.all_reduce(saved.seconds, ReduceOp::max));
    world.barrier();
    checkpoint::load(target, model, &optimizer, &loaded);
    load_s.push_back(world.all_reduce(loaded.seconds, ReduceOp::max));
    plain_write_s.push_back(timed_io(world, [&] { write_plain(plain, saved.bytes_written); }));
    plain_read_s.push_back(timed_io(world, [&] { read_plain(plain, saved.bytes_written); }));
  }
  // The directory left as it was found: the bench's files, and the directory itself where the bench made it.
  world.barrier();
  std::filesystem::remove(plain);
  world.barrier();
  if (world.rank() == 0) {
    std::filesystem::remove_all(target);
    taken.reset();
    if (made) std::filesystem::remove_all(dir);
  }
  const double written = world.all_reduce(static_cast<double>(saved.bytes_written), ReduceOp::max) / 1e6;
  const double read = world.all_reduce(static_cast<double>(loaded.bytes_read), ReduceOp::max) / 1e6;
  const double plain_mb = written;

  Report report({{"op", 6}, {"MB/rank", 9}, {"ckpt_s", 8}, {"ckpt_MB/s/rank", 15}, {"file_MB", 8}, {"file_s", 8},
                 {"file_MB/s/rank", 15}, {"ckpt/file", 10}});
  report.header(format("optimus-bench checkpoint: GPT (%lld layers, h %lld, vocabulary %lld, %lld parameters) with "
                       "AdamW on a %dx%d grid, %d ranks writing at once",
                       static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
                       static_cast<long long>(config.vocab), static_cast<long long>(config.parameter_count()), q, q,
                       world.size()));
  report.header("ckpt: save (shards, checksums, fsync, commit) and load (verified, resharding path); file: one plain "
                "file of as many bytes per rank, 1 MiB writes (checked, fsync, rename) and 1 MiB reads; median of " +
                std::to_string(iters) + ", slowest rank; dir " + dir.string());
  const auto add = [&](const char* op, double mb, double s, double file_s) {
    report.row({op, format("%.1f", mb), format("%.3f", s), format("%.0f", mb / s), format("%.1f", plain_mb),
                format("%.3f", file_s), format("%.0f", plain_mb / file_s),
                format("%.2f", (mb / s) / (plain_mb / file_s))});
  };
  add("write", written, median(save_s), median(plain_write_s));
  add("read", read, median(load_s), median(plain_read_s));
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "checkpoint");
  }
  return 0;
}

}  // namespace optimus::bench
