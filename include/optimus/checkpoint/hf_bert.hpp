// A Hugging Face BERT model directory (BertForMaskedLM) in and out of a GPT of BERT's blocks (model/gpt.hpp,
// BlockConfig::bert) on any layout.
//
// The directory holds config.json (BertForMaskedLM's: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, max_position_embeddings, type_vocab_size, layer_norm_eps, hidden_act "gelu" — the exact erf
// GELU —, position_embedding_type "absolute") and the tensors, in model.safetensors or in shards that
// model.safetensors.index.json's weight_map names. Names and shapes are transformers' BertForMaskedLM state dict,
// nn.Linear's weights [out, in]:
//   bert.embeddings.word_embeddings.weight [vocab, h]              = wte (also the decoder's weight: tied)
//   bert.embeddings.position_embeddings.weight [max_seq, h]        = wpe
//   bert.embeddings.token_type_embeddings.weight [types, h]        = tte
//   bert.embeddings.LayerNorm.weight, .bias [h]                    = ln_e.weight, ln_e.bias
//   bert.encoder.layer.N.attention.self.query.weight [h, h]        = h.N.attn.c_attn.weight[:, 0:h]^T (key: h:2h,
//                                                                    value: 2h:3h); .bias = c_attn.bias's thirds
//   bert.encoder.layer.N.attention.output.dense.weight [h, h]      = h.N.attn.c_proj.weight^T; .bias
//   bert.encoder.layer.N.attention.output.LayerNorm.weight, .bias  = h.N.ln_1.weight, .bias (after the residual add)
//   bert.encoder.layer.N.intermediate.dense.weight [ffn, h]        = h.N.mlp.c_fc.weight^T; .bias
//   bert.encoder.layer.N.output.dense.weight [h, ffn]              = h.N.mlp.c_proj.weight^T; .bias
//   bert.encoder.layer.N.output.LayerNorm.weight, .bias            = h.N.ln_2.weight, .bias
//   cls.predictions.transform.dense.weight [h, h]                  = head.dense.weight^T; .bias
//   cls.predictions.transform.LayerNorm.weight, .bias              = ln_f.weight, ln_f.bias
//   cls.predictions.bias [vocab]                                   = head.bias
// Reading takes cls.predictions.decoder.weight and .bias where a file holds them (transformers ties them to the word
// embeddings and cls.predictions.bias: they must equal those), and passes over BertForPreTraining's pooler and
// next-sentence head (bert.pooler.*, cls.seq_relationship.*: the masked-LM model has neither) and the buffer
// bert.embeddings.position_ids. It refuses what the model cannot be: another hidden_act, position_embedding_type,
// an untied decoder, a decoder (is_decoder, add_cross_attention), and a tensor it does not know; F32, F64 and BF16
// tensors are read. Exporting writes the tensors above, the decoder left to the tie, in F32.
//
// Both are collective over the whole model (every stage, and the replicas) and fail the same way on every rank
// (optimus::Error naming the file and the field or tensor). export_hf_bert streams and shards as export_hf_llama does.
#pragma once

#include <cstdint>
#include <string>

#include "optimus/config/gpt_config.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::checkpoint {


// The model a Hugging Face BERT directory holds (dropout 0 and seed 0: not in it): BERT's blocks with its norm eps and
// token types. One process.
GptConfig hf_bert_config(const std::string& dir);

// Each stage imports the tensors it holds; the model's shape and blocks must be the directory's.
template <class Family>
void import_hf_bert(const std::string& dir, Gpt<Family>& model);
// To a new directory `dir` (which must not exist), in shards of at most max_shard_bytes.
template <class Family>
void export_hf_bert(const std::string& dir, Gpt<Family>& model, std::uint64_t max_shard_bytes);

}  // namespace optimus::checkpoint
