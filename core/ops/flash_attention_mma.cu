// Fused attention, causal or bidirectional, on tensor cores (flash_attention.cuh): FlashAttention-2's algorithm with
// bf16 operands and f32 accumulation, through the m16n8k16 mma.sync instruction (mma_tiles.cuh), so that a product's
// accumulator lands in registers whose rows each thread knows: the online softmax rescales them in place, and the
// probabilities go from the scores' accumulators straight into the next product's A fragments.
//
// A block is 4 warps; each warp owns 16 rows (queries forward and in the dQ kernel, keys in the dK/dV kernel) and
// keeps that operand's fragments and its accumulators in registers; the other operand comes tile by tile through
// shared memory as bf16, row-major. How a tile gets there is the kernels' `Tiles` parameter:
//   * converted: qkv in f32, each tile read, rounded to bf16 (to nearest even) and stored by the block, which waits
//     for it at a barrier before multiplying;
//   * async: qkv kept in bf16 (mixed precision), each tile copied by cp.async into one of two buffers while the block
//     multiplies the other (rows and d in whole 16-byte pieces; else the converted path reads the bf16 values).
// Both give the same fragments, so the same bits. dO (f32) is always rounded by the block: the dQ kernel reads its
// rows once, the dK/dV kernel's tiles arrive as f32 (async: by cp.async a tile ahead) and are rounded from shared
// memory. The row terms D come from the forward's output (attention_delta). Head dimensions up to 64 run in tiles of
// 64 columns, up to 128 in tiles of 128: columns past d are zeros.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "block_reduce.cuh"
#include "flash_attention.cuh"
#include "mma_tiles.cuh"
#include "optimus/core/cuda_check.hpp"

namespace optimus::cuda::detail {
namespace {

using namespace mma_tiles;

constexpr int kForwardKeys = 64;   // keys per tile in the forward
constexpr int kBackwardTile = 32;  // rows of the other operand per tile in the backward kernels
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

enum class Tiles { converted, async };

// Sequence b's keys before its padding: lengths[b], or seq where none are padded.
__device__ inline std::int64_t keys_before_padding(const AttentionGeometry& g, std::int64_t b) {
  return g.lengths != nullptr ? g.lengths[b] : g.seq;
}

// One past the last key a block of queries from `first` sees in a sequence of `unpadded` keys before its padding:
// first + kRows (causal), at most unpadded.
__device__ inline std::int64_t keys_of_block(const AttentionGeometry& g, std::int64_t first, std::int64_t unpadded) {
  return g.causal && first + kRows < unpadded ? first + kRows : unpadded;
}

// The last key of the tile of W keys from j0 that query `row` sees, relative to j0 (keys below `unpadded`, the
// sequence's keys before its padding; causal: up to row): -1 if none, W - 1 if all. (min(row, unpadded - 1) - j0
// clamped, so that a tile's mask is one compare per element in 32 bits.)
template <int W>
__device__ inline int last_key_seen(const AttentionGeometry& g, std::int64_t unpadded, std::int64_t row,
                                    std::int64_t j0) {
  const std::int64_t last = (g.causal && row < unpadded - 1 ? row : unpadded - 1) - j0;
  return last < 0 ? -1 : last >= W ? W - 1 : static_cast<int>(last);
}

// Rows first.. first + R - 1 of x into a row-major tile, as `tiles` says (async: qkv in bf16 only).
template <Tiles tiles, int R, int D, class In>
__device__ void fill(bf16x* tile, const Operand<In>& x, std::int64_t first) {
  if constexpr (tiles == Tiles::async) {
    copy_rows_async<R, D, D + kPad>(tile, x, first);
  } else {
    stage_rows<R, D>(tile, x, first);
  }
}

// No per-tile work besides the loads (over_tiles' stage for the forward and the dQ kernel).
struct NoStage {};

// Tiles t = 0 .. count - 1 of the other operand through shared memory: load(t) puts tile t in its buffers (async: one
// tile ahead of the one being multiplied; converted: on the way in); once every thread's part of tile t has arrived,
// stage(t) turns what arrived into what the products read (the key kernel: dO to bf16, the row terms), and then
// multiply(t) runs, finishing before any buffer it reads is filled again. Copies issued before the call (the key
// kernel's K and V rows) arrive with tile 0.
template <Tiles tiles, class Load, class Stage, class Multiply>
__device__ void over_tiles(int count, const Load& load, const Stage& stage, const Multiply& multiply) {
  if constexpr (tiles == Tiles::async) {
    load(0);
    commit_async();
  }
  for (int t = 0; t < count; ++t) {
    if constexpr (tiles == Tiles::async) {  // the next tile's copies in flight while this one is multiplied
      if (t + 1 < count) load(t + 1);
      commit_async();
      wait_async<1>();
    } else {
      load(t);
    }
    __syncthreads();
    if constexpr (!std::is_same_v<Stage, NoStage>) {
      stage(t);
      __syncthreads();
    }
    multiply(t);
    __syncthreads();  // every warp is done with this tile's buffers before they are filled again
  }
}

// Tiles in shared memory: two buffers when async (one being filled, one multiplied), else one.
template <Tiles tiles>
constexpr int kBuffers = tiles == Tiles::async ? 2 : 1;
// The buffer tile t goes to.
template <Tiles tiles>
__device__ inline int slot(int t) {
  return t % kBuffers<tiles>;
}
// The K and V tiles of keys R t.. R t + R - 1 in buffer slot<tiles>(t): K at keys_of(buffer, t), V R (D + kPad)
// elements after it.
template <Tiles tiles, int R, int D>
__device__ bf16x* keys_of(bf16x* buffer, int t) {
  return buffer + slot<tiles>(t) * 2 * R * (D + kPad);
}
template <Tiles tiles, int R, int D, class In>
__device__ void fill_keys_values(bf16x* buffer, const Head<In>& h, int t) {
  bf16x* keys = keys_of<tiles, R, D>(buffer, t);
  fill<tiles, R, D>(keys, h.k, t * static_cast<std::int64_t>(R));
  fill<tiles, R, D>(keys + R * (D + kPad), h.v, t * static_cast<std::int64_t>(R));
}

// Bytes of shared memory each kernel takes: the forward's K and V tiles (two of each when async); the dQ kernel's K and
// V tiles (the same); the dK/dV kernel's K and V rows, its Q tiles (two when async), its dO tile, and the tile's
// log-sum-exps and D, and when async the copies that arrive for them (two of each: dO in f32, the row terms).
constexpr int row_bytes(int d) { return static_cast<int>(sizeof(bf16x)) * (d + kPad); }
template <Tiles tiles, int D>
constexpr int forward_bytes() {
  return kBuffers<tiles> * 2 * kForwardKeys * row_bytes(D);
}
template <Tiles tiles, int D>
constexpr int query_kernel_bytes() {
  return kBuffers<tiles> * 2 * kBackwardTile * row_bytes(D);
}
template <Tiles tiles, int D>
constexpr int key_kernel_bytes() {
  constexpr int arriving = tiles == Tiles::async ? kBuffers<tiles> * (D + 2) * kBackwardTile : 0;  // floats
  return (2 * kRows + (kBuffers<tiles> + 1) * kBackwardTile) * row_bytes(D) +
         (2 * kBackwardTile + arriving) * static_cast<int>(sizeof(float));
}

// The forward's probabilities p [16 rows, W keys from j0] of this thread's fragments through the dropout (the counter
// RNG's mask of the rows and keys), after they were added to the row sums (the softmax normalizes the undropped ones).
template <int W>
__device__ __forceinline__ void drop_probabilities(float (&s)[W / 8][4], const AttentionGeometry& g,
                                                   std::uint64_t mask_row, const std::int64_t (&row)[2],
                                                   std::int64_t j0, int t2) {
#pragma unroll
  for (int n = 0; n < W / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = s[n][e];
      s[n][e] = p == 0.0f ? 0.0f
                          : dropped(p, g, mask_row + static_cast<std::uint64_t>(row[e >> 1]),
                                    j0 + n * 8 + t2 + (e & 1));
    }
  }
}

// The forward's results from this thread's accumulators: out [b*s, width] = o / sum (rows below seq, columns below
// d), and each row's log-sum-exp, in natural units, by the thread of its quad that holds column 0.
template <int D, class In, class Out>
__device__ __forceinline__ void store_forward(const float (&o)[D / 8][4], const float (&max)[2], float (&sum)[2],
                                              const Head<In>& h, const AttentionGeometry& g,
                                              const std::int64_t (&row)[2], int lane, int t2, Out* out,
                                              float* lse) {
#pragma unroll
  for (int r = 0; r < 2; ++r) sum[r] = row_sum(sum[r]);
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t i = row[e >> 1], col = c * 8 + t2 + (e & 1);
      if (i < g.seq && col < g.d) {
        out[(h.b * g.seq + i) * h.width + h.head * g.d + col] = written(o[c][e] / sum[e >> 1], out);
      }
    }
  }
  if ((lane & 3) != 0) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] < g.seq) lse[(h.b * g.heads + h.head) * g.seq + row[r]] = (max[r] + log2f(sum[r])) * kLn2;
  }
}

// ---- forward: a block of 64 queries against key tiles of 64 -------------------------------------------------------
template <int D, Tiles tiles, class In, class Out>
__global__ void __launch_bounds__(mma_tiles::kThreads)
    forward_kernel(const In* qkv, AttentionGeometry g, Out* out, float* lse) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int kTile = kForwardKeys * (D + kPad);  // elements of a K or V tile; buffer b: K at 2 b kTile, V after
  bf16x* buffer = reinterpret_cast<bf16x*>(shared);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t2 = 2 * (lane & 3);
  const Head<In> h = head_of(qkv, static_cast<const float*>(nullptr), g);
  const std::int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<std::int64_t>(kRows);  // longest first
  const std::int64_t row[2] = {first + warp * 16 + (lane >> 2), first + warp * 16 + (lane >> 2) + 8};
  const std::uint64_t mask_row = mask_row_of(g, h.b, h.head);
  const float scale2 = g.scale * kLog2e;  // scores in log2 units
  u32 q[D / 16][4];
  load_rows<D>(q, h.q, first + warp * 16);
  float o[D / 8][4] = {};
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  const std::int64_t unpadded = keys_before_padding(g, h.b);
  const std::int64_t last = keys_of_block(g, first, unpadded);  // one past the last key the block sees
  const int count = static_cast<int>((last + kForwardKeys - 1) / kForwardKeys);
  const auto load = [&](int t) { fill_keys_values<tiles, kForwardKeys, D>(buffer, h, t); };
  over_tiles<tiles>(
      count, load, NoStage{},
      [&](int t) {
        const bf16x* keys = keys_of<tiles, kForwardKeys, D>(buffer, t);
        const bf16x* values = keys + kTile;
        const std::int64_t j0 = t * static_cast<std::int64_t>(kForwardKeys);
        float s[kForwardKeys / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) mma_rows<kForwardKeys>(s, q[kk], keys, D + kPad, kk * 16);
        const int seen[2] = {last_key_seen<kForwardKeys>(g, unpadded, row[0], j0),
                             last_key_seen<kForwardKeys>(g, unpadded, row[1], j0)};
        float grown[2] = {max[0], max[1]};
#pragma unroll
        for (int n = 0; n < kForwardKeys / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float x = n * 8 + t2 + (e & 1) <= seen[e >> 1] ? s[n][e] * scale2 : -INFINITY;
            s[n][e] = x;
            grown[e >> 1] = fmaxf(grown[e >> 1], x);
          }
        }
        float rescale[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // key 0 is in the first tile: every row's max is finite from then on
          grown[r] = row_max(grown[r]);
          rescale[r] = exp2f(max[r] - grown[r]);
          max[r] = grown[r];
          sum[r] *= rescale[r];
        }
#pragma unroll
        for (int n = 0; n < kForwardKeys / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[n][e] = exp2f(s[n][e] - max[e >> 1]);
            sum[e >> 1] += s[n][e];
          }
        }
        if (g.dropout > 0.0) drop_probabilities<kForwardKeys>(s, g, mask_row, row, j0, t2);
#pragma unroll
        for (int c = 0; c < D / 8; ++c) {
          o[c][0] *= rescale[0];
          o[c][1] *= rescale[0];
          o[c][2] *= rescale[1];
          o[c][3] *= rescale[1];
        }
        mma_columns<kForwardKeys, D>(o, s, values, D + kPad);
      });
  store_forward<D>(o, max, sum, h, g, row, lane, t2, out, lse);
}

// ---- backward, per block of 64 queries: dQ = sum_j dS K, with D from attention_delta --------------------------------
template <int D, Tiles tiles, class In>
__global__ void __launch_bounds__(mma_tiles::kThreads)
    backward_query_kernel(const In* qkv, const float* dout, const float* lse, const float* delta,
                          AttentionGeometry g, float* dqkv) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int kTile = kBackwardTile * (D + kPad);  // buffer b: K at 2 b kTile, V after
  bf16x* buffer = reinterpret_cast<bf16x*>(shared);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t2 = 2 * (lane & 3);
  const Head<In> h = head_of(qkv, dout, g);
  const std::int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<std::int64_t>(kRows);
  const std::int64_t row[2] = {first + warp * 16 + (lane >> 2), first + warp * 16 + (lane >> 2) + 8};
  const std::uint64_t mask_row = mask_row_of(g, h.b, h.head);
  const std::int64_t lse_row = (h.b * g.heads + h.head) * g.seq;
  const float scale2 = g.scale * kLog2e;
  float lse2[2], d_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lse2[r] = row[r] < g.seq ? lse[lse_row + row[r]] * kLog2e : 0.0f;
    d_row[r] = row[r] < g.seq ? delta[lse_row + row[r]] : 0.0f;
  }
  u32 q[D / 16][4], dO[D / 16][4];
  load_rows<D>(q, h.q, first + warp * 16);
  load_rows<D>(dO, h.dout, first + warp * 16);
  float dq[D / 8][4] = {};
  const std::int64_t unpadded = keys_before_padding(g, h.b);
  const std::int64_t last = keys_of_block(g, first, unpadded);
  const int count = static_cast<int>((last + kBackwardTile - 1) / kBackwardTile);
  const auto load = [&](int t) { fill_keys_values<tiles, kBackwardTile, D>(buffer, h, t); };
  over_tiles<tiles>(count, load, NoStage{}, [&](int t) {
    const bf16x* keys = keys_of<tiles, kBackwardTile, D>(buffer, t);
    const bf16x* values = keys + kTile;
    const std::int64_t j0 = t * static_cast<std::int64_t>(kBackwardTile);
    float s[kBackwardTile / 8][4] = {}, dp[kBackwardTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      mma_rows<kBackwardTile>(s, q[kk], keys, D + kPad, kk * 16);
      mma_rows<kBackwardTile>(dp, dO[kk], values, D + kPad, kk * 16);
    }
    const int last_seen[2] = {row[0] < g.seq ? last_key_seen<kBackwardTile>(g, unpadded, row[0], j0) : -1,
                              row[1] < g.seq ? last_key_seen<kBackwardTile>(g, unpadded, row[1], j0) : -1};
#pragma unroll
    for (int n = 0; n < kBackwardTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const std::int64_t j = j0 + n * 8 + t2 + (e & 1);
        const bool seen = n * 8 + t2 + (e & 1) <= last_seen[r];
        const float p = seen ? exp2f(s[n][e] * scale2 - lse2[r]) : 0.0f;
        const float dpv = seen ? dropped(dp[n][e], g, mask_row + static_cast<std::uint64_t>(row[r]), j) : 0.0f;
        s[n][e] = math::softmax_grad(p, dpv, d_row[r], g.scale);
      }
    }
    mma_columns<kBackwardTile, D>(dq, s, keys, D + kPad);
  });
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t i = row[e >> 1], col = c * 8 + t2 + (e & 1);
      if (i < g.seq && col < g.d) dqkv[(h.b * g.seq + i) * 3 * h.width + h.head * g.d + col] = dq[c][e];
    }
  }
}

// The dK/dV kernel's shared memory: its K and V rows, the tile's dO in bf16, its query tiles (two when async), the
// tile's log-sum-exps (log2 units) and row terms D, and when async the copies that arrive for them (kBuffers<tiles> x
// ([kBackwardTile][D] of dO, then [kBackwardTile] log-sum-exps and D), as stored); key_kernel_bytes in all.
template <int D, Tiles tiles>
struct KeyKernelShared {
  static constexpr int kTile = kBackwardTile * (D + kPad);
  static constexpr int kArriving = (D + 2) * kBackwardTile;
  bf16x* keys;          // [kRows][D + kPad]
  bf16x* values;        // [kRows][D + kPad]
  bf16x* grads;         // [kBackwardTile][D + kPad]: dO
  bf16x* query_buffer;  // kBuffers<tiles> x [kBackwardTile][D + kPad]
  float* lses;          // [kBackwardTile], log2 units
  float* deltas;        // [kBackwardTile]
  float* arriving;      // async only
  __device__ explicit KeyKernelShared(unsigned char* shared)
      : keys(reinterpret_cast<bf16x*>(shared)),
        values(keys + kRows * (D + kPad)),
        grads(values + kRows * (D + kPad)),
        query_buffer(grads + kTile),
        lses(reinterpret_cast<float*>(query_buffer + kBuffers<tiles> * kTile)),
        deltas(lses + kBackwardTile),
        arriving(deltas + kBackwardTile) {}
};

// Async: the copies of query tile i0's dO rows and row terms as stored (zeros past seq) into `to`, arriving with the
// tile's queries.
template <int D, class In>
__device__ __forceinline__ void copy_query_terms(float* to, const Head<In>& h, const AttentionGeometry& g,
                                                 const float* lse, const float* delta, std::int64_t lse_row,
                                                 std::int64_t i0) {
  copy_rows_async<kBackwardTile, D, D>(to, h.dout, i0);
  if (threadIdx.x < kBackwardTile) {
    const std::int64_t i = i0 + threadIdx.x, at = i < g.seq ? lse_row + i : 0;
    copy_async_4(to + kBackwardTile * D + threadIdx.x, lse + at, i < g.seq);
    copy_async_4(to + (D + 1) * kBackwardTile + threadIdx.x, delta + at, i < g.seq);
  }
}

// The stage of query tile i0 in the dK/dV kernel: its dO rounded to bf16 and its queries' row terms (zeros past seq)
// into shared memory — async: from the copies that arrived at `from`; converted: read now.
template <int D, Tiles tiles, class In>
__device__ __forceinline__ void stage_query_terms(const KeyKernelShared<D, tiles>& m, const float* from,
                                                  const Head<In>& h, const AttentionGeometry& g, const float* lse,
                                                  const float* delta, std::int64_t lse_row, std::int64_t i0) {
  if constexpr (tiles == Tiles::async) {
    stage_rows<kBackwardTile, D>(m.grads, Operand<float>(from, D, kBackwardTile, D), 0);
    if (threadIdx.x < kBackwardTile) {
      m.lses[threadIdx.x] = from[kBackwardTile * D + threadIdx.x] * kLog2e;
      m.deltas[threadIdx.x] = from[(D + 1) * kBackwardTile + threadIdx.x];
    }
  } else {
    stage_rows<kBackwardTile, D>(m.grads, h.dout, i0);
    if (threadIdx.x < kBackwardTile) {
      const std::int64_t i = i0 + threadIdx.x;
      m.lses[threadIdx.x] = i < g.seq ? lse[lse_row + i] * kLog2e : 0.0f;
      m.deltas[threadIdx.x] = i < g.seq ? delta[lse_row + i] : 0.0f;
    }
  }
}

// The dK/dV kernel's results from this thread's accumulators into dqkv's K and V columns (keys below seq, columns
// below d).
template <int D, class In>
__device__ __forceinline__ void store_key_gradients(const float (&dk)[D / 8][4], const float (&dv)[D / 8][4],
                                                    const Head<In>& h, const AttentionGeometry& g,
                                                    const std::int64_t (&key)[2], int t2, float* dqkv) {
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t j = key[e >> 1], col = c * 8 + t2 + (e & 1);
      if (j >= g.seq || col >= g.d) continue;
      float* out = dqkv + (h.b * g.seq + j) * 3 * h.width + h.head * g.d + col;
      out[h.width] = dk[c][e];
      out[2 * h.width] = dv[c][e];
    }
  }
}

// ---- backward, per block of 64 keys: dV = sum_i (dropped P)^T dO, dK = sum_i dS^T Q over the queries i >= j --------
template <int D, Tiles tiles, class In>
__global__ void __launch_bounds__(mma_tiles::kThreads)
    backward_key_kernel(const In* qkv, const float* dout, const float* lse, const float* delta, AttentionGeometry g,
                        float* dqkv) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int kTile = KeyKernelShared<D, tiles>::kTile, kArriving = KeyKernelShared<D, tiles>::kArriving;
  const KeyKernelShared<D, tiles> m(shared);
  bf16x *keys = m.keys, *values = m.values, *grads = m.grads, *query_buffer = m.query_buffer;
  float *lses = m.lses, *deltas = m.deltas, *arriving = m.arriving;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t2 = 2 * (lane & 3);
  const Head<In> h = head_of(qkv, dout, g);
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(kRows);  // the first keys see the most queries
  const std::int64_t key[2] = {first + warp * 16 + (lane >> 2), first + warp * 16 + (lane >> 2) + 8};
  const std::uint64_t mask_row = mask_row_of(g, h.b, h.head);
  const std::int64_t lse_row = (h.b * g.heads + h.head) * g.seq;
  const float scale2 = g.scale * kLog2e;
  const std::int64_t unpadded = keys_before_padding(g, h.b);
  // The queries that see these keys: from `first` (causal), or all.
  const std::int64_t queries_from = g.causal ? first : 0;
  const int count = static_cast<int>((g.seq - queries_from + kBackwardTile - 1) / kBackwardTile);
  const auto first_query = [&](int t) { return queries_from + t * static_cast<std::int64_t>(kBackwardTile); };
  const auto load_queries = [&](int t) {
    fill<tiles, kBackwardTile, D>(query_buffer + slot<tiles>(t) * kTile, h.q, first_query(t));
    if constexpr (tiles == Tiles::async) {  // and the tile's dO and row terms as stored
      copy_query_terms<D>(arriving + slot<tiles>(t) * kArriving, h, g, lse, delta, lse_row, first_query(t));
    }
  };
  fill<tiles, kRows, D>(keys, h.k, first);
  fill<tiles, kRows, D>(values, h.v, first);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  over_tiles<tiles>(
      count, load_queries,
      [&](int t) {
        stage_query_terms<D, tiles>(m, arriving + slot<tiles>(t) * kArriving, h, g, lse, delta, lse_row,
                                    first_query(t));
      },
      [&](int t) {
        const std::int64_t i0 = first_query(t);
        const bf16x* queries = query_buffer + slot<tiles>(t) * kTile;
        float s[kBackwardTile / 8][4] = {}, dp[kBackwardTile / 8][4] = {};  // S^T and dP^T: [16 keys, 32 queries]
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          u32 a[4];
          load_a(a, keys, D + kPad, warp * 16, kk * 16);
          mma_rows<kBackwardTile>(s, a, queries, D + kPad, kk * 16);
          load_a(a, values, D + kPad, warp * 16, kk * 16);
          mma_rows<kBackwardTile>(dp, a, grads, D + kPad, kk * 16);
        }
        // The tile's queries i0 + local that key j sees: first_seen[r] <= local < end (none if key j is padding or
        // past seq).
        const int end = g.seq - i0 < kBackwardTile ? static_cast<int>(g.seq - i0) : kBackwardTile;
        int first_seen[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const std::int64_t from = key[r] >= unpadded ? kBackwardTile : g.causal ? key[r] - i0 : 0;
          first_seen[r] = from < 0 ? 0 : static_cast<int>(from);
        }
#pragma unroll
        for (int n = 0; n < kBackwardTile / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int local = n * 8 + t2 + (e & 1);
            const std::int64_t i = i0 + local, j = key[e >> 1];
            const bool seen = local >= first_seen[e >> 1] && local < end;
            const float p = seen ? exp2f(s[n][e] * scale2 - lses[local]) : 0.0f;
            bool keep = true;
            if (seen && g.dropout > 0.0) {
              keep = math::dropout_keeps(g.dropout, g.seed, g.stream, mask_row + static_cast<std::uint64_t>(i),
                                         static_cast<std::uint64_t>(j));
            }
            const float dpv = seen ? math::dropout(dp[n][e], keep, g.dropout > 0.0 ? g.keep_scale : 1.0f) : 0.0f;
            s[n][e] = math::dropout(p, keep, g.dropout > 0.0 ? g.keep_scale : 1.0f);
            dp[n][e] = math::softmax_grad(p, dpv, deltas[local], g.scale);
          }
        }
        mma_columns<kBackwardTile, D>(dv, s, grads, D + kPad);  // s: the dropped probabilities
        mma_columns<kBackwardTile, D>(dk, dp, queries, D + kPad);  // dp: dS
      });
  store_key_gradients<D>(dk, dv, h, g, key, t2, dqkv);
}

dim3 blocks_of(const AttentionGeometry& g) {
  return dim3(static_cast<unsigned>((g.seq + kRows - 1) / kRows), static_cast<unsigned>(g.heads),
              static_cast<unsigned>(g.batches));
}

// A kernel's launch with `bytes` of dynamic shared memory (allowed above the default 48 KiB first).
template <class Kernel, class... Args>
void launch(Kernel kernel, int bytes, const AttentionGeometry& g, cudaStream_t stream, Args... args) {
  OPTIMUS_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kernel<<<blocks_of(g), mma_tiles::kThreads, bytes, stream>>>(args...);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

template <int D, Tiles tiles, class In>
void forward(const In* qkv, const AttentionGeometry& g, float* out32, std::uint16_t* out16, float* lse,
             cudaStream_t stream) {
  constexpr int bytes = forward_bytes<tiles, D>();
  if (out16 != nullptr) {
    launch(forward_kernel<D, tiles, In, std::uint16_t>, bytes, g, stream, qkv, g, out16, lse);
  } else {
    launch(forward_kernel<D, tiles, In, float>, bytes, g, stream, qkv, g, out32, lse);
  }
}

template <int D, Tiles tiles, class In>
void backward(const In* qkv, const float* dout, const float* lse, const float* delta, const AttentionGeometry& g,
              float* dqkv, cudaStream_t stream) {
  launch(backward_query_kernel<D, tiles, In>, query_kernel_bytes<tiles, D>(), g, stream, qkv, dout, lse, delta, g,
         dqkv);
  launch(backward_key_kernel<D, tiles, In>, key_kernel_bytes<tiles, D>(), g, stream, qkv, dout, lse, delta, g, dqkv);
}

// Whether the tiles may be copied asynchronously: qkv kept in bf16 and dout (the backward's; null in the forward)
// with rows and d in whole 16-byte pieces.
template <class In>
bool copies_async(const In* qkv, const float* dout, const AttentionGeometry& g) {
  if constexpr (std::is_same_v<In, std::uint16_t>) {
    return Operand<std::uint16_t>::aligned16(qkv, 3 * g.heads * g.d, g.d) &&
           (dout == nullptr || Operand<float>::aligned16(dout, g.heads * g.d, g.d));
  }
  return false;
}

// f(D, tiles) for the way the tiles arrive, at head dimension tile width D.
template <int D, class In, class F>
void with_tiles(const In* qkv, const float* dout, const AttentionGeometry& g, F&& f) {
  using Width = std::integral_constant<int, D>;
  if constexpr (std::is_same_v<In, std::uint16_t>) {
    if (copies_async(qkv, dout, g)) return f(Width{}, std::integral_constant<Tiles, Tiles::async>{});
  }
  f(Width{}, std::integral_constant<Tiles, Tiles::converted>{});
}

// The same at the head dimension's tile width.
template <class In, class F>
void dispatch(const In* qkv, const float* dout, const AttentionGeometry& g, F&& f) {
  if (g.d <= 64) {
    with_tiles<64>(qkv, dout, g, f);
  } else {
    with_tiles<128>(qkv, dout, g, f);
  }
}

}  // namespace

template <class In>
void mma_attention_forward(const In* qkv, const AttentionGeometry& g, float* out32, std::uint16_t* out16, float* lse,
                           cudaStream_t stream) {
  dispatch(qkv, static_cast<const float*>(nullptr), g,
           [&](auto d, auto tiles) { forward<d(), tiles(), In>(qkv, g, out32, out16, lse, stream); });
}

template <class In>
void mma_attention_backward(const In* qkv, const float* dout, const float* lse, const float* delta,
                            const AttentionGeometry& g, float* dqkv, cudaStream_t stream) {
  dispatch(qkv, dout, g,
           [&](auto d, auto tiles) { backward<d(), tiles(), In>(qkv, dout, lse, delta, g, dqkv, stream); });
}

template void mma_attention_forward<float>(const float*, const AttentionGeometry&, float*, std::uint16_t*, float*,
                                           cudaStream_t);
template void mma_attention_forward<std::uint16_t>(const std::uint16_t*, const AttentionGeometry&, float*,
                                                   std::uint16_t*, float*, cudaStream_t);
template void mma_attention_backward<float>(const float*, const float*, const float*, const float*,
                                            const AttentionGeometry&, float*, cudaStream_t);
template void mma_attention_backward<std::uint16_t>(const std::uint16_t*, const float*, const float*, const float*,
                                                    const AttentionGeometry&, float*, cudaStream_t);

}  // namespace optimus::cuda::detail
