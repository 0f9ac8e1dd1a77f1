// train_gpt's checkpoint options: --save, --save-every and --keep, and the run a checkpoint (--resume) or a GPT-2 file
// (--init) imposes on the options.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "optimus/checkpoint/checkpoint.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/config/gpt_config.hpp"

namespace optimus::apps {

// --save DIR --save-every N --keep K.
struct Saving {
  std::filesystem::path dir;  // empty: no saves
  int every = 0, keep = 0;    // keep 0: all
};

// Reads them (--save-every and --keep need --save); the run takes DIR (checkpoint::SaveDirectory) once it knows its
// identity.
Saving saving_options(const cli::Options& o);

// A double as text that reads back to the same bits.
std::string format_exact(double value);

// What the training data asks of a model's vocabulary: at least `ids` ids (its largest id + 1), and exactly that many
// for a text (whose ids are its characters').
struct DataVocab {
  std::int64_t ids = 0;
  bool exact = false;
  std::string characters;  // a text's: id -> character (its ids mean these); empty for token data
};

// The text's characters as a checkpoint records them (the run state's "characters": two hex digits each), and back;
// a value that is not such hex throws naming it.
std::string characters_record(const std::string& characters);
std::string characters_of(const std::string& record);
// The ids a model of `blocks` needs for `data`: a text's characters and, for a masked LM, the special ids after them.
DataVocab for_blocks(const DataVocab& data, const BlockConfig& blocks);
// Throws unless a vocabulary of `vocab` ids, `whose` (for the message), fits `data`.
void check_vocab_fits(const DataVocab& data, std::int64_t vocab, const std::string& whose);

// --resume: the checkpoint's model shape, seed and dropout, its run's sequence length (`seq`), and the run's --steps,
// --lr and --batch unless given again; a shape option, --seq, --seed or --dropout given with another value than the
// checkpoint's is refused, and so are --steps before the checkpoint's step and, unless `finished_ok`, --steps at it.
void adopt_checkpoint(const cli::Options& o, const checkpoint::Info& info, int dp, const DataVocab& data,
                      GptConfig& config, std::int64_t& seq, std::int64_t& batch, int& steps, double& lr,
                      bool finished_ok);

// How messages name the model's shape and layout (ConfigNames): train_gpt's options (--hidden, --q), or where the shape
// is a file's (--init, --resume) its fields, naming the file; the grid side as the plan's under --plan auto.
ConfigNames config_names(const cli::Options& o);

// --export FILE checked before training, against what the export at the end would refuse: a GPT-2 file (.bin: llm.c's,
// else safetensors) holds GPT-2's blocks only, a Llama's blocks go to a new Hugging Face directory (FILE must not exist),
// and no format holds other blocks.
void check_export_target(const cli::Options& o, const GptConfig& config);

// --init FILE: the model's shape is the file's; the data's ids must be among its vocabulary, and shape options given
// (--vocab among them) must agree. `seq`: --seq, any length up to the file's positions (else the file's); a learned
// position table stays whole in config.max_seq, rotary positions take `seq`.
void adopt_shape(const cli::Options& o, const GptConfig& file, const std::string& path, const DataVocab& data,
                 GptConfig& config, std::int64_t& seq);

}  // namespace optimus::apps
