// CPU kernels on Eigen, for rank-2 views whose rows are contiguous (stride(1) == 1).
// Every function states its shapes; all are instantiated for float and double.
#pragma once

#include <string>

#include "optimus/core/tensor.hpp"
#include "optimus/core/trans.hpp"

namespace optimus::cpu {

// Which library multiplies matrices on the CPU, e.g. "Eigen 3.4.0 (1 thread)" or "OpenBLAS ... (1 thread)".
std::string gemm_backend();
// Sets the threads the GEMM backend may use in this process (Eigen: always 1; OpenBLAS: its pool size).
void set_gemm_threads(int threads);
// Takes the GEMM backend's own working memory now, so that running out of memory later fails in Optimus's
// allocations, with an error naming the request. OpenBLAS allocates a buffer of about 128 MiB for each thread that
// multiplies at the same moment and, when malloc fails there, retries forever (a hang under `ulimit -v`); this checks
// that `threads_at_once` buffers can be had together (the process's in-process ranks: each multiplies on its own
// thread) — optimus::Error naming the bytes if not — and takes one from OpenBLAS's pool for the calling thread, holding
// it until release_gemm_buffer(): while every rank thread holds one at once, the pool grows to one buffer per thread
// multiplying at once, and OpenBLAS keeps them. Eigen needs nothing. prepare_gemm_together (comm/all_or_throw.hpp)
// calls both on every rank, agreeing on the outcome in between.
void prepare_gemm(int threads_at_once);
void release_gemm_buffer();  // gives the calling thread's held buffer back to OpenBLAS's pool (nothing if none)

using optimus::Trans;

// C = alpha * op(A) * op(B) + beta * C, with op(X) = X or X^T.
// op(A): [m, k], op(B): [k, n], C: [m, n]. beta == 0 overwrites C (NaNs in C do not propagate).
template <class T>
void gemm(Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta,
          TensorView<T> c);

// y = alpha * x + beta * y, element-wise; x, y: [m, n].
template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y);

// y = x; x, y: [m, n].
template <class T>
void copy(TensorView<const T> x, TensorView<T> y);

// y = value everywhere; y: [m, n].
template <class T>
void fill(TensorView<T> y, T value);

// y[r, :] += row for every r; row: [1, n], y: [m, n].
template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y);

// out = sum over the rows of x (overwrites); x: [m, n], out: [1, n].
template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out);

// GELU, tanh form: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); x, y: [m, n].
template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y);
// dx = dy * gelu'(x); x, dy, dx: [m, n] (dx may alias dy).
template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx);

}  // namespace optimus::cpu
