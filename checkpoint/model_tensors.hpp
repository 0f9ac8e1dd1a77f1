// Internal to the checkpoint module: what the consolidated GPT-2 files (hf_gpt2, llmc_gpt2) read into and write from —
// a model's stages on any layout — as one view: the parameters this rank holds, the whole model's tensors in its order,
// and a fetch that brings any of them whole to the one rank that writes files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimus/checkpoint/safetensors.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint::detail {

// One tensor of the whole model: its GPT-2 name and global shape as the model names it.
struct NamedShape {
  std::string name;
  std::vector<std::int64_t> shape;
};

template <class T>
struct ModelTensors {
  const GptConfig* config;
  std::vector<ParameterRef<T>> held;  // this rank's: the whole model's, or its stage's
  DeviceMemory* device;               // where `held` lives (null: host memory)
  std::vector<NamedShape> order;      // the whole model's tensors: wte, wpe, block 0's, ..., ln_f's
  bool writer;                        // the one rank that writes a file (replica 0's first rank)
  std::vector<Communicator*> everyone;
  // Collective over every rank of the model: the tensor order[k] in full on the writer (empty elsewhere).
  std::function<GlobalMatrix(std::size_t k)> fetch;
};

// The model's stages (2D grids or 1D groups; one or more): each holds its own tensors; fetch gathers one over the
// ranks of the stage that holds it (wte: the embedding's stage) and sends it to the writer on the first stage.
template <class F>
ModelTensors<typename F::Value> tensors_of(Gpt<F>& model);

// A tensor of a safetensors file as a [rows, cols] matrix (vectors 1 x n); F32, F64 and BF16 are read.
GlobalMatrix read_matrix(const safetensors::Reader& file, const safetensors::Entry& e);

// load_parameter of a tensor read from `source` (a file or a directory), its errors (a shape, a value that is not
// finite as the model holds it) naming `source` first.
template <class T>
void load_from(const std::string& source, const ParameterRef<T>& p, const GlobalMatrix& full, DeviceMemory* device);

// Throws (naming `op`, the same on every rank) unless the model's blocks are GPT-2's, the only ones these files hold
// (LayerNorm with eps 1e-5): a model of other blocks would drop or invent tensors.
void check_gpt2_blocks(const GptConfig& config, const char* op);

}  // namespace optimus::checkpoint::detail
