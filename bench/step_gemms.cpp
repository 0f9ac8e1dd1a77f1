// The GEMM list of a step and its timing (step_gemms.hpp).
#include "step_gemms.hpp"

#include <chrono>
#include <utility>

#include "optimus/core/tensor.hpp"

namespace optimus::bench {

std::vector<GemmShape> step_gemms(const BlockShape& shape, std::int64_t layers, std::int64_t vocab) {
  const std::int64_t n = shape.tokens(), h = shape.hidden, f = shape.ffn;
  std::vector<GemmShape> out;
  // A linear in -> out over the tokens: y = x W, dx = dy W^T, dW = x^T dy.
  auto linear = [&](std::int64_t in, std::int64_t width, std::int64_t count) {
    out.push_back({n, width, in, false, false, count});
    out.push_back({n, in, width, false, true, count});
    out.push_back({in, width, n, true, false, count});
  };
  linear(h, shape.qkv_width, layers);  // c_attn
  linear(h, h, layers);                // attention's c_proj
  linear(h, shape.fc_width, layers);   // c_fc
  linear(f, h, layers);      // mlp's c_proj
  if (vocab > 0) {
    out.push_back({n, vocab, h, false, true, 1});   // logits = x wte^T
    out.push_back({n, h, vocab, false, false, 1});  // dx = dlogits wte
    out.push_back({vocab, h, n, true, false, 1});   // dwte = dlogits^T x
  }
  return out;
}

double time_gemms(const std::vector<GemmShape>& gemms, DeviceMemory* device, const ops::Queue& queue,
                  const std::function<void()>& synchronize) {
  const MemoryTag tag{nullptr, MemoryKind::workspace, device};
  double total = 0;
  for (const GemmShape& g : gemms) {
    const Shape a_shape = g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k};
    const Shape b_shape = g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n};
    const Trans trans_a = g.trans_a ? Trans::yes : Trans::no, trans_b = g.trans_b ? Trans::yes : Trans::no;
    Tensor<float> c(Shape{g.m, g.n}, tag, Init::none);
    // Under bf16 math the operands are bf16 already (the products alone, without the casts of f32 operands that
    // ops::gemm<float> would add: those count as the step's other work).
    const bool bf16_operands = queue.math == ops::GemmMath::bf16;
    const Tensor<float> a(bf16_operands ? Shape{0} : a_shape, tag), b(bf16_operands ? Shape{0} : b_shape, tag);
    const Tensor<bf16> a16(bf16_operands ? a_shape : Shape{0}, tag), b16(bf16_operands ? b_shape : Shape{0}, tag);
    auto once = [&] {
      if (bf16_operands) {
        ops::gemm(trans_a, trans_b, 1.0f, a16.view(), b16.view(), 0.0f, c.view(), queue);
      } else {
        ops::gemm<float>(trans_a, trans_b, 1.0f, a.view(), b.view(), 0.0f, c.view(), queue);
      }
    };
    once();  // warm-up: algorithm selection, first-touch
    synchronize();
    const int reps = 3;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) once();
    synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    total += seconds * static_cast<double>(g.count);
  }
  return total;
}

}  // namespace optimus::bench
