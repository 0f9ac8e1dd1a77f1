// cuBLASLt behind the GemmEngine interface (optimus/cuda/lt_gemm.hpp), every call through the table of the library
// opened on first use (cublaslt_library.hpp). GPU-only code: CI compiles it, a GPU runs it.
#include "optimus/cuda/lt_gemm.hpp"

#include <cstdint>
#include <utility>

#include "cublaslt_library.hpp"

namespace optimus::cuda {
namespace {

using detail::cublaslt;  // cuBLASLt's functions; the first call opens the library

cudaDataType_t cuda_type(lt::DataType t) { return t == lt::DataType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

struct LayoutDesc {
  cublasLtMatrixLayout_t desc = nullptr;
  explicit LayoutDesc(const lt::MatrixLayout& l) {
    OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatrixLayoutCreate(&desc, cuda_type(l.type),
                                                               static_cast<std::uint64_t>(l.rows),
                                                               static_cast<std::uint64_t>(l.cols), l.ld));
    if (l.batch > 1) {
      const auto count = static_cast<std::int32_t>(l.batch);
      OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatrixLayoutSetAttribute(desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                                       sizeof(count)));
      OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatrixLayoutSetAttribute(
          desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.batch_stride, sizeof(l.batch_stride)));
    }
  }
  LayoutDesc(const LayoutDesc&) = delete;
  LayoutDesc& operator=(const LayoutDesc&) = delete;
  ~LayoutDesc() { cublaslt().cublasLtMatrixLayoutDestroy(desc); }
};

// The matmul descriptor, with the epilogue's pointers set for `p` (they change from run to run).
struct Operation {
  cublasLtMatmulDesc_t desc = nullptr;
  explicit Operation(const lt::Matmul& m) {
    const cublasComputeType_t compute =
        m.compute == lt::Compute::f32_fast_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    const cublasOperation_t a = m.trans_a == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t b = m.trans_b == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, a);
    set(CUBLASLT_MATMUL_DESC_TRANSB, b);
    if (m.epilogue == lt::Epilogue::none) return;
    set(CUBLASLT_MATMUL_DESC_EPILOGUE,
        m.epilogue == lt::Epilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, cuda_type(m.bias_type));
    if (m.epilogue == lt::Epilogue::gelu_aux_bias) {
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, m.aux_ld);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, cuda_type(m.aux_type));
    }
  }
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  ~Operation() { cublaslt().cublasLtMatmulDescDestroy(desc); }

  template <class V>
  void set(cublasLtMatmulDescAttributes_t attribute, const V& value) const {
    OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
  }
  void point_at(const lt::Matmul& m, const lt::Pointers& p) const {
    if (m.epilogue == lt::Epilogue::none) return;
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    if (m.epilogue == lt::Epilogue::gelu_aux_bias) set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
  }
};

// The preference: the workspace and the alignment every buffer promises (unset, cuBLASLt assumes 256 bytes).
struct Preference {
  cublasLtMatmulPreference_t desc = nullptr;
  explicit Preference(const lt::Matmul& m) {
    OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatmulPreferenceCreate(&desc));
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, m.workspace);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, m.align_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, m.align_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, m.align_c);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, m.align_d);
  }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  ~Preference() { cublaslt().cublasLtMatmulPreferenceDestroy(desc); }
  template <class V>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const V& value) const {
    OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatmulPreferenceSetAttribute(desc, attribute, &value, sizeof(value)));
  }
};

struct CudaPlan final : GemmEngine::Plan {
  explicit CudaPlan(const lt::Matmul& m) : op(m), a(m.a), b(m.b), c(m.c), d(m.d) {}
  Operation op;
  LayoutDesc a, b, c, d;
  cublasLtMatmulAlgo_t algo{};
};

DeviceAllocator& on_cuda(DeviceAllocator& allocator) {
  OPTIMUS_CHECK(allocator.device().device() == Device::cuda, "cuda::LtGemm needs memory of a CUDA device, got ",
                allocator.device().name());
  return allocator;
}

}  // namespace

LtGemm::LtGemm(DeviceAllocator& allocator) : GemmEngine(on_cuda(allocator), kWorkspaceBytes) {
  allocator.device().make_current();
  OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtCreate(&handle_));
}

LtGemm::~LtGemm() {
  if (handle_ != nullptr) cublaslt().cublasLtDestroy(handle_);
}

std::unique_ptr<GemmEngine::Plan> LtGemm::prepare(const lt::Matmul& matmul, const lt::Pointers& first) {
  auto plan = std::make_unique<CudaPlan>(matmul);
  plan->op.point_at(matmul, first);  // the heuristic reads the epilogue pointers' alignment
  const Preference preference(matmul);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      cublaslt().cublasLtMatmulAlgoGetHeuristic(handle_, plan->op.desc, plan->a.desc, plan->b.desc, plan->c.desc,
                                                plan->d.desc, preference.desc, 1, &heuristic, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return nullptr;
  OPTIMUS_CHECK_CUBLAS(status);
  plan->algo = heuristic.algo;
  return plan;
}

void LtGemm::execute(const Plan& plan, const lt::Matmul& matmul, const lt::Pointers& p, DeviceStream& stream) {
  const auto& cuda_plan = static_cast<const CudaPlan&>(plan);
  cuda_plan.op.point_at(matmul, p);
  OPTIMUS_CHECK_CUBLAS(cublaslt().cublasLtMatmul(handle_, cuda_plan.op.desc, &p.alpha, p.a, cuda_plan.a.desc, p.b,
                                                 cuda_plan.b.desc, &p.beta, p.c, cuda_plan.c.desc, p.d,
                                                 cuda_plan.d.desc, &cuda_plan.algo, p.workspace, matmul.workspace,
                                                 native(stream, "cuBLASLt")));
}

}  // namespace optimus::cuda
