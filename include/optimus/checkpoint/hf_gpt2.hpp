// A consolidated GPT-2 in Hugging Face's safetensors layout, in and out of a GPT (model/gpt.hpp) on any layout.
//
// Names and shapes are transformers' GPT2Model state dict: wte.weight [vocab, h], wpe.weight [max_seq, h],
// h.N.ln_1.weight [h], h.N.ln_1.bias, h.N.attn.c_attn.weight [h, 3h] (Conv1D: [in, out], columns [Q | K | V]),
// h.N.attn.c_attn.bias [3h], h.N.attn.c_proj.weight [h, h], .bias, h.N.ln_2.*, h.N.mlp.c_fc.weight [h, ffn], .bias,
// h.N.mlp.c_proj.weight [ffn, h], .bias, ln_f.weight, ln_f.bias — Optimus' own names and layouts, so no transpose.
// Reading accepts a `transformer.` prefix (GPT2LMHeadModel's files), ignores the attention mask buffers
// (attn.bias, attn.masked_bias) and a tied lm_head.weight, and refuses any other name. The file holds no head count:
// __metadata__["n_head"] where present (Optimus writes it), else GPT-2's head size of 64.
//
// export_hf streams: replica 0 gathers one tensor at a time (a collective over its grid; in a pipeline, over the grid
// of the stage that holds it, which sends it to the first stage) and rank 0 appends it to the file, so no rank ever
// holds more than one tensor of the model (the file's order is the whole model's, whatever the layout); the file
// appears by rename once complete and fsynced. import_hf reads on every rank, one tensor at a time, only what the model
// needs. Both are collective and fail the same way on every rank (optimus::Error naming the file and the tensor).
#pragma once

#include <string>

#include "optimus/config/gpt_config.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint {

// The model shape a GPT-2 safetensors file holds (dropout 0 and seed 0: not in the file). One process.
GptConfig hf_config(const std::string& path);

// Collective over the whole model (every stage, and the replicas), any layout: each stage imports the tensors it holds.
template <class Family>
void import_hf(const std::string& path, Gpt<Family>& model);
template <class Family>
void export_hf(const std::string& path, Gpt<Family>& model);

}  // namespace optimus::checkpoint
