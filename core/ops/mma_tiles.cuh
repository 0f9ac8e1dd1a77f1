// Tensor-core tiles for the fused attention's CUDA kernels (flash_attention_mma.cu): bf16 fragments of the m16n8k16
// mma.sync instruction, a head's operands in qkv or dout, and their tiles in shared memory (row-major, each row padded
// by kPad bf16 so that a warp's fragment loads hit 32 different banks).
//
// Per thread of a warp (lane = 4 g + t): an A fragment holds rows g and g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9;
// a B fragment holds columns (n) g, rows (k) 2t, 2t + 1, 2t + 8, 2t + 9; an accumulator holds rows g and g + 8,
// columns 2t and 2t + 1 (c[0], c[1] in row g; c[2], c[3] in row g + 8) (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"). Fragments come from shared memory by ldmatrix, two B tiles at a time: a B operand read along a
// tile's rows (the head dimension) is load_b_pair; one read down its columns (the sequence: V in P V, K in dS K, Q and
// dO in the key kernel) is load_b_transposed, ldmatrix's transposing load.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_kernels.hpp"

namespace optimus::cuda::detail::mma_tiles {

using u32 = std::uint32_t;
using bf16x = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // the rows a block owns
constexpr int kPad = 8;             // bf16 of padding per shared-memory row

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

// ldmatrix: four 8 x 8 bf16 matrices from shared memory, lanes 8m.. 8m + 7 naming the rows of matrix m (16 bytes
// each); each thread then holds, of matrix m, in x[m]: row g, columns 2t and 2t + 1 (transposed: rows 2t, 2t + 1 of
// column g).
__device__ inline void ldmatrix_x4(u32 (&x)[4], const bf16x* row) {
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
               : "r"(address));
}
__device__ inline void ldmatrix_x4_trans(u32 (&x)[4], const bf16x* row) {
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
               : "r"(address));
}

// The A fragment of rows r0.. r0 + 15, columns k0.. k0 + 15 of a row-major tile (pitch in elements): matrices (r0,
// k0), (r0 + 8, k0), (r0, k0 + 8), (r0 + 8, k0 + 8) are a[0] .. a[3].
__device__ inline void load_a(u32 (&a)[4], const bf16x* tile, int pitch, int r0, int k0) {
  const int lane = threadIdx.x & 31, m = lane >> 3;
  ldmatrix_x4(a, tile + (r0 + (m & 1) * 8 + (lane & 7)) * pitch + k0 + (m >> 1) * 8);
}

// The B fragments (k 16 x n 8) of two column tiles n0.. n0 + 7 and n0 + 8.. n0 + 15 whose column n is the tile's row
// n, columns k0.. k0 + 15 (B = tile^T): matrices (n0, k0), (n0, k0 + 8) are b[0], b[1] of the first tile, (n0 + 8,
// k0), (n0 + 8, k0 + 8) b[2], b[3] of the second.
__device__ inline void load_b_pair(u32 (&b)[4], const bf16x* tile, int pitch, int n0, int k0) {
  const int lane = threadIdx.x & 31, m = lane >> 3;
  ldmatrix_x4(b, tile + (n0 + (m >> 1) * 8 + (lane & 7)) * pitch + k0 + (m & 1) * 8);
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
      : base(b),
        stride(s),
        seq(n),
        d(width),
        by4(reinterpret_cast<std::uintptr_t>(b) % (4 * sizeof(In)) == 0 && s % 4 == 0 && width % 4 == 0) {}
  // Whether rows start at and d ends on 16-byte boundaries (copy_rows_async may read it).
  static bool aligned16(const In* b, std::int64_t s, std::int64_t width) {
    constexpr std::int64_t per16 = 16 / sizeof(In);
    return reinterpret_cast<std::uintptr_t>(b) % 16 == 0 && s % per16 == 0 && width % per16 == 0;
  }
  __device__ float at(std::int64_t i, std::int64_t c) const {
    return i < seq && c < d ? value_of(base[i * stride + c]) : 0.0f;
  }
  // Columns c.. c + 3 of row i as bf16 pairs (c, c + 1) and (c + 2, c + 3), zeros past seq and d.
  __device__ uint2 four(std::int64_t i, std::int64_t c) const {
    if constexpr (std::is_same_v<In, std::uint16_t>) {
      if (by4) return i < seq && c < d ? *reinterpret_cast<const uint2*>(base + i * stride + c) : make_uint2(0, 0);
      const auto bits = [&](std::int64_t col) {
        return i < seq && col < d ? static_cast<u32>(base[i * stride + col]) : 0u;
      };
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
  return Head<In>{b,
                  head,
                  width,
                  Operand<In>(q, 3 * width, g.seq, g.d),
                  Operand<In>(q + width, 3 * width, g.seq, g.d),
                  Operand<In>(q + 2 * width, 3 * width, g.seq, g.d),
                  Operand<float>(dO, width, g.seq, g.d)};
}

// The B fragments (k 16 x n 8) of two column tiles n0.. n0 + 7 and n0 + 8.. n0 + 15 where B[k][n] is the row-major
// tile's element (k0 + k, n), read down the tile's columns: matrices (k0, n0), (k0 + 8, n0) transposed are b[0], b[1]
// of the first tile, (k0, n0 + 8), (k0 + 8, n0 + 8) b[2], b[3] of the second.
__device__ inline void load_b_transposed(u32 (&b)[4], const bf16x* tile, int pitch, int n0, int k0) {
  const int lane = threadIdx.x & 31, m = lane >> 3;
  ldmatrix_x4_trans(b, tile + (k0 + (m & 1) * 8 + (lane & 7)) * pitch + n0 + (m >> 1) * 8);
}

// acc[n], the 16 x 8 tiles of a 16 x W product, += a (an A fragment: 16 rows, columns k0.. k0 + 15) times the tile's
// rows 0.. W - 1 at columns k0.. k0 + 15 transposed: one step along k of scores S = Q K^T (and dP = dO V^T, ...).
template <int W>
__device__ void mma_rows(float (&acc)[W / 8][4], const u32 (&a)[4], const bf16x* tile, int pitch, int k0) {
#pragma unroll
  for (int n = 0; n < W / 8; n += 2) {
    u32 b[4];
    load_b_pair(b, tile, pitch, n * 8, k0);
    mma(acc[n], a, b[0], b[1]);
    mma(acc[n + 1], a, b[2], b[3]);
  }
}

// acc (16 x D) += p (16 x W, accumulator tiles rounded into A fragments) times the tile's rows 0.. W - 1 (W x D, read
// down its columns): P V, dS K, P^T dO, dS^T Q.
template <int W, int D>
__device__ void mma_columns(float (&acc)[D / 8][4], const float (&p)[W / 8][4], const bf16x* tile, int pitch) {
#pragma unroll
  for (int kk = 0; kk < W / 16; ++kk) {
    u32 a[4];
    as_a(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
    for (int c = 0; c < D / 8; c += 2) {
      u32 b[4];
      load_b_transposed(b, tile, pitch, c * 8, kk * 16);
      mma(acc[c], a, b[0], b[1]);
      mma(acc[c + 1], a, b[2], b[3]);
    }
  }
}

// 16 (or 4) bytes from global memory into shared memory without passing through registers (zeros where !valid); the
// copies since the last commit form a group, and wait<N> returns once at most N groups are still in flight.
__device__ inline void copy_async(void* shared, const void* global, bool valid) {
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(valid ? 16 : 0));
}
__device__ inline void copy_async_4(void* shared, const void* global, bool valid) {
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global), "r"(valid ? 4 : 0));
}
__device__ inline void commit_async() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Rows first.. first + R - 1 of an operand, as stored (bf16 bits into bf16, f32 into f32), into tile[R][Pitch] by
// asynchronous 16-byte copies (zeros past seq and d). Operand::aligned16 required: rows and d in whole 16-byte pieces.
template <int R, int D, int Pitch, class In, class T>
__device__ void copy_rows_async(T* tile, const Operand<In>& x, std::int64_t first) {
  static_assert(sizeof(T) == sizeof(In), "copies keep the operand's element type");
  constexpr int per16 = 16 / static_cast<int>(sizeof(In));
#pragma unroll 4
  for (int e = threadIdx.x; e < R * D / per16; e += kThreads) {
    const int r = e / (D / per16), c = per16 * (e % (D / per16));
    const std::int64_t i = first + r;
    const bool valid = i < x.seq && c < x.d;
    copy_async(tile + r * Pitch + c, valid ? x.base + i * x.stride + c : x.base, valid);
  }
}

}  // namespace optimus::cuda::detail::mma_tiles
