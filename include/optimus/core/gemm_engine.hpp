// The GEMM engine of an accelerator: cuBLASLt on a GPU (optimus/cuda/lt_gemm.hpp) or the simulated device's strict
// stand-in for it (optimus/sim/lt_gemm.hpp), behind one interface so that everything above cuBLASLt's own calls —
// how a row-major product becomes a column-major cuBLASLt matmul, the alignment it promises, the epilogue rules and
// the plan cache — is one piece of code that CI runs on the simulated device.
//
// A row-major product is handed to cuBLASLt (column-major) as the transposed problem:
//   C[m, n] = alpha op(A) op(B) + beta C   ==   C^T[n, m] = alpha op(B)^T op(A)^T + beta C^T
// whose first operand is B's storage and second A's (a row-major [r, c] matrix with row stride ld is a column-major
// [c, r] one with leading dimension ld). A bias per column of C is cuBLASLt's bias per row of D (length n); GELU's
// input (pre) is column-major [n, m] with leading dimension ld_pre.
//
// Plans: preparing a matmul (cuBLASLt's descriptors, layouts, preference and heuristic search) costs far more than
// running it, so an engine prepares each distinct lt::Matmul once and keeps the plan (plans_prepared() counts them:
// constant in a steady state). A plan depends on the alignment of the buffers (cuBLASLt picks its algorithm for the
// alignment its preference promises, 256 bytes when unset), so the alignments are part of the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "optimus/core/device_memory_pool.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/core/trans.hpp"

namespace optimus {

// f32: f32 in and out, f32 compute; tf32: f32 in and out, TF32 tensor cores with f32 accumulation; bf16: bf16 in and
// out, f32 accumulation; bf16_to_f32: bf16 in, f32 out, f32 accumulation (mixed-precision products).
enum class GemmPrecision { f32, tf32, bf16, bf16_to_f32 };

// A row-major product on an accelerator: C[m, n] = alpha op(A) op(B) + beta C with op(A): [m, k], op(B): [k, n],
// leading dimensions in elements, device pointers of the engine's device; then an optional epilogue on C (bias [n]
// added to every row; or bias, then GELU with its input written to pre [m, n], leading dimension ld_pre: f32 outputs
// only); as a strided batch of `count` products, matrix i of each operand stride_* elements after matrix i - 1.
struct GemmCall {
  struct Epilogue {
    enum class Kind { none, bias, bias_gelu };
    Kind kind = Kind::none;
    const float* bias = nullptr;
    float* pre = nullptr;
    std::int64_t ld_pre = 0;
  };
  struct Batch {
    std::int64_t count = 1;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  };
  GemmPrecision precision = GemmPrecision::f32;
  Trans trans_a = Trans::no, trans_b = Trans::no;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
  Epilogue epilogue = {};
  Batch batch = {};
};

// cuBLASLt's model of a matmul, without its headers: what the engines agree on.
namespace lt {

enum class DataType { f32, bf16 };
enum class Compute { f32, f32_fast_tf32 };
enum class Epilogue { none, bias, gelu_aux_bias };

// A column-major matrix (cublasLtMatrixLayout): rows x cols, leading dimension ld; `batch` matrices batch_stride
// elements apart.
struct MatrixLayout {
  DataType type = DataType::f32;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::int64_t batch = 1, batch_stride = 0;
  friend bool operator==(const MatrixLayout&, const MatrixLayout&) = default;
};

// Everything a cuBLASLt matmul is prepared from — matmul descriptor, layouts and preference — and so the key of an
// engine's plans. a and b are cuBLASLt's A and B: the row-major product's B and A. Alignments are in bytes.
struct Matmul {
  Compute compute = Compute::f32;
  DataType scale = DataType::f32;
  Trans trans_a = Trans::no, trans_b = Trans::no;
  MatrixLayout a, b, c, d;
  Epilogue epilogue = Epilogue::none;
  DataType bias_type = DataType::f32;
  DataType aux_type = DataType::f32;
  std::int64_t aux_ld = 0;
  std::uint32_t align_a = 256, align_b = 256, align_c = 256, align_d = 256, align_bias = 256, align_aux = 256;
  std::size_t workspace = 0;
  friend bool operator==(const Matmul&, const Matmul&) = default;
};

// The buffers of one run of a prepared matmul (cuBLASLt's A = the row-major B, and so on).
struct Pointers {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;
  void* aux = nullptr;
  void* workspace = nullptr;
  float alpha = 1.0f, beta = 0.0f;
};

std::size_t size_of(DataType type);
// The largest power of two up to 256 that divides the address and the leading dimension and batch stride in bytes:
// the alignment a buffer can promise cuBLASLt (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES).
std::uint32_t alignment(const void* p, std::int64_t ld_bytes, std::int64_t batch_stride_bytes);
// The bytes a layout spans from its first element to one past its last.
std::size_t extent_bytes(const MatrixLayout& layout);

// Whether cuBLASLt can take call's epilogue in its GEMM: an f32 output, a 16-byte aligned bias and, for GELU, an input
// matrix 16-byte aligned with a leading dimension divisible by 8 (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD), and no batch.
bool fusable(const GemmCall& call);
// `call` as cuBLASLt sees it, with `workspace` bytes of workspace, and the buffers of a run of it.
Matmul describe(const GemmCall& call, std::size_t workspace);
Pointers pointers(const GemmCall& call, void* workspace);

struct MatmulHash {
  std::size_t operator()(const Matmul& m) const noexcept;
};

}  // namespace lt

class GemmEngine {
 public:
  // The engine of `allocator`'s device (sim::LtGemm or cuda::LtGemm; a build without CUDA refuses the latter), its
  // workspace from `allocator`.
  static std::unique_ptr<GemmEngine> create(DeviceAllocator& allocator);

  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;
  virtual ~GemmEngine();

  Device device() const { return allocator_->device().device(); }
  // Runs `call` on `stream` (the engine's device's). With an epilogue the engine does not fuse (lt::fusable, or no
  // algorithm offered), returns false having run nothing: the caller then runs the plain GEMM and applies the epilogue
  // itself. Otherwise true. Throws optimus::Error for an empty product (m, n or k of 0) and for what the engine
  // refuses, naming it.
  bool run(const GemmCall& call, DeviceStream& stream);
  // Distinct matmuls prepared (descriptors built, algorithms searched) so far.
  std::size_t plans_prepared() const { return plans_.size(); }
  // The device memory the engine holds for good: its workspace.
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  // What an engine keeps of a prepared matmul.
  class Plan {
   public:
    virtual ~Plan() = default;
  };

 protected:
  // The workspace (workspace_bytes of device memory) comes from `allocator` once, at construction.
  GemmEngine(DeviceAllocator& allocator, std::size_t workspace_bytes);

  // What running `matmul` needs (descriptors, algorithm), or null when the engine has no algorithm for it. `first` are
  // the buffers of the run it is prepared for (cuBLASLt's heuristic reads the epilogue pointers' alignment; later runs
  // of the same matmul have buffers of the same alignments).
  virtual std::unique_ptr<Plan> prepare(const lt::Matmul& matmul, const lt::Pointers& first) = 0;
  virtual void execute(const Plan& plan, const lt::Matmul& matmul, const lt::Pointers& pointers,
                       DeviceStream& stream) = 0;

 private:
  DeviceAllocator* allocator_;
  std::size_t workspace_bytes_;
  void* workspace_;
  std::unordered_map<lt::Matmul, std::unique_ptr<Plan>, lt::MatmulHash> plans_;  // null: not offered
};

}  // namespace optimus
