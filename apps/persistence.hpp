// train_gpt's persistence: what restores a run (--init, --resume) and saves it (--save), over the whole model or this
// rank's pipeline stage (templates over the model: Gpt2D's or Gpt1D's stage).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint_options.hpp"
#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/checkpoint/hf_bert.hpp"
#include "optimus/checkpoint/hf_llama.hpp"
#include "optimus/checkpoint/hf_gpt2.hpp"
#include "optimus/checkpoint/llmc_gpt2.hpp"
#include "optimus/checkpoint/save_directory.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/layers/adamw.hpp"

namespace optimus::apps {

// --save: saves `model` (the whole model, or this rank's pipeline stage) and `adamw` with `run_state` at every
// saving.every-th step and the last (of `steps`) to their step directory, keeping the newest saving.keep. `taken`: the
// save directory this run holds, on the rank that prunes and prints (null on the others).
template <class Model>
std::function<void(int step)> checkpoint_saver(Model& model, AdamW<float>& adamw,
                                               Communicator& world, const Saving& saving,
                                               const checkpoint::TrainingState& run_state, int steps,
                                               const checkpoint::SaveDirectory* taken) {
  return [&model, &adamw, &world, saving, run_state, steps, taken](int step) {
    if (step % saving.every != 0 && step != steps) return;
    checkpoint::TrainingState state = run_state;
    state.step = static_cast<std::uint64_t>(step);
    const std::filesystem::path dir = checkpoint::step_directory(saving.dir, state.step);
    const checkpoint::IoStats io = checkpoint::save(dir, model, &adamw, state);
    all_or_throw({&world}, [&] {
      if (taken && saving.keep > 0) taken->keep_newest(saving.keep);
    });
    if (taken) {
      std::printf("  saved %s (run %s; %.1f MB per rank in %.3f s)\n", dir.string().c_str(), state.run.c_str(),
                  static_cast<double>(io.bytes_written) / 1e6, io.seconds);
      std::fflush(stdout);
    }
  };
}

// What restores and saves a run: --init's file, --resume's checkpoint, --save's directory and the run's state.
// What --init names: a Hugging Face GPT-2 safetensors file, an llm.c checkpoint, or a Hugging Face Llama or BERT
// directory.
enum class InitFormat { hf_gpt2, llmc, hf_llama, hf_bert };
// How the run's header names it ("Hugging Face BERT").
const char* name_of(InitFormat format);

struct Persistence {
  std::optional<std::string> init;  // --init
  InitFormat init_format = InitFormat::hf_gpt2;
  std::optional<std::filesystem::path> resume;
  Saving saving;                    // saving.dir empty: no --save
  const checkpoint::SaveDirectory* taken = nullptr;  // --save's directory, held by rank 0 (null elsewhere)
  checkpoint::TrainingState run_state;
};

// What a run starts from: its first step to train, and --save's saver (empty without --save).
struct Restored {
  int first_step = 1;
  std::function<void(int step)> save;
};

// --init or --resume into `model` (the whole model or this rank's stage) and `optimizer`, and --save's saver for a run
// of `steps` steps.
template <class Model>
Restored restore(Model& model, AdamW<float>& optimizer, const Persistence& p, int steps, Communicator& world) {
  const bool root = world.rank() == 0;
  int first_step = 1;
  if (p.init) {
    switch (p.init_format) {
      case InitFormat::llmc: checkpoint::import_llmc(*p.init, model); break;
      case InitFormat::hf_gpt2: checkpoint::import_hf(*p.init, model); break;
      case InitFormat::hf_llama: checkpoint::import_hf_llama(*p.init, model); break;
      case InitFormat::hf_bert: checkpoint::import_hf_bert(*p.init, model); break;
    }
    if (root) std::printf("  initialized from %s (%s)\n", p.init->c_str(), name_of(p.init_format));
  }
  if (p.resume) {
    checkpoint::IoStats io;
    const checkpoint::TrainingState loaded = checkpoint::load(*p.resume, model, &optimizer, &io);
    first_step = static_cast<int>(loaded.step) + 1;
    if (root) {
      std::printf("  resumed from %s at step %d (run %s; read %.1f MB per rank in %.3f s)\n",
                  p.resume->string().c_str(), first_step - 1, loaded.run.c_str(),
                  static_cast<double>(io.bytes_read) / 1e6, io.seconds);
    }
  }
  Restored restored{.first_step = first_step, .save = {}};
  if (!p.saving.dir.empty()) {
    restored.save = checkpoint_saver(model, optimizer, world, p.saving, p.run_state, steps, p.taken);
  }
  return restored;
}

}  // namespace optimus::apps
