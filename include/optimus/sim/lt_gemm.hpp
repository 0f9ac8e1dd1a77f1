// The simulated device's GEMM engine (optimus/core/gemm_engine.hpp): a strict stand-in for cuBLASLt. Preparing a
// matmul checks what cuBLASLt checks — the type combination (f32, TF32 and bf16 inputs with f32 accumulation; f32 or
// bf16 output), each layout (ld >= rows), the shapes op(A) [M, K] op(B) [K, N] D [M, N], one batch count for all
// operands and output matrices that do not overlap, the epilogue (an f32 bias on an f32 output; GELU's input with a
// leading dimension divisible by 8 and no smaller than D's rows) and the alignments promised; running it checks every
// pointer against its layout (device memory of this device, the whole extent inside one live allocation, naturally
// aligned and at least as aligned as the plan promised cuBLASLt), the bias, GELU's input and the workspace. It then
// computes on the device's stream with the CPU GEMM, as the CPU path computes the same product — bf16 operands
// widened exactly, TF32 operands rounded to 10-bit mantissas — so that results on the simulated device equal the
// CPU's bit for bit (TF32 excepted: the CPU has none).
#pragma once

#include <memory>

#include "optimus/core/gemm_engine.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::sim {

class LtGemm final : public GemmEngine {
 public:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{1} << 20;
  // The workspace (kWorkspaceBytes) comes from `allocator`, which must allocate memory of a simulated device.
  explicit LtGemm(DeviceAllocator& allocator);

 protected:
  std::unique_ptr<Plan> prepare(const lt::Matmul& matmul, const lt::Pointers& first) override;
  void execute(const Plan& plan, const lt::Matmul& matmul, const lt::Pointers& pointers,
               DeviceStream& stream) override;

 private:
  Runtime* device_;
};

}  // namespace optimus::sim
