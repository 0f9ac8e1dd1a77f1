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
  linear(h, 3 * h, layers);  // c_attn
  linear(h, h, layers);      // attention's c_proj
  linear(h, f, layers);      // c_fc
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
    const Tensor<float> a(g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k}, tag);
    const Tensor<float> b(g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n}, tag);
    Tensor<float> c(Shape{g.m, g.n}, tag, Init::none);
    auto once = [&] {
      ops::gemm<float>(g.trans_a ? Trans::yes : Trans::no, g.trans_b ? Trans::yes : Trans::no, 1.0f,
                       std::as_const(a).view(), std::as_const(b).view(), 0.0f, c.view(), queue);
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
