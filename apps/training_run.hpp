// train_gpt's run in named steps (read, place, start, build, export), each collective over the run's world, and the
// held-out loss: what train_gpt runs once and optimus-sweep runs for each member on the member's own world.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <optimus/optimus.hpp>

#include "optimus/device/rank_device.hpp"
#include "optimus/plan/build.hpp"
#include "optimus/programs/cli.hpp"
#include "persistence.hpp"
#include "placement.hpp"
#include "training_loop.hpp"

namespace optimus::apps {

// Where the run trains: the layout's place on the host — also the reference check's, in f64 — and on the rank's
// device when --device asks for one, executing in --gemm's math with --check-finite's checks. Declared in the order
// they must be destroyed in reverse: the places before the device they live on.
struct Places {
  std::unique_ptr<DeviceRuntime> own_device;  // this process's device (one rank per process)
  std::unique_ptr<RankDevice> rank_device;
  std::optional<plan::Place> host, training;
};

// Where the run starts: --init's file or --resume's checkpoint (the model takes their shape, the run the checkpoint's
// identity and schedule), and --save's directory, taken by rank 0 for the whole run.
struct Start {
  InitFormat init_format = InitFormat::hf_gpt2;
  std::int64_t init_context = 0;  // a Hugging Face Llama's max_position_embeddings
  std::optional<std::filesystem::path> resume;
  checkpoint::Info resumed;
  Saving saving;
  std::string run;  // the run's identity (optimus/checkpoint/save_directory.hpp)
  std::optional<checkpoint::SaveDirectory> taken;
};

// The model this rank trains (its stage, 2D or 1D), its AdamW and the training loop's view of them.
struct Trained {
  plan::AnyGpt<float> model;
  std::unique_ptr<AdamW<float>> optimizer;
  Trainee trainee;
  int first_step = 1;
};

// Step 1, read: the data (--data or --text), the model's shape and blocks, the batch, the layout (the plan's, or the
// options'), the schedule and the training's options, each checked against the others before any work.
Setup read_setup(Communicator& world, const cli::Options& o, const Placement& where);
// Step 2, place: the layout's place on the host (the reference check's, and where start checks the model's shape).
// Collective over `world`.
Places place(Communicator& world, const Setup& setup);
// Step 3, start: collective over `world`; adopts --init's or --resume's shape into setup, then checks the model's
// shape on its place — named as the user gave it (--hidden, --q; a file's fields) — and the data, before any work.
Start start(Communicator& world, const cli::Options& o, Setup& setup, const Places& places);
// Step 3 continued, the place the run trains on (places.training): the host's, or, where --device asks for one, the
// rank's device — its GEMM engine first, then (on a simulated device of the run's own) the model's device memory
// checked against --device-memory (device_memory.hpp), then the layout's grids and their buffers. After start: the
// model's shape is final. Collective over `world`.
void place_training(Communicator& world, const cli::Options& o, const Placement& where, const Setup& setup,
                    Places& places);
// Step 5, build: the host memory the run needs, the first step checked against the reference, then the model as laid
// out, started from --init or --resume (restore), with --save's saver. Collective over `world`.
Trained build(Communicator& world, const cli::Options& o, Setup& setup, const Places& places, const Start& s,
              const Placement& where);
// Step 7, export: the trained model to --export — llm.c's checkpoint (.bin), a Hugging Face Llama directory (Llama's
// blocks) or GPT-2 safetensors — streamed one tensor at a time. Collective over the model's ranks; rank 0 (`root`)
// prints where it went.
void export_model(const cli::Options& o, const Setup& setup, const Start& s, Trained& t, bool root);
// The mean loss of 8 held-out batches (drawn with the seed after the model's), without dropout. Collective over
// the model's ranks.
double held_out_loss(const Setup& setup, const Grid& grid, const Trainee& trainee);

}  // namespace optimus::apps
