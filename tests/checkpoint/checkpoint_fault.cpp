// A rank killed in the middle of a save, under MPI (4 ranks, a 2x2 grid):
//
//   checkpoint_fault save DIR     saves DIR/step_1, then starts DIR/step_2; rank 2 SIGKILLs itself once its shard
//                                 file is written, before the commit (the job dies: mpiexec exits non-zero)
//   checkpoint_fault verify DIR   the newest complete checkpoint is step_1; it loads, verified, and its parameters
//                                 equal the model saved in it (the same initialization and one training step)
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <optimus/optimus.hpp>
#include <string>

namespace {

// The model of step_1: the shared initialization and one AdamW step on a fixed batch.
struct Run {
  optimus::Grid grid;
  optimus::Gpt2D<float> model;
  optimus::AdamW<float> optimizer;

  explicit Run(optimus::Communicator& world)
      : grid(optimus::Grid::create(world, 2)),
        model(grid, optimus::GptConfig{.vocab = 40, .padded_vocab = 0, .max_seq = 8, .layers = 2, .hidden = 32,
                                       .heads = 4, .ffn = 64, .dropout = 0.1, .seed = 9, .block = {}}),
        optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{}}) {}

  void step(std::uint64_t step) {
    std::vector<int> tokens(4 * 8), targets(4 * 8);
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      tokens[k] = static_cast<int>((k * 7 + step) % 40);
      targets[k] = static_cast<int>((k * 3 + step) % 40);
    }
    model.zero_grad();
    model.train_step(tokens, targets, 4, step);
    optimizer.step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    OPTIMUS_CHECK(argc == 3, "usage: checkpoint_fault save|verify DIR");
    const std::string mode = argv[1];
    const std::filesystem::path dir = argv[2];
    optimus::Communicator& world = ctx.world();
    Run run(world);
    run.step(1);
    if (mode == "save") {
      if (world.rank() == 0) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
      }
      world.barrier();
      optimus::checkpoint::save(dir / "step_1", run.model, &run.optimizer, {.step = 1, .extra = {}});
      run.step(2);
      const auto kill = [&](std::string_view stage) {
        if (stage == "files written" && world.rank() == 2) {
          std::printf("checkpoint_fault: rank 2 kills itself in the middle of saving step_2\n");
          std::fflush(stdout);
          ::raise(SIGKILL);
        }
      };
      optimus::checkpoint::save(dir / "step_2", run.model, &run.optimizer, {.step = 2, .extra = {}}, kill);
      std::printf("checkpoint_fault: the save was not interrupted\n");
      return 0;
    }
    const std::filesystem::path newest = optimus::checkpoint::resolve(dir);
    OPTIMUS_CHECK(newest == dir / "step_1", "the newest complete checkpoint is ", newest.string(), ", not step_1");
    OPTIMUS_CHECK(std::filesystem::exists(dir / ".step_2.partial"), "the interrupted save left no .partial directory");
    const auto expected = run.model.gather(false);
    Run loaded(world);
    optimus::checkpoint::load(newest, loaded.model, &loaded.optimizer, nullptr);
    OPTIMUS_CHECK(loaded.model.gather(false) == expected, "step_1 loaded other parameters than were saved");
    if (world.rank() == 0) std::printf("checkpoint_fault: step_1 loads and verifies after the killed save\n");
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("checkpoint_fault", e);
  }
}
