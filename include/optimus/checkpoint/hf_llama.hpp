// A Hugging Face Llama model directory in and out of a GPT of Llama's blocks (model/gpt.hpp, BlockConfig::llama) on
// any layout.
//
// The directory holds config.json (LlamaForCausalLM's: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, rms_norm_eps, rope_theta, max_position_embeddings, tie_word_embeddings,
// hidden_act "silu") and the tensors, in model.safetensors or in shards that model.safetensors.index.json's weight_map
// names. Names and shapes are transformers' LlamaForCausalLM state dict, nn.Linear's weights [out, in]:
//   model.embed_tokens.weight [vocab, h]                 = wte
//   model.layers.N.input_layernorm.weight [h]            = h.N.ln_1.weight
//   model.layers.N.self_attn.q_proj.weight [h, h]        = h.N.attn.c_attn.weight[:, 0:h]^T
//   model.layers.N.self_attn.k_proj.weight [kv d, h]     = h.N.attn.c_attn.weight[:, h:h + kv d]^T
//   model.layers.N.self_attn.v_proj.weight [kv d, h]     = h.N.attn.c_attn.weight[:, h + kv d:]^T
//   model.layers.N.self_attn.o_proj.weight [h, h]        = h.N.attn.c_proj.weight^T
//   model.layers.N.post_attention_layernorm.weight [h]   = h.N.ln_2.weight
//   model.layers.N.mlp.gate_proj.weight [ffn, h]         = h.N.mlp.c_fc.weight[:, 0:ffn]^T
//   model.layers.N.mlp.up_proj.weight [ffn, h]           = h.N.mlp.c_fc.weight[:, ffn:]^T
//   model.layers.N.mlp.down_proj.weight [h, ffn]         = h.N.mlp.c_proj.weight^T
//   model.norm.weight [h]                                = ln_f.weight
//   lm_head.weight [vocab, h]                            = lm_head.weight (absent where tie_word_embeddings)
// Rotary positions pair columns (i, i + d/2) of each head as transformers' rotate_half does, so q_proj and k_proj load
// without permutation. Reading refuses what the model cannot be: another hidden_act, attention or MLP biases,
// rope_scaling, a head_dim other than h / heads, a tensor it does not know; F32, F64 and BF16 tensors are read.
//
// export_hf_llama streams as export_hf does (one tensor of the model at a time on the writing rank), in F32, into
// shards of at most max_shard_bytes (a larger tensor alone in its own): the directory is built beside under a name of
// this writer's own (core/output_file.hpp: `.NAME.HOST.PID.RANDOM.partial`) and renamed to DIR once every file is
// complete and fsynced; DIR must not exist, and the rename refuses a DIR another writer made meanwhile. Both are
// collective and fail the same way on every rank (optimus::Error naming the file and the tensor).
#pragma once

#include <cstdint>
#include <string>

#include "optimus/config/gpt_config.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint {

// The model a Hugging Face Llama directory holds (dropout 0 and seed 0: not in it): Llama's blocks with its kv heads,
// rope theta, norm eps and tie. One process.
GptConfig hf_llama_config(const std::string& dir);

// Collective over the whole model (every stage, and the replicas), any layout: each stage imports the tensors it holds.
// The model's shape and blocks must be the directory's.
template <class Family>
void import_hf_llama(const std::string& dir, Gpt<Family>& model);
// `context`: the max_position_embeddings config.json states, at least the model's max_seq (a model initialized from a
// file of a longer context and trained on shorter sequences keeps the file's).
template <class Family>
void export_hf_llama(const std::string& dir, Gpt<Family>& model, std::uint64_t max_shard_bytes, std::int64_t context);

}  // namespace optimus::checkpoint
