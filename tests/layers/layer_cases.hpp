// Layer and model checks against the reference, shared by the MPI and in-process suites.
#pragma once

#include <string>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"

namespace optimus::test {

// Rounds to T, so that the reference sees exactly what the layers hold.
template <class T>
reference::Matrix rounded(const reference::Matrix& m) {
  return m.cast<T>().template cast<double>();
}

// Relative tolerance against the f64 reference: f64 1e-10, f32 1e-4, and f32 whose GEMMs take bf16 operands
// (mixed precision) 2e-2.
template <class T>
double tolerance(ops::GemmMath math) {
  if (sizeof(T) == 4 && math == ops::GemmMath::bf16) return 2e-2;
  return sizeof(T) == 4 ? 1e-4 : 1e-10;
}

// Values drawn from `seed` on for every parameter of `refs` (0.5 x uniform, LayerNorm weights around 1, rounded
// to T), loaded into the layer and returned by name for the reference.
// `device`: where the shards live (the grid's device(); null: host memory).
template <class T>
reference::Parameters load_random(const std::vector<ParameterRef<T>>& refs, std::uint64_t seed,
                                  DeviceMemory* device) {
  reference::Parameters p;
  for (const ParameterRef<T>& r : refs) {
    const bool layernorm_weight = r.name.find("ln_") != std::string::npos && r.name.ends_with(".weight");
    reference::Matrix m = rounded<T>(0.5 * reference::random_matrix(r.layout.tensor_rows(), r.layout.cols, seed++));
    if (layernorm_weight) m.array() += 1.0;
    load_parameter(r, m, device);
    p[r.name] = m;
  }
  return p;
}

// Shapes where b, s, h, heads, ffn and vocab all differ, valid for the given q (h and ffn divisible by q*q).
struct LayerShapes {
  std::int64_t batch, seq, hidden, heads, ffn, vocab, max_seq;
};
LayerShapes shapes_for(int q);
// n token ids in [0, vocab) drawn from `seed`, the same on every rank.
std::vector<int> random_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed);
GptConfig config_for(int q, std::int64_t layers, double dropout);

// Each: forward output, input gradient and every parameter gradient against the reference, f64 and f32.
void check_linear(Communicator& world, int q);
void check_layernorm(Communicator& world, int q);
void check_rmsnorm(Communicator& world, int q);
// Attention2D with rotary positions (RoPE) against the reference's.
void check_rotary_attention(Communicator& world, int q);
// Attention2D with grouped-query attention (kv_heads = heads/2 and q), with and without rotary positions.
void check_grouped_query_attention(Communicator& world, int q);
// MLP2D with SwiGLU (Llama's MLP), with and without biases.
void check_swiglu_mlp(Communicator& world, int q);
void check_attention(Communicator& world, int q);
void check_mlp(Communicator& world, int q);
void check_block(Communicator& world, int q);
void check_embedding(Communicator& world, int q);
void check_lm_head(Communicator& world, int q);
void check_gpt(Communicator& world, int q);
// Every f32 layer case above (and the GPT's) on `grid` as it is placed (host or device) and at its GEMM math: f32
// within 1e-4, bf16 GEMM operands within 2e-2. Collective over the grid.
void check_f32_layers_on(const Grid& grid);
// 5 AdamW steps of an f32 GPT (f32 master weights and state) on `grid` as it is placed and at its GEMM math: every
// step's loss (and gradient norm) against the reference on the whole global batch (dp replicas included).
void check_f32_training_on(const Grid& grid);
// The same checks in mixed precision (GEMMs with bf16 operands, f32 everything else) within 2e-2; the GPT's logits
// must show the bf16 rounding (not within 1e-5), so the bf16 path is really taken.
void check_mixed_precision(Communicator& world, int q);
// Loss after 5 AdamW steps equals the reference's (the same for every q); returns it.
double check_training(Communicator& world, int q, int dp);
// Parameters: loading then gathering returns the GPT-2 tensors; stored elements sum to the model's count.
void check_parameters(Communicator& world, int q);
// Bad configurations and inputs throw the same optimus::Error on every rank.
void check_layer_errors(Communicator& world, int q);
// Micro-batches (recompute_cases.cpp): m = 2, 4, 8 of a replica's batch of 8q sequences (dropout on) give the whole
// batch's loss and gradients within 1e-12 (f64), and the whole batch the reference's (dp replicas included).
void check_micro_batches(Communicator& world, int q);
// Recomputation none, selective and full: bitwise the same loss and gradients (f64, f32, f32 with bf16 GEMMs;
// dropout on; 1 and 2 micro-batches; per-block policies), and a block's context holds block_saved_bytes per rank.
void check_recompute(Communicator& world, int q);
// Both on `grid` as it is placed (a device), in f32 (micro-batches within 1e-4).
void check_recompute_and_micro_batches_on(const Grid& grid);

}  // namespace optimus::test
