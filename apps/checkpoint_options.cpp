// train_gpt's checkpoint options (checkpoint_options.hpp).
#include "checkpoint_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "optimus/core/error.hpp"
#include "masked_data.hpp"
#include "optimus/programs/arch_options.hpp"

namespace optimus::apps {

Saving saving_options(const cli::Options& o) {
  Saving s;
  OPTIMUS_CHECK(o.has("save") || (!o.has("save-every") && !o.has("keep")), "--save-every and --keep need --save DIR");
  if (!o.has("save")) return s;
  s.dir = o.text("save", "");
  s.every = static_cast<int>(o.integer("save-every", 1 << 30));
  s.keep = static_cast<int>(o.integer("keep", 0));
  return s;
}

std::string format_exact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string characters_record(const std::string& characters) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (const char ch : characters) {
    const auto byte = static_cast<unsigned char>(ch);
    out.push_back(digits[byte >> 4]);
    out.push_back(digits[byte & 15]);
  }
  return out;
}

std::string characters_of(const std::string& record) {
  const auto digit = [&](char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    OPTIMUS_FAIL("the checkpoint's 'characters' is '", record, "', not hex digits");
  };
  OPTIMUS_CHECK(record.size() % 2 == 0, "the checkpoint's 'characters' is '", record, "', not pairs of hex digits");
  std::string out;
  for (std::size_t k = 0; k < record.size(); k += 2) {
    out.push_back(static_cast<char>(digit(record[k]) * 16 + digit(record[k + 1])));
  }
  return out;
}

namespace {

// "'e' (101)": a character for messages, printable or not.
std::string shown(char ch) {
  const auto byte = static_cast<unsigned char>(ch);
  const std::string code = " (" + std::to_string(byte) + ")";
  return byte >= 32 && byte < 127 ? std::string("'") + ch + "'" + code : "byte" + code;
}

}  // namespace

DataVocab for_blocks(const DataVocab& data, const BlockConfig& blocks) {
  DataVocab d = data;
  if (d.exact && trains_masked(blocks)) d.ids += kTextSpecialIds;
  return d;
}

void check_vocab_fits(const DataVocab& data, std::int64_t vocab, const std::string& whose) {
  if (data.exact) {
    OPTIMUS_CHECK(vocab == data.ids, whose, " vocabulary has ", vocab, " ids but the text's characters are ", data.ids,
                  " (train on the text it was made for)");
    return;
  }
  OPTIMUS_CHECK(vocab >= data.ids, "the token data holds id ", data.ids - 1, ", outside ", whose, " vocabulary of ",
                vocab, " ids");
}

void adopt_checkpoint(const cli::Options& o, const checkpoint::Info& info, int dp, const DataVocab& data,
                      GptConfig& config, std::int64_t& seq, std::int64_t& batch, int& steps, double& lr,
                      bool finished_ok) {
  const auto same = [&](const char* option, std::int64_t there) {
    OPTIMUS_CHECK(!o.has(option) || o.integer(option, 0) == there, "--", option, " ", o.integer(option, 0),
                  " differs from the checkpoint's ", there);
  };
  same("layers", info.config.layers);
  same("hidden", info.config.hidden);
  same("heads", info.config.heads);
  same("ffn", info.config.ffn);
  same("vocab", info.config.vocab);
  same("seed", static_cast<std::int64_t>(info.config.seed));
  // Dropout is part of the model's arithmetic (its masks follow the seed and the step): resumed, it stays the run's.
  OPTIMUS_CHECK(!o.has("dropout") || o.real("dropout", 0) == info.config.dropout, "--dropout ", o.real("dropout", 0),
                " differs from the checkpoint's ", info.config.dropout, " (a resumed run keeps its dropout)");
  const BlockConfig& blocks = info.config.block;
  cli::check_arch(o, blocks, "the checkpoint's");
  OPTIMUS_CHECK(!o.has("kv-heads") || o.integer("kv-heads", 0) == info.config.kv_heads(), "--kv-heads ",
                o.integer("kv-heads", 0), " differs from the checkpoint's ", info.config.kv_heads());
  OPTIMUS_CHECK(!o.has("rope-theta") || (blocks.rope && o.real("rope-theta", 0) == blocks.rope->theta),
                "--rope-theta ", o.real("rope-theta", 0), " differs from the checkpoint's ",
                blocks.rope ? std::to_string(blocks.rope->theta) : std::string("learned positions"));
  check_vocab_fits(for_blocks(data, blocks), info.config.vocab, "the checkpoint's");
  const auto& extra = info.state.extra;
  // A text model's ids are its text's characters: the same count of other characters would be remapped silently.
  if (data.exact && extra.count("characters")) {
    const std::string there = characters_of(extra.at("characters"));
    const auto differs = std::mismatch(there.begin(), there.end(), data.characters.begin(), data.characters.end());
    if (differs.first != there.end() || differs.second != data.characters.end()) {
      const auto id = differs.first - there.begin();
      const std::string trained = extra.count("text") ? " ('" + extra.at("text") + "')" : "";
      OPTIMUS_FAIL("the checkpoint's model was trained on a text of other characters", trained, ": id ", id, " is ",
                   differs.first != there.end() ? shown(*differs.first) : std::string("none"), " there and ",
                   differs.second != data.characters.end() ? shown(*differs.second) : std::string("none"),
                   " in this text; resume with the text it was trained on");
    }
  }
  config = info.config;
  // The run's options as the checkpoint recorded them (checksummed text: a value that is not a number is a file
  // written by something else).
  const auto number = [&](const char* key) {
    const std::string& text = extra.at(key);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    OPTIMUS_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(value) && value > 0,
                  "the checkpoint's '", key, "' is '", text, "', not a positive number");
    return value;
  };
  // The sequences' length: the run's (recorded since learned tables outlive it; before, the model's positions).
  seq = extra.count("seq") ? static_cast<std::int64_t>(number("seq")) : config.max_seq;
  OPTIMUS_CHECK(seq <= config.max_seq, "the checkpoint's run trained sequences of ", seq, " tokens, more than its "
                "model's ", config.max_seq, " positions");
  OPTIMUS_CHECK(!o.has("seq") || o.integer("seq", 0) == seq, "--seq ", o.integer("seq", 0),
                " differs from the checkpoint's ", seq, " (a resumed run keeps its sequences)");
  if (!o.has("steps") && extra.count("steps")) steps = static_cast<int>(number("steps"));
  if (!o.has("lr") && extra.count("lr")) lr = number("lr");
  if (!o.has("batch") && extra.count("global_batch")) {
    const auto global = static_cast<std::int64_t>(number("global_batch"));
    OPTIMUS_CHECK(global % dp == 0, "the checkpoint's run took ", global, " sequences a step, which dp = ", dp,
                  " replicas cannot share");
    batch = global / dp;  // the same sequences each step, shared by this run's replicas
  }
  OPTIMUS_CHECK(static_cast<std::uint64_t>(steps) > info.state.step ||
                    (finished_ok && static_cast<std::uint64_t>(steps) == info.state.step),
                "--steps ", steps, " leaves nothing to train after the checkpoint's step ", info.state.step);
}

ConfigNames config_names(const cli::Options& o) {
  ConfigNames names = ConfigNames::options();
  for (const char* from : {"init", "resume"}) {
    if (!o.has(from)) continue;
    const std::string q = names.q, p = names.p;
    names = ConfigNames::fields();
    names.subject = "the model of --" + std::string(from) + " '" + o.text(from, "") + "': ";
    names.q = q;
    names.p = p;
  }
  if (o.has("plan")) {
    names.q = "the plan's q";
    names.p = "the plan's p";
  }
  return names;
}

void check_export_target(const cli::Options& o, const GptConfig& config) {
  if (!o.has("export")) return;
  const std::string file = o.text("export", "");
  const std::string blocks = family_name(config.block);
  OPTIMUS_CHECK(!file.ends_with(".bin") || blocks == "gpt2", "--export ", file, ": llm.c's file holds GPT-2's blocks, "
                "not the model's (", blocks, "); export a Llama or a BERT to a directory");
  OPTIMUS_CHECK(blocks != "custom", "--export ", file, ": no file format holds the model's blocks (", config, ")");
  OPTIMUS_CHECK(blocks == "gpt2" || !std::filesystem::exists(file), "--export ", file, ": a ",
                blocks == "bert" ? "BERT" : "Llama", " is exported to a new Hugging Face directory, and '", file,
                "' exists");
}

void adopt_shape(const cli::Options& o, const GptConfig& file, const std::string& path, const DataVocab& data,
                 GptConfig& config, std::int64_t& seq) {
  cli::check_arch(o, file.block, path + "'s");
  const auto same = [&](const char* option, std::int64_t there) {
    OPTIMUS_CHECK(!o.has(option) || o.integer(option, 0) == there, "--", option, " ", o.integer(option, 0),
                  " differs from ", path, "'s ", there);
  };
  same("layers", file.layers);
  same("hidden", file.hidden);
  same("heads", file.heads);
  same("ffn", file.ffn);
  // Any length up to the file's positions: rotary ones have no table, and a learned table's first rows serve.
  OPTIMUS_CHECK(!o.has("seq") || o.integer("seq", 0) <= file.max_seq, "--seq ", o.integer("seq", 0), " exceeds ",
                path, "'s ", file.max_seq, " positions");
  same("vocab", file.vocab);
  same("kv-heads", file.kv_heads());
  OPTIMUS_CHECK(!o.has("rope-theta") || (file.block.rope && o.real("rope-theta", 0) == file.block.rope->theta),
                "--rope-theta ", o.real("rope-theta", 0), " differs from ", path, "'s");
  // A text's ids are its characters', which a tokenizer's vocabulary does not know: any vocabulary holding them
  // serves (the model learns them anew), so --init asks only that they fit.
  check_vocab_fits(DataVocab{.ids = data.ids, .exact = false, .characters = data.characters}, file.vocab,
                   path + "'s");
  config.vocab = file.vocab;
  config.layers = file.layers;
  config.hidden = file.hidden;
  config.heads = file.heads;
  config.ffn = file.ffn;
  seq = o.has("seq") ? o.integer("seq", 0) : file.max_seq;
  // A learned table stays whole (its rows past seq untrained, exported as read); rotary positions are the sequences'.
  config.max_seq = file.block.rope ? seq : file.max_seq;
  config.block = file.block;
}

}  // namespace optimus::apps
