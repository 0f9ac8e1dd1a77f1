// Fused causal attention on tensor cores (flash_attention.cuh): FlashAttention-2's algorithm with bf16 operands and f32
// accumulation, through the m16n8k16 mma.sync instruction, so that a product's accumulator lands in registers whose
// rows each thread knows (PTX ISA, "Matrix Fragments for mma.m16n8k16"): the online softmax rescales them in place,
// and the probabilities go from the scores' accumulators straight into the next product's A fragments.
//
// A block is 4 warps; each warp owns 16 rows (queries forward and in the dQ kernel, keys in the dK/dV kernel) and
// keeps that operand's fragments and its accumulators in registers; the other operand is staged tile by tile in
// shared memory as bf16 (rounded to nearest even on the way in), row-major where it is a product's B operand read
// along the head dimension and transposed where it is read along the sequence. Rows are padded by 8 bf16 so that the
// fragment loads of a warp hit 32 different banks. Head dimensions up to 64 run in tiles of 64 columns, up to 128 in
// tiles of 128: columns past d are zeros.
//
// Per thread of a warp (lane = 4 g + t): an A fragment holds rows g and g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9;
// a B fragment holds columns (n) g, rows (k) 2t, 2t + 1, 2t + 8, 2t + 9; an accumulator holds rows g and g + 8,
// columns 2t and 2t + 1 (c[0], c[1] in row g; c[2], c[3] in row g + 8).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "block_reduce.cuh"
#include "flash_attention.cuh"
#include "optimus/cuda/check.hpp"

namespace optimus::cuda::detail {
namespace {

using u32 = std::uint32_t;
using bf16x = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // the rows a block owns
constexpr int kForwardKeys = 64;    // keys per tile in the forward
constexpr int kBackwardTile = 32;   // rows of the other operand per tile in the backward kernels
constexpr int kPad = 8;             // bf16 of padding per shared-memory row
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ inline u32 pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
}

// c += a b for one 16 x 8 x 16 tile.
__device__ inline void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The A fragment of rows r0.. r0 + 15, columns k0.. k0 + 15 of a row-major tile (pitch in elements).
__device__ inline void load_a(u32 (&a)[4], const bf16x* tile, int pitch, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  const bf16x* p = tile + (r0 + (lane >> 2)) * pitch + k0 + 2 * (lane & 3);
  a[0] = *reinterpret_cast<const u32*>(p);
  a[1] = *reinterpret_cast<const u32*>(p + 8 * pitch);
  a[2] = *reinterpret_cast<const u32*>(p + 8);
  a[3] = *reinterpret_cast<const u32*>(p + 8 * pitch + 8);
}

// The B fragment (k 16 x n 8) whose column n is the tile's row n0 + n, columns k0.. k0 + 15 (B = tile^T).
__device__ inline void load_b(u32& b0, u32& b1, const bf16x* tile, int pitch, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const bf16x* p = tile + (n0 + (lane >> 2)) * pitch + k0 + 2 * (lane & 3);
  b0 = *reinterpret_cast<const u32*>(p);
  b1 = *reinterpret_cast<const u32*>(p + 8);
}

// Two accumulator tiles (columns 16 kk.. 16 kk + 15 of a 16-row product) as the A fragment of the next product.
__device__ inline void as_a(u32 (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack(lo[0], lo[1]);
  a[1] = pack(lo[2], lo[3]);
  a[2] = pack(hi[0], hi[1]);
  a[3] = pack(hi[2], hi[3]);
}

// One head's operand in qkv (f32, or bf16 bits: In = std::uint16_t) or dout (f32): row i, column c at
// base[i * stride + c], c < d, i < seq. Read 4 columns at a time (one 16- or 8-byte load) where the rows and d allow.
template <class In>
struct Operand {
  const In* base;
  std::int64_t stride, seq, d;
  bool by4;

  __device__ Operand(const In* b, std::int64_t s, std::int64_t n, std::int64_t width)
      : base(b), stride(s), seq(n), d(width),
        by4(reinterpret_cast<std::uintptr_t>(b) % (4 * sizeof(In)) == 0 && s % 4 == 0 && width % 4 == 0) {}
  __device__ static float value(float x) { return x; }
  __device__ static float value(std::uint16_t bits) { return __uint_as_float(static_cast<u32>(bits) << 16); }
  __device__ float at(std::int64_t i, std::int64_t c) const {
    return i < seq && c < d ? value(base[i * stride + c]) : 0.0f;
  }
  // Columns c.. c + 3 of row i as bf16 pairs (c, c + 1) and (c + 2, c + 3), zeros past seq and d.
  __device__ uint2 four(std::int64_t i, std::int64_t c) const {
    if constexpr (std::is_same_v<In, std::uint16_t>) {
      if (by4) return i < seq && c < d ? *reinterpret_cast<const uint2*>(base + i * stride + c) : make_uint2(0, 0);
      const auto bits = [&](std::int64_t col) { return i < seq && col < d ? static_cast<u32>(base[i * stride + col]) : 0u; };
      return make_uint2(bits(c) | bits(c + 1) << 16, bits(c + 2) | bits(c + 3) << 16);
    } else {
      if (by4 && i < seq && c < d) {
        const float4 v = *reinterpret_cast<const float4*>(base + i * stride + c);
        return make_uint2(pack(v.x, v.y), pack(v.z, v.w));
      }
      return make_uint2(pack(at(i, c), at(i, c + 1)), pack(at(i, c + 2), at(i, c + 3)));
    }
  }
};

// Rows first.. first + R - 1 of x into tile[R][D + kPad] (bf16; zeros past seq and d), 4 columns per thread and step.
template <int R, int D, class In>
__device__ void stage_rows(bf16x* tile, const Operand<In>& x, std::int64_t first) {
#pragma unroll 4
  for (int e = threadIdx.x; e < R * D / 4; e += kThreads) {
    const int r = e / (D / 4), c = 4 * (e % (D / 4));
    *reinterpret_cast<uint2*>(tile + r * (D + kPad) + c) = x.four(first + r, c);
  }
}

// The same rows transposed: tile[D][R + kPad], column c of the rows in tile row c.
template <int R, int D, class In>
__device__ void stage_columns(bf16x* tile, const Operand<In>& x, std::int64_t first) {
  auto* bits = reinterpret_cast<std::uint16_t*>(tile);
#pragma unroll 4
  for (int e = threadIdx.x; e < R * D / 4; e += kThreads) {
    const int r = e / (D / 4), c = 4 * (e % (D / 4));
    const uint2 v = x.four(first + r, c);
    bits[c * (R + kPad) + r] = static_cast<std::uint16_t>(v.x);
    bits[(c + 1) * (R + kPad) + r] = static_cast<std::uint16_t>(v.x >> 16);
    bits[(c + 2) * (R + kPad) + r] = static_cast<std::uint16_t>(v.y);
    bits[(c + 3) * (R + kPad) + r] = static_cast<std::uint16_t>(v.y >> 16);
  }
}

// The A fragments of 16 rows from row r0 of x, all D columns, straight from global memory (once per block).
template <int D, class In>
__device__ void load_rows(u32 (&a)[D / 16][4], const Operand<In>& x, std::int64_t r0) {
  const int lane = threadIdx.x & 31;
  const std::int64_t i = r0 + (lane >> 2);
  #pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = kk * 16 + 2 * (lane & 3);
    a[kk][0] = pack(x.at(i, c), x.at(i, c + 1));
    a[kk][1] = pack(x.at(i + 8, c), x.at(i + 8, c + 1));
    a[kk][2] = pack(x.at(i, c + 8), x.at(i, c + 9));
    a[kk][3] = pack(x.at(i + 8, c + 8), x.at(i + 8, c + 9));
  }
}

// The sum of v over the 4 threads that hold one accumulator row.
__device__ inline float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ inline float row_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// Head blockIdx.y of sequence blockIdx.z: its Q, K, V and (dout) dO.
template <class In>
struct Head {
  std::int64_t b, head, width;
  Operand<In> q, k, v;
  Operand<float> dout;
};

template <class In>
__device__ Head<In> head_of(const In* qkv, const float* dout, const AttentionGeometry& g) {
  const std::int64_t b = blockIdx.z, head = blockIdx.y, width = g.heads * g.d;
  const In* q = qkv + b * g.seq * 3 * width + head * g.d;
  const float* dO = dout == nullptr ? nullptr : dout + b * g.seq * width + head * g.d;
  return Head<In>{b, head, width, Operand<In>(q, 3 * width, g.seq, g.d), Operand<In>(q + width, 3 * width, g.seq, g.d),
                  Operand<In>(q + 2 * width, 3 * width, g.seq, g.d), Operand<float>(dO, width, g.seq, g.d)};
}

// ---- forward: a block of 64 queries against key tiles of 64 -------------------------------------------------------
template <int D, class In, class Out>
__global__ void __launch_bounds__(kThreads) forward_kernel(const In* qkv, AttentionGeometry g, Out* out, float* lse) {
  __shared__ bf16x keys[kForwardKeys * (D + kPad)];
  __shared__ bf16x values_t[D * (kForwardKeys + kPad)];
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
  const std::int64_t last = first + kRows < g.seq ? first + kRows : g.seq;  // one past the last key the block sees
  for (std::int64_t j0 = 0; j0 < last; j0 += kForwardKeys) {
    __syncthreads();  // every warp is done with the previous tile
    stage_rows<kForwardKeys, D>(keys, h.k, j0);
    stage_columns<kForwardKeys, D>(values_t, h.v, j0);
    __syncthreads();
    float s[kForwardKeys / 8][4] = {};
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      #pragma unroll
      for (int n = 0; n < kForwardKeys / 8; ++n) {
        u32 b0, b1;
        load_b(b0, b1, keys, D + kPad, n * 8, kk * 16);
        mma(s[n], q[kk], b0, b1);
      }
    }
    float grown[2] = {max[0], max[1]};
    #pragma unroll
    for (int n = 0; n < kForwardKeys / 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t j = j0 + n * 8 + t2 + (e & 1);
        const float x = j <= row[e >> 1] && j < g.seq ? s[n][e] * scale2 : -INFINITY;
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
        const float p = exp2f(s[n][e] - max[e >> 1]);
        sum[e >> 1] += p;
        s[n][e] = p == 0.0f ? 0.0f
                            : dropped(p, g, mask_row + static_cast<std::uint64_t>(row[e >> 1]), j0 + n * 8 + t2 + (e & 1));
      }
    }
    #pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      o[c][0] *= rescale[0];
      o[c][1] *= rescale[0];
      o[c][2] *= rescale[1];
      o[c][3] *= rescale[1];
    }
    #pragma unroll
    for (int kk = 0; kk < kForwardKeys / 16; ++kk) {
      u32 a[4];
      as_a(a, s[2 * kk], s[2 * kk + 1]);
      #pragma unroll
      for (int c = 0; c < D / 8; ++c) {
        u32 b0, b1;
        load_b(b0, b1, values_t, kForwardKeys + kPad, c * 8, kk * 16);
        mma(o[c], a, b0, b1);
      }
    }
  }
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

// ---- backward, per block of 64 queries: D = sum_j P dP (pass 0), then dQ = sum_j dS K (pass 1) --------------------
template <int D, class In>
__global__ void __launch_bounds__(kThreads) backward_query_kernel(const In* qkv, const float* dout, const float* lse,
                                                                  AttentionGeometry g, float* dqkv, float* delta) {
  __shared__ bf16x keys[kBackwardTile * (D + kPad)];
  __shared__ bf16x keys_t[D * (kBackwardTile + kPad)];
  __shared__ bf16x values[kBackwardTile * (D + kPad)];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t2 = 2 * (lane & 3);
  const Head<In> h = head_of(qkv, dout, g);
  const std::int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<std::int64_t>(kRows);
  const std::int64_t row[2] = {first + warp * 16 + (lane >> 2), first + warp * 16 + (lane >> 2) + 8};
  const std::uint64_t mask_row = mask_row_of(g, h.b, h.head);
  const std::int64_t lse_row = (h.b * g.heads + h.head) * g.seq;
  const float scale2 = g.scale * kLog2e;
  float lse2[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) lse2[r] = row[r] < g.seq ? lse[lse_row + row[r]] * kLog2e : 0.0f;
  u32 q[D / 16][4], dO[D / 16][4];
  load_rows<D>(q, h.q, first + warp * 16);
  load_rows<D>(dO, h.dout, first + warp * 16);
  float dq[D / 8][4] = {};
  float d_row[2] = {0.0f, 0.0f};
  const std::int64_t last = first + kRows < g.seq ? first + kRows : g.seq;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t j0 = 0; j0 < last; j0 += kBackwardTile) {
      __syncthreads();
      stage_rows<kBackwardTile, D>(keys, h.k, j0);
      stage_rows<kBackwardTile, D>(values, h.v, j0);
      if (pass == 1) stage_columns<kBackwardTile, D>(keys_t, h.k, j0);
      __syncthreads();
      float s[kBackwardTile / 8][4] = {}, dp[kBackwardTile / 8][4] = {};
      #pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        #pragma unroll
        for (int n = 0; n < kBackwardTile / 8; ++n) {
          u32 b0, b1;
          load_b(b0, b1, keys, D + kPad, n * 8, kk * 16);
          mma(s[n], q[kk], b0, b1);
          load_b(b0, b1, values, D + kPad, n * 8, kk * 16);
          mma(dp[n], dO[kk], b0, b1);
        }
      }
      #pragma unroll
      for (int n = 0; n < kBackwardTile / 8; ++n) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const std::int64_t j = j0 + n * 8 + t2 + (e & 1);
          const bool seen = j <= row[r] && row[r] < g.seq;
          const float p = seen ? exp2f(s[n][e] * scale2 - lse2[r]) : 0.0f;
          const float dpv = seen ? dropped(dp[n][e], g, mask_row + static_cast<std::uint64_t>(row[r]), j) : 0.0f;
          if (pass == 0) {
            d_row[r] += p * dpv;
          } else {
            s[n][e] = math::softmax_grad(p, dpv, d_row[r], g.scale);
          }
        }
      }
      if (pass == 0) continue;
      #pragma unroll
      for (int kk = 0; kk < kBackwardTile / 16; ++kk) {
        u32 a[4];
        as_a(a, s[2 * kk], s[2 * kk + 1]);
        #pragma unroll
        for (int c = 0; c < D / 8; ++c) {
          u32 b0, b1;
          load_b(b0, b1, keys_t, kBackwardTile + kPad, c * 8, kk * 16);
          mma(dq[c], a, b0, b1);
        }
      }
    }
    if (pass == 0) {
      #pragma unroll
      for (int r = 0; r < 2; ++r) d_row[r] = row_sum(d_row[r]);
    }
  }
  #pragma unroll
  for (int c = 0; c < D / 8; ++c) {
    #pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t i = row[e >> 1], col = c * 8 + t2 + (e & 1);
      if (i < g.seq && col < g.d) dqkv[(h.b * g.seq + i) * 3 * h.width + h.head * g.d + col] = dq[c][e];
    }
  }
  if ((lane & 3) != 0) return;
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] < g.seq) delta[lse_row + row[r]] = d_row[r];
  }
}

// ---- backward, per block of 64 keys: dV = sum_i (dropped P)^T dO, dK = sum_i dS^T Q over the queries i >= j --------
template <int D>
constexpr int key_kernel_shared_bytes() {
  return static_cast<int>(sizeof(bf16x)) *
             (2 * kRows * (D + kPad) + 2 * kBackwardTile * (D + kPad) + 2 * D * (kBackwardTile + kPad)) +
         2 * kBackwardTile * static_cast<int>(sizeof(float));
}

template <int D, class In>
__global__ void __launch_bounds__(kThreads) backward_key_kernel(const In* qkv, const float* dout, const float* lse,
                                                                const float* delta, AttentionGeometry g, float* dqkv) {
  extern __shared__ __align__(16) unsigned char shared[];
  bf16x* keys = reinterpret_cast<bf16x*>(shared);              // [kRows][D + kPad]
  bf16x* values = keys + kRows * (D + kPad);                    // [kRows][D + kPad]
  bf16x* queries = values + kRows * (D + kPad);                 // [kBackwardTile][D + kPad]
  bf16x* grads = queries + kBackwardTile * (D + kPad);          // [kBackwardTile][D + kPad]
  bf16x* queries_t = grads + kBackwardTile * (D + kPad);        // [D][kBackwardTile + kPad]
  bf16x* grads_t = queries_t + D * (kBackwardTile + kPad);      // [D][kBackwardTile + kPad]
  float* lses = reinterpret_cast<float*>(grads_t + D * (kBackwardTile + kPad));  // [kBackwardTile], log2 units
  float* deltas = lses + kBackwardTile;                                           // [kBackwardTile]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t2 = 2 * (lane & 3);
  const Head<In> h = head_of(qkv, dout, g);
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(kRows);  // the first keys see the most queries
  const std::int64_t key[2] = {first + warp * 16 + (lane >> 2), first + warp * 16 + (lane >> 2) + 8};
  const std::uint64_t mask_row = mask_row_of(g, h.b, h.head);
  const std::int64_t lse_row = (h.b * g.heads + h.head) * g.seq;
  const float scale2 = g.scale * kLog2e;
  stage_rows<kRows, D>(keys, h.k, first);
  stage_rows<kRows, D>(values, h.v, first);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (std::int64_t i0 = first; i0 < g.seq; i0 += kBackwardTile) {  // queries before the first key see none
    __syncthreads();
    stage_rows<kBackwardTile, D>(queries, h.q, i0);
    stage_rows<kBackwardTile, D>(grads, h.dout, i0);
    stage_columns<kBackwardTile, D>(queries_t, h.q, i0);
    stage_columns<kBackwardTile, D>(grads_t, h.dout, i0);
    if (threadIdx.x < kBackwardTile) {
      const std::int64_t i = i0 + threadIdx.x;
      lses[threadIdx.x] = i < g.seq ? lse[lse_row + i] * kLog2e : 0.0f;
      deltas[threadIdx.x] = i < g.seq ? delta[lse_row + i] : 0.0f;
    }
    __syncthreads();
    float s[kBackwardTile / 8][4] = {}, dp[kBackwardTile / 8][4] = {};  // S^T and dP^T: [16 keys, 32 queries]
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      u32 a[4];
      load_a(a, keys, D + kPad, warp * 16, kk * 16);
      #pragma unroll
      for (int n = 0; n < kBackwardTile / 8; ++n) {
        u32 b0, b1;
        load_b(b0, b1, queries, D + kPad, n * 8, kk * 16);
        mma(s[n], a, b0, b1);
      }
      load_a(a, values, D + kPad, warp * 16, kk * 16);
      #pragma unroll
      for (int n = 0; n < kBackwardTile / 8; ++n) {
        u32 b0, b1;
        load_b(b0, b1, grads, D + kPad, n * 8, kk * 16);
        mma(dp[n], a, b0, b1);
      }
    }
    #pragma unroll
    for (int n = 0; n < kBackwardTile / 8; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int local = n * 8 + t2 + (e & 1);
        const std::int64_t i = i0 + local, j = key[e >> 1];
        const bool seen = i >= j && i < g.seq && j < g.seq;
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
    #pragma unroll
    for (int kk = 0; kk < kBackwardTile / 16; ++kk) {
      u32 kept[4], ds[4];
      as_a(kept, s[2 * kk], s[2 * kk + 1]);
      as_a(ds, dp[2 * kk], dp[2 * kk + 1]);
      #pragma unroll
      for (int c = 0; c < D / 8; ++c) {
        u32 b0, b1;
        load_b(b0, b1, grads_t, kBackwardTile + kPad, c * 8, kk * 16);
        mma(dv[c], kept, b0, b1);
        load_b(b0, b1, queries_t, kBackwardTile + kPad, c * 8, kk * 16);
        mma(dk[c], ds, b0, b1);
      }
    }
  }
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

dim3 blocks_of(const AttentionGeometry& g) {
  return dim3(static_cast<unsigned>((g.seq + kRows - 1) / kRows), static_cast<unsigned>(g.heads),
              static_cast<unsigned>(g.batches));
}

template <int D, class In>
void forward(const In* qkv, const AttentionGeometry& g, float* out32, std::uint16_t* out16, float* lse,
             cudaStream_t stream) {
  if (out16 != nullptr) {
    forward_kernel<D, In, std::uint16_t><<<blocks_of(g), kThreads, 0, stream>>>(qkv, g, out16, lse);
  } else {
    forward_kernel<D, In, float><<<blocks_of(g), kThreads, 0, stream>>>(qkv, g, out32, lse);
  }
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

template <int D, class In>
void backward(const In* qkv, const float* dout, const float* lse, const AttentionGeometry& g, float* dqkv,
              float* delta, cudaStream_t stream) {
  backward_query_kernel<D, In><<<blocks_of(g), kThreads, 0, stream>>>(qkv, dout, lse, g, dqkv, delta);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
  constexpr int bytes = key_kernel_shared_bytes<D>();
  OPTIMUS_CHECK_CUDA(
      cudaFuncSetAttribute(backward_key_kernel<D, In>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  backward_key_kernel<D, In><<<blocks_of(g), kThreads, bytes, stream>>>(qkv, dout, lse, delta, g, dqkv);
  OPTIMUS_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

template <class In>
void mma_attention_forward(const In* qkv, const AttentionGeometry& g, float* out32, std::uint16_t* out16, float* lse,
                           cudaStream_t stream) {
  if (g.d <= 64) {
    forward<64>(qkv, g, out32, out16, lse, stream);
  } else {
    forward<128>(qkv, g, out32, out16, lse, stream);
  }
}

template <class In>
void mma_attention_backward(const In* qkv, const float* dout, const float* lse, const AttentionGeometry& g,
                            float* dqkv, float* delta, cudaStream_t stream) {
  if (g.d <= 64) {
    backward<64>(qkv, dout, lse, g, dqkv, delta, stream);
  } else {
    backward<128>(qkv, dout, lse, g, dqkv, delta, stream);
  }
}

template void mma_attention_forward<float>(const float*, const AttentionGeometry&, float*, std::uint16_t*, float*,
                                           cudaStream_t);
template void mma_attention_forward<std::uint16_t>(const std::uint16_t*, const AttentionGeometry&, float*,
                                                   std::uint16_t*, float*, cudaStream_t);
template void mma_attention_backward<float>(const float*, const float*, const float*, const AttentionGeometry&, float*,
                                            float*, cudaStream_t);
template void mma_attention_backward<std::uint16_t>(const std::uint16_t*, const float*, const float*,
                                                    const AttentionGeometry&, float*, float*, cudaStream_t);

}  // namespace optimus::cuda::detail
