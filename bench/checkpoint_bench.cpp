// optimus-bench checkpoint: distributed checkpoint write and read throughput per rank, beside `dd` writing and reading
// the same bytes per rank to the same disk at the same time (the peer: what the disk gives a plain sequential file).
//
//   mpirun -np 4 optimus-bench checkpoint [--h 768] [--layers 12] [--heads 12] [--vocab 50257] [--seq 1024]
//                                         [--dir DIR] [--iters 3] [--json FILE]
//
// The model (GPT-2 124M by default) and AdamW live on a q x q grid of the world's ranks (p = q^2). A save writes the
// parameters and both moments (3 x 4 bytes per parameter, split over the ranks) with fsync and the atomic commit; a
// load reads them back with every chunk verified. `dd` runs as `dd bs=1M conv=fsync` for the write and `dd bs=1M`
// for the read, on every rank at once, on a file of the rank's checkpoint bytes. Times are the slowest rank's, the
// median over --iters; reads may come from the page cache for both (the same for both).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "bench_options.hpp"
#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/core/error.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace optimus::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `command` through the shell on every rank at once; the slowest rank's seconds.
double timed_shell(Communicator& world, const std::string& command) {
  world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(command.c_str());
  const double s = seconds_since(t0);
  OPTIMUS_CHECK(world.all_reduce(static_cast<double>(rc != 0), ReduceOp::max) == 0.0, "checkpoint bench: '", command,
                "' failed on some rank");
  return world.all_reduce(s, ReduceOp::max);
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
  if (world.rank() == 0) std::filesystem::create_directories(dir);
  world.barrier();

  const Grid grid = Grid::create(world, q);
  Gpt2D<float> model(grid, config);
  AdamW<float> optimizer(grid, model.parameters(), {.config = AdamWConfig{}});
  std::vector<double> save_s, load_s, dd_write_s, dd_read_s;
  checkpoint::IoStats saved, loaded;
  const std::filesystem::path target = dir / "step_0";
  const std::filesystem::path dd_file = dir / ("dd_rank_" + std::to_string(world.rank()));
  for (int it = 0; it < iters; ++it) {
    world.barrier();
    saved = checkpoint::save(target, model, &optimizer, {.step = 0, .extra = {}});
    save_s.push_back(world.all_reduce(saved.seconds, ReduceOp::max));
    world.barrier();
    checkpoint::load(target, model, &optimizer, &loaded);
    load_s.push_back(world.all_reduce(loaded.seconds, ReduceOp::max));
    const auto mib = (saved.bytes_written + (1 << 20) - 1) >> 20;
    dd_write_s.push_back(timed_shell(world, "dd if=/dev/zero of=" + dd_file.string() + " bs=1M count=" +
                                                std::to_string(mib) + " conv=fsync status=none"));
    dd_read_s.push_back(timed_shell(world, "dd if=" + dd_file.string() + " of=/dev/null bs=1M status=none"));
  }
  std::filesystem::remove(dd_file);
  const double written = world.all_reduce(static_cast<double>(saved.bytes_written), ReduceOp::max) / 1e6;
  const double read = world.all_reduce(static_cast<double>(loaded.bytes_read), ReduceOp::max) / 1e6;
  const double dd_mb = static_cast<double>((saved.bytes_written + (1 << 20) - 1) >> 20) * 1.048576;

  Report report({{"op", 6}, {"MB/rank", 9}, {"ckpt_s", 8}, {"ckpt_MB/s/rank", 15}, {"dd_MB", 8}, {"dd_s", 8},
                 {"dd_MB/s/rank", 13}, {"ckpt/dd", 8}});
  report.header(format("optimus-bench checkpoint: GPT (%lld layers, h %lld, vocabulary %lld, %lld parameters) with "
                       "AdamW on a %dx%d grid, %d ranks writing at once",
                       static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
                       static_cast<long long>(config.vocab), static_cast<long long>(config.parameter_count()), q, q,
                       world.size()));
  report.header("ckpt: save (shards, checksums, fsync, commit) and load (verified, resharding path); dd: bs=1M "
                "conv=fsync write and bs=1M read of as many bytes per rank; median of " + std::to_string(iters) +
                ", slowest rank; dir " + dir.string());
  const auto add = [&](const char* op, double mb, double s, double dd_s) {
    report.row({op, format("%.1f", mb), format("%.3f", s), format("%.0f", mb / s), format("%.1f", dd_mb),
                format("%.3f", dd_s), format("%.0f", dd_mb / dd_s), format("%.2f", (mb / s) / (dd_mb / dd_s))});
  };
  add("write", written, median(save_s), median(dd_write_s));
  add("read", read, median(load_s), median(dd_read_s));
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "checkpoint");
  }
  return 0;
}

}  // namespace optimus::bench
