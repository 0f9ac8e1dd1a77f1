// llm.c's GPT-2 checkpoint (gpt2_124M.bin and the files train_gpt2.c writes), in and out of a GPT (model/gpt.hpp) on
// any layout.
//
//   header: 256 int32 — magic 20240326, version (3: fp32; 5: bf16, read only), max_seq, vocab, layers, heads,
//           channels h, padded vocab Vp
//   then the tensors, each whole over the layers and row-major, PyTorch Linear's [out, in] weights:
//     wte [Vp, h], wpe [max_seq, h], ln_1 weight [L, h], ln_1 bias [L, h], c_attn weight [L, 3h, h], c_attn bias
//     [L, 3h], attn c_proj weight [L, h, h], bias [L, h], ln_2 weight, bias [L, h], c_fc weight [L, 4h, h], bias
//     [L, 4h], mlp c_proj weight [L, h, 4h], bias [L, h], ln_f weight [h], bias [h]
//
// Optimus' weights are Conv1D's [in, out], so matrices are transposed on the way; wte's padding rows [vocab, Vp) are
// written as zeros and skipped on reading; the MLP is 4h wide (llm.c's only shape). Export streams one gathered tensor
// at a time from replica 0's rank 0, to a file renamed into place once complete and fsynced; import reads, on every
// rank, one tensor at a time. Both are collective and fail the same way everywhere, naming the file.
#pragma once

#include <string>

#include "optimus/config/gpt_config.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint {

// Whether `path` starts with llm.c's checkpoint magic (how train_gpt --init tells it from safetensors).
bool is_llmc_checkpoint(const std::string& path);
// The model shape the file holds (dropout 0, seed 0). One process.
GptConfig llmc_config(const std::string& path);

// Collective over the whole model (every stage, and the replicas), any layout, as hf_gpt2.hpp's.
template <class Family>
void import_llmc(const std::string& path, Gpt<Family>& model);
template <class Family>
void export_llmc(const std::string& path, Gpt<Family>& model);

}  // namespace optimus::checkpoint
