// Distributed checkpoints of a GPT (model/gpt.hpp, any layout) and its AdamW (in the manner of
// PyTorch DCP and Megatron-Core's dist_checkpointing): every rank writes its own shards in parallel, and any layout
// loads them back.
//
// A checkpoint is a directory:
//
//   step_10/
//     rank_00000.safetensors ...   one per rank of replica 0 that holds state (a pipeline's numbered stage by stage:
//                                  stage s's rank r of its grid or group is s * ranks per stage + r): its shards of
//                                  every parameter (wte once, from the embedding's stage) and of AdamW's m and v,
//                                  each stored as the rectangles of the global GPT-2 tensor it covers (c_attn's
//                                  head-grouped columns are three rectangles per rank)
//     metadata.json                the commit marker: the model's config, the step, AdamW's settings and steps,
//                                  the saved layout (its mesh by name, schedule, chunks), each file's size and header
//                                  checksum, and for every tensor its global shape and rectangles: which file, where,
//                                  and an XXH3-64 checksum per 1 MiB chunk of its bytes; the whole carries its own
//                                  checksum
//
// Writes are atomic: every file goes to `.step_10.partial` beside the target and is fsynced; rank 0 writes
// metadata.json last, fsyncs the directory, and renames it to `step_10` (or, where `step_10` exists, exchanges the two
// atomically with renameat2 RENAME_EXCHANGE and removes the old one), then fsyncs the parent. A save killed at any
// point leaves every complete checkpoint complete and at most a `.partial` directory, which the next save of that name
// removes and which resolve() never picks. (Where the file system has no RENAME_EXCHANGE, replacing a checkpoint of
// the same name removes it first: only that re-save has a window.) All ranks must see the same file system (as DCP).
// One job saves into a directory at a time: two jobs saving one checkpoint path at once share its `.partial` name
// (train_gpt's --save directories are locked for their run: save_directory.hpp). A save replaces a checkpoint of its
// name, never anything else: a `step_10` without metadata.json is refused and kept.
//
// load() works on any layout — another q, another dp, another pipeline (pp, schedule, chunks), 1D or 2D — and reads
// only what each rank needs: for each of its rectangles, the intersecting saved rectangles' rows, in whole 1 MiB
// chunks, each verified against its checksum before use. A checkpoint that is missing, half-written (no metadata.json),
// of another model shape, damaged (a flipped byte, a truncated or deleted file) is refused with an optimus::Error
// naming the directory or the file, the same on every rank.
//
// Libraries: nlohmann-json for metadata.json and the safetensors headers, xxHash (XXH3-64) for the checksums.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "optimus/checkpoint/save_directory.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint {

// What resume needs besides the tensors. Data order and dropout masks are functions of (seed, step), so the step is
// the data position and the RNG counter; `extra` carries what a program wants back (its data file, say).
struct TrainingState {
  std::uint64_t step = 0;  // steps completed
  std::string run = {};    // the run's identity (save_directory.hpp); empty in checkpoints saved before runs had one
  std::map<std::string, std::string> extra;
};

// A checkpoint's description, read from its metadata.json alone (verified; no tensor is read).
struct Info {
  GptConfig config;
  TrainingState state;
  AdamWConfig adamw;
  int adamw_steps = 0;
  bool has_optimizer = false;
  std::string dtype;  // "F32" or "F64"
  Mesh mesh;          // the job it was saved from: replicas, pipeline stages, a stage's q x q grid or group of p ranks
  std::uint64_t bytes = 0;  // of all its tensor data
};

// Bytes this rank wrote or read in the last save or load (throughput, and tests of what was read).
struct IoStats {
  std::uint64_t bytes_written = 0, bytes_read = 0, chunks_verified = 0;
  double seconds = 0;
};

// Test hook: called on every rank at each stage of a save ("files written", "metadata written"); a test kills the
// process there to prove that a save interrupted at that point loses nothing.
using StageHook = std::function<void(std::string_view stage)>;

// Collective over the model's ranks (every stage, and the replicas): writes `dir` (its parent must exist). The
// optimizer may be null (parameters only). Each stage writes its own tensors, wte only from the embedding's stage; from
// a 1D group, tensors replicated over it are written once, by group rank 0.
template <class Family>
IoStats save(const std::filesystem::path& dir, Gpt<Family>& model, AdamW<typename Family::Value>* optimizer,
             const TrainingState& state, const StageHook& hook = nullptr);

// Collective: loads `dir` into a model of the same config on any layout (2D or 1D, any q or p, pp, chunks and dp) and,
// when given, the optimizer (the checkpoint must hold its state). Each stage reads the tensors it holds (wte on both
// end stages). Saved f32 loads into f64 exactly; f64 into f32 rounds.
template <class Family>
TrainingState load(const std::filesystem::path& dir, Gpt<Family>& model,
                   AdamW<typename Family::Value>* optimizer, IoStats* stats);

// One process, no collective: the checkpoint's description, with its metadata verified.
Info inspect(const std::filesystem::path& dir);

}  // namespace optimus::checkpoint
