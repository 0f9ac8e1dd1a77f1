// Hugging Face GPT-2 safetensors: names, shapes, streaming export and per-tensor import.
#include "optimus/checkpoint/hf_gpt2.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "checkpoint/model_tensors.hpp"
#include "optimus/checkpoint/safetensors.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint {

namespace {

using detail::read_matrix;

// Optimus' name -> Hugging Face's (the embeddings carry ".weight" there).
std::string hf_name(const std::string& name) {
  return name == "wte" || name == "wpe" ? name + ".weight" : name;
}

// The file's tensors by Hugging Face name without the optional "transformer." prefix, the buffers left out.
std::map<std::string, const safetensors::Entry*> tensors_of(const safetensors::Reader& file) {
  std::map<std::string, const safetensors::Entry*> out;
  for (const safetensors::Entry& e : file.entries()) {
    std::string name = e.info.name;
    if (name.rfind("transformer.", 0) == 0) name = name.substr(12);
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name == "lm_head.weight") continue;
    OPTIMUS_CHECK(out.emplace(name, &e).second, "'", file.path(), "' holds '", name, "' twice (with and without the "
                  "transformer. prefix)");
  }
  return out;
}

const safetensors::Entry& need(const std::map<std::string, const safetensors::Entry*>& tensors,
                               const std::string& name, const std::string& path) {
  const auto it = tensors.find(name);
  OPTIMUS_CHECK(it != tensors.end(), "'", path, "' is not a GPT-2 checkpoint: it has no tensor '", name, "'");
  return *it->second;
}

// A file may hold lm_head.weight beside wte.weight: Optimus ties the head to wte, so it must equal wte to the bit (an
// untied head is refused, not dropped). Compared 1 MiB at a time where both are stored alike.
void check_tied_head(const safetensors::Reader& file, const safetensors::Entry& wte) {
  const safetensors::Entry* head = nullptr;
  for (const safetensors::Entry& e : file.entries()) {
    if (e.info.name == "lm_head.weight" || e.info.name == "transformer.lm_head.weight") head = &e;
  }
  if (head == nullptr) return;
  const auto untied = [&](const std::string& where) {
    OPTIMUS_FAIL("'", file.path(), "': ", head->info.name, " differs from ", wte.info.name, " (", where,
                 "): an untied LM head, which Optimus (whose head is tied to wte) cannot load");
  };
  if (head->info.shape != wte.info.shape) untied("another shape");
  if (head->info.dtype != wte.info.dtype) {
    const GlobalMatrix a = read_matrix(file, *head), b = read_matrix(file, wte);
    if (a != b) untied("other values");
    return;
  }
  const std::uint64_t bytes = head->info.bytes(), piece = std::uint64_t{1} << 20;
  std::vector<char> a(piece), b(piece);
  for (std::uint64_t at = 0; at < bytes; at += piece) {
    const std::uint64_t n = std::min(piece, bytes - at);
    file.read(head->offset + at, n, a.data());
    file.read(wte.offset + at, n, b.data());
    const auto differ = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first;
    if (differ != a.begin() + static_cast<std::ptrdiff_t>(n)) {
      untied("first at byte " + std::to_string(at + static_cast<std::uint64_t>(differ - a.begin())) + " of its data");
    }
  }
}

}  // namespace

GptConfig hf_config(const std::string& path) {
  const safetensors::Reader file(path);
  const auto tensors = tensors_of(file);
  const auto& wte = need(tensors, "wte.weight", path).info.shape;
  const auto& wpe = need(tensors, "wpe.weight", path).info.shape;
  OPTIMUS_CHECK(wte.size() == 2 && wpe.size() == 2 && wte[1] == wpe[1], "'", path,
                "': wte.weight and wpe.weight are not [vocab, h] and [max_seq, h]");
  std::int64_t layers = 0;
  while (tensors.count("h." + std::to_string(layers) + ".attn.c_attn.weight")) ++layers;
  GptConfig c{.vocab = wte[0], .padded_vocab = 0, .max_seq = wpe[0], .layers = layers, .hidden = wte[1], .heads = 0,
              .ffn = 0, .dropout = 0.0, .seed = 0, .block = {}};
  if (layers > 0) {
    const auto& fc = need(tensors, "h.0.mlp.c_fc.weight", path).info.shape;
    OPTIMUS_CHECK(fc.size() == 2, "'", path, "': h.0.mlp.c_fc.weight is not a matrix");
    c.ffn = fc[1];
  }
  const auto heads = file.metadata().find("n_head");
  if (heads != file.metadata().end()) {
    std::size_t used = 0;
    try {
      c.heads = std::stoll(heads->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    OPTIMUS_CHECK(used > 0 && used == heads->second.size(), "'", path, "': __metadata__ n_head is '", heads->second,
                  "', not an integer");
  } else {
    OPTIMUS_CHECK(c.hidden % 64 == 0, "'", path, "' names no n_head and its hidden size ", c.hidden,
                  " is not a multiple of GPT-2's head size 64");
    c.heads = c.hidden / 64;
  }
  // Every tensor is one the model has, with its shape.
  std::set<std::string> expected;
  for (std::int64_t l = 0; l < layers; ++l) {
    for (const char* part : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                             "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      expected.insert("h." + std::to_string(l) + "." + part);
    }
  }
  for (const char* name : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}) expected.insert(name);
  for (const auto& [name, entry] : tensors) {
    OPTIMUS_CHECK(expected.count(name), "'", path, "' has a tensor '", entry->info.name, "' that GPT-2 does not");
  }
  check_tied_head(file, need(tensors, "wte.weight", path));
  return c;
}

namespace {

template <class T>
void read_hf_tensors(const std::string& path, const detail::ModelTensors<T>& model) {
  all_or_throw(model.everyone, [&] {
    const GptConfig there = hf_config(path), &here = *model.config;
    OPTIMUS_CHECK(there.vocab == here.vocab && there.max_seq == here.max_seq && there.layers == here.layers &&
                      there.hidden == here.hidden && there.ffn == here.ffn && there.heads == here.heads,
                  "'", path, "' holds a GPT-2 of vocab ", there.vocab, ", context ", there.max_seq, ", ", there.layers,
                  " layers, hidden ", there.hidden, ", ffn ", there.ffn, ", ", there.heads, " heads; the model has ",
                  here.vocab, ", ", here.max_seq, ", ", here.layers, ", ", here.hidden, ", ", here.ffn, ", ",
                  here.heads);
    const safetensors::Reader file(path);
    const auto tensors = tensors_of(file);
    for (const ParameterRef<T>& p : model.held) {
      const safetensors::Entry& e = need(tensors, hf_name(p.name), path);
      OPTIMUS_CHECK(e.info.shape == p.shape, "'", path, "': '", e.info.name, "' has another shape than the model's");
      detail::load_from(path, p, read_matrix(file, e), model.device);
    }
  });
}

template <class T>
void write_hf_tensors(const std::string& path, const detail::ModelTensors<T>& model) {
  std::optional<safetensors::Writer> file;
  DeferredFailure outcome(model.writer);
  outcome.attempt([&] {
    check_replaceable(path, "export_hf");  // named as the export's, before the writer's own check
    std::vector<safetensors::TensorInfo> infos;
    for (const detail::NamedShape& t : model.order) {
      infos.push_back({.name = hf_name(t.name), .dtype = "F32", .shape = t.shape});
    }
    file.emplace(path, infos,
                 std::map<std::string, std::string>{{"format", "pt"},
                                                    {"n_head", std::to_string(model.config->heads)},
                                                    {"producer", "optimus"}});
  });
  for (std::size_t k = 0; k < model.order.size(); ++k) {
    const GlobalMatrix m = model.fetch(k);  // one tensor at a time
    outcome.attempt([&] {
      std::vector<float> values(static_cast<std::size_t>(m.size()));
      for (Eigen::Index i = 0; i < m.size(); ++i) values[static_cast<std::size_t>(i)] = static_cast<float>(m(i / m.cols(), i % m.cols()));
      file->append(values.data(), values.size() * sizeof(float));
    });
  }
  outcome.attempt([&] {
    file->finish();
  });
  outcome.agree(model.everyone);
}

}  // namespace

template <class F>
void import_hf(const std::string& path, Gpt<F>& model) {
  detail::check_gpt2_blocks(model.config(), "import_hf");
  read_hf_tensors(path, detail::tensors_of(model));
}

template <class F>
void export_hf(const std::string& path, Gpt<F>& model) {
  detail::check_gpt2_blocks(model.config(), "export_hf");
  write_hf_tensors(path, detail::tensors_of(model));
}

template void import_hf(const std::string&, Gpt<TwoD<float>>&);
template void import_hf(const std::string&, Gpt<OneD<float>>&);
template void import_hf(const std::string&, Gpt<TwoD<double>>&);
template void import_hf(const std::string&, Gpt<OneD<double>>&);
template void export_hf(const std::string&, Gpt<TwoD<float>>&);
template void export_hf(const std::string&, Gpt<OneD<float>>&);
template void export_hf(const std::string&, Gpt<TwoD<double>>&);
template void export_hf(const std::string&, Gpt<OneD<double>>&);

}  // namespace optimus::checkpoint
