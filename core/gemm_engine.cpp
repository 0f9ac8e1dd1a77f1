// The device-generic half of a GEMM engine: a row-major call as cuBLASLt sees it, and the plan cache.
#include "optimus/core/gemm_engine.hpp"

#include <bit>
#include <cstdint>
#include <functional>
#include <limits>

#include "optimus/core/error.hpp"

namespace optimus {
namespace lt {

std::size_t size_of(DataType type) { return type == DataType::bf16 ? 2 : 4; }

std::uint32_t alignment(const void* p, std::int64_t ld_bytes, std::int64_t batch_stride_bytes) {
  const std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uint64_t>(ld_bytes) |
                             static_cast<std::uint64_t>(batch_stride_bytes) | 256u;
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

std::size_t extent_bytes(const MatrixLayout& layout) {
  if (layout.rows <= 0 || layout.cols <= 0) return 0;
  const std::int64_t last = (layout.batch - 1) * layout.batch_stride + (layout.cols - 1) * layout.ld + layout.rows;
  return static_cast<std::size_t>(last) * size_of(layout.type);
}

bool fusable(const GemmCall& call) {
  using Kind = GemmCall::Epilogue::Kind;
  const GemmCall::Epilogue& e = call.epilogue;
  if (e.kind == Kind::none) return true;
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (call.precision == GemmPrecision::bf16 || call.batch.count != 1 || !aligned16(e.bias)) return false;
  return e.kind == Kind::bias || (e.ld_pre % 8 == 0 && aligned16(e.pre));
}

Matmul describe(const GemmCall& call, std::size_t workspace) {
  using Kind = GemmCall::Epilogue::Kind;
  const bool bf16_in = call.precision == GemmPrecision::bf16 || call.precision == GemmPrecision::bf16_to_f32;
  const DataType in = bf16_in ? DataType::bf16 : DataType::f32;
  const DataType out = call.precision == GemmPrecision::bf16 ? DataType::bf16 : DataType::f32;
  const std::int64_t m = call.m, n = call.n, k = call.k, count = call.batch.count;
  OPTIMUS_CHECK(count <= std::numeric_limits<std::int32_t>::max(), "gemm: a batch of ", count,
                " matrices is more than cuBLASLt's batch count (int32) holds; split the batch");
  const bool ta = call.trans_a == Trans::yes, tb = call.trans_b == Trans::yes;
  const auto in_bytes = static_cast<std::int64_t>(size_of(in)), out_bytes = static_cast<std::int64_t>(size_of(out));
  Matmul mm;
  mm.compute = call.precision == GemmPrecision::tf32 ? Compute::f32_fast_tf32 : Compute::f32;
  mm.trans_a = call.trans_b;  // cuBLASLt's A is B's storage: column-major [n, k] (B as stored is [k, n]) or [k, n]
  mm.trans_b = call.trans_a;  // cuBLASLt's B is A's storage: column-major [k, m] or [m, k]
  mm.a = {.type = in, .rows = tb ? k : n, .cols = tb ? n : k, .ld = call.ldb, .batch = count,
          .batch_stride = call.batch.stride_b};
  mm.b = {.type = in, .rows = ta ? m : k, .cols = ta ? k : m, .ld = call.lda, .batch = count,
          .batch_stride = call.batch.stride_a};
  mm.c = {.type = out, .rows = n, .cols = m, .ld = call.ldc, .batch = count, .batch_stride = call.batch.stride_c};
  mm.d = mm.c;
  mm.align_a = alignment(call.b, call.ldb * in_bytes, call.batch.stride_b * in_bytes);
  mm.align_b = alignment(call.a, call.lda * in_bytes, call.batch.stride_a * in_bytes);
  mm.align_c = mm.align_d = alignment(call.c, call.ldc * out_bytes, call.batch.stride_c * out_bytes);
  const GemmCall::Epilogue& e = call.epilogue;
  if (e.kind != Kind::none) {
    mm.epilogue = e.kind == Kind::bias ? Epilogue::bias : Epilogue::gelu_aux_bias;
    mm.align_bias = alignment(e.bias, 0, 0);
  }
  if (e.kind == Kind::bias_gelu) {
    mm.aux_ld = e.ld_pre;
    mm.align_aux = alignment(e.pre, e.ld_pre * 4, 0);
  }
  mm.workspace = workspace;
  return mm;
}

Pointers pointers(const GemmCall& call, void* workspace) {
  return {.a = call.b, .b = call.a, .c = call.c, .d = call.c, .bias = call.epilogue.bias, .aux = call.epilogue.pre,
          .workspace = workspace, .alpha = call.alpha, .beta = call.beta};
}

std::size_t MatmulHash::operator()(const Matmul& m) const noexcept {
  std::size_t h = 0;
  const auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  const auto layout = [&](const MatrixLayout& l) {
    mix(static_cast<std::uint64_t>(l.type));
    for (std::int64_t v : {l.rows, l.cols, l.ld, l.batch, l.batch_stride}) mix(static_cast<std::uint64_t>(v));
  };
  mix(static_cast<std::uint64_t>(m.compute));
  mix(static_cast<std::uint64_t>(m.trans_a) * 2 + static_cast<std::uint64_t>(m.trans_b));
  layout(m.a);
  layout(m.b);
  layout(m.c);
  layout(m.d);
  mix(static_cast<std::uint64_t>(m.epilogue));
  mix(static_cast<std::uint64_t>(m.aux_ld));
  for (std::uint32_t a : {m.align_a, m.align_b, m.align_c, m.align_d, m.align_bias, m.align_aux}) mix(a);
  mix(m.workspace);
  return h;
}

}  // namespace lt

std::unique_ptr<GemmEngine> GemmEngine::create(DeviceAllocator& allocator) {
  return allocator.device().create_gemm_engine(allocator);
}

GemmEngine::GemmEngine(DeviceAllocator& allocator, std::size_t workspace_bytes)
    : allocator_(&allocator), workspace_bytes_(workspace_bytes), workspace_(allocator.allocate(workspace_bytes)) {}

GemmEngine::~GemmEngine() { allocator_->release(workspace_); }

bool GemmEngine::run(const GemmCall& call, DeviceStream& stream) {
  OPTIMUS_CHECK(call.m > 0 && call.n > 0 && call.k > 0, "GemmEngine: an empty product ", call.m, "x", call.k, " * ",
                call.k, "x", call.n, " (ops::gemm handles k = 0 and empty outputs itself)");
  OPTIMUS_CHECK(stream.device() == device(), "GemmEngine on ", name_of(device()), ": the stream is a ",
                name_of(stream.device()), " stream");
  const bool with_epilogue = call.epilogue.kind != GemmCall::Epilogue::Kind::none;
  if (with_epilogue && !lt::fusable(call)) return false;
  const lt::Matmul matmul = lt::describe(call, workspace_bytes_);
  const lt::Pointers buffers = lt::pointers(call, workspace_);
  auto [plan, inserted] = plans_.try_emplace(matmul);
  if (inserted) {
    try {
      plan->second = prepare(matmul, buffers);
    } catch (...) {
      plans_.erase(plan);
      throw;
    }
  }
  if (!plan->second) {
    OPTIMUS_CHECK(with_epilogue, "GemmEngine on ", name_of(device()), ": no algorithm for ", call.m, "x", call.n, "x",
                  call.k);
    return false;
  }
  execute(*plan->second, matmul, buffers, stream);
  return true;
}

}  // namespace optimus
