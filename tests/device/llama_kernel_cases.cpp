// Llama's kernels on a device against the host's (ops::swiglu_*, ops::repeat_kv, ops::sum_kv, ops::rotary on grouped
// qkv), and the host's against their definitions.
#include "kernel_case_support.hpp"

namespace optimus::test::kernel_cases {
namespace {

// SwiGLU on gu [5, 2 * 7]: f32 forward and backward on both devices; the bf16 forms' bits are the f32 forms' rounded
// (forward) or on the kept values (backward).
void swiglu(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 5, f = 7;
  const Both<float> gu(random_values(rows * 2 * f, 40, 4.0), Shape{rows, 2 * f}, rank);
  const Both<float> dy(random_values(rows * f, 41), Shape{rows, f}, rank);
  Both<float> y(std::vector<float>(rows * f), Shape{rows, f}, rank);
  Both<float> dgu(std::vector<float>(rows * 2 * f), Shape{rows, 2 * f}, rank);
  Both<bf16> y16(std::vector<bf16>(rows * f), Shape{rows, f}, rank);
  Both<bf16> kept(std::vector<bf16>(rows * 2 * f), Shape{rows, 2 * f}, rank);
  Both<float> dgu16(std::vector<float>(rows * 2 * f), Shape{rows, 2 * f}, rank);
  for (const auto& [on, queue] : {std::pair{0, host}, std::pair{1, q}}) {
    const auto w = [on = on](auto& b) { return on == 0 ? b.on_host() : b.on_device(); };
    const auto r = [on = on](const auto& b) { return on == 0 ? b.in_host() : b.in_device(); };
    ops::swiglu_forward<float>(r(gu), w(y), queue);
    ops::swiglu_backward<float>(r(gu), r(dy), w(dgu), queue);
    ops::swiglu_forward(r(gu), w(y16), w(kept), queue);
    ops::swiglu_backward(r(kept), r(dy), w(dgu16), queue);
  }
  expect.same("swiglu_forward", y);
  expect.same("swiglu_backward", dgu);
  expect.near("swiglu_forward into bf16", y16, 1e-2);  // a GPU's expf may round one bf16 the other way (as GELU's)
  expect.same("swiglu_forward's kept input", kept, true);
  expect.same("swiglu_backward on bf16", dgu16);
  // The host against the definitions: silu(g) u, its gradients, and the bf16 forms' bits.
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < f; ++c) {
      const double g = gu.host[static_cast<std::size_t>(r * 2 * f + c)], u = gu.host[static_cast<std::size_t>(r * 2 * f + f + c)];
      const double s = 1 / (1 + std::exp(-g)), d = dy.host[static_cast<std::size_t>(r * f + c)];
      worst = std::max(worst, std::abs(y.host[static_cast<std::size_t>(r * f + c)] - g * s * u));
      worst = std::max(worst, std::abs(dgu.host[static_cast<std::size_t>(r * 2 * f + c)] - d * u * (s + g * s * (1 - s))));
      worst = std::max(worst, std::abs(dgu.host[static_cast<std::size_t>(r * 2 * f + f + c)] - d * g * s));
    }
  }
  CHECK(worst < 1e-5);
  CHECK(y16.host == to_bits(y.host));
  CHECK(kept.host == to_bits(gu.host));
  Both<float> on_kept(std::vector<float>(rows * 2 * f), Shape{rows, 2 * f}, rank);
  const Both<float> widened_gu(widened(kept.host), Shape{rows, 2 * f}, rank);
  ops::swiglu_backward<float>(widened_gu.in_host(), dy.in_host(), on_kept.on_host(), host);
  CHECK(on_kept.host == dgu16.host);
}

// Grouped-query attention's heads on 3 rows of 4 query heads and 2 key/value heads of dimension 3: repeat_kv (f32 and
// bf16) gives query head t key/value head t / 2; sum_kv adds a key/value head's two gradients in order; RoPE turns
// the grouped qkv's 4 query and 2 key heads and leaves V.
void grouped_heads(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 3, d = 3, heads = 4, kv = 2, width = (heads + 2 * kv) * d, full = 3 * heads * d;
  const ops::KvHeads groups{.heads = heads, .kv_heads = kv};
  const Both<float> qkv(random_values(rows * width, 50), Shape{rows, width}, rank);
  const Both<bf16> qkv16(to_bits(qkv.host), Shape{rows, width}, rank);
  const Both<float> dfull(random_values(rows * full, 51), Shape{rows, full}, rank);
  Both<float> wide(std::vector<float>(rows * full), Shape{rows, full}, rank);
  Both<bf16> wide16(std::vector<bf16>(rows * full), Shape{rows, full}, rank);
  Both<float> dqkv(std::vector<float>(rows * width), Shape{rows, width}, rank);
  for (const auto& [on, queue] : {std::pair{0, host}, std::pair{1, q}}) {
    const auto w = [on = on](auto& b) { return on == 0 ? b.on_host() : b.on_device(); };
    const auto r = [on = on](const auto& b) { return on == 0 ? b.in_host() : b.in_device(); };
    ops::repeat_kv<float>(r(qkv), w(wide), groups, queue);
    ops::repeat_kv(r(qkv16), w(wide16), groups, queue);
    ops::sum_kv<float>(r(dfull), w(dqkv), groups, queue);
  }
  expect.same("repeat_kv", wide, true);
  expect.same("repeat_kv in bf16", wide16, true);
  expect.same("sum_kv", dqkv);  // two terms added in one order: exact on every device
  const auto at = [](const std::vector<float>& m, std::int64_t cols, std::int64_t r, std::int64_t c) {
    return m[static_cast<std::size_t>(r * cols + c)];
  };
  bool repeated = true, summed = true;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t t = 0; t < heads; ++t) {
      for (std::int64_t i = 0; i < d; ++i) {
        repeated = repeated && at(wide.host, full, r, t * d + i) == at(qkv.host, width, r, t * d + i) &&
                   at(wide.host, full, r, heads * d + t * d + i) == at(qkv.host, width, r, heads * d + (t / 2) * d + i) &&
                   at(wide.host, full, r, 2 * heads * d + t * d + i) ==
                       at(qkv.host, width, r, (heads + kv) * d + (t / 2) * d + i);
      }
    }
    for (std::int64_t part = 1; part <= 2; ++part) {
      for (std::int64_t h = 0; h < kv; ++h) {
        for (std::int64_t i = 0; i < d; ++i) {
          const float expected = at(dfull.host, full, r, part * heads * d + 2 * h * d + i) +
                                 at(dfull.host, full, r, part * heads * d + (2 * h + 1) * d + i);
          summed = summed && at(dqkv.host, width, r, heads * d + (part - 1) * kv * d + h * d + i) == expected;
        }
      }
    }
  }
  CHECK(repeated);
  CHECK(summed);

  // RoPE on grouped qkv (2 sequences of 3 rows, head dimension 4): the host's on the device; V untouched.
  const std::int64_t seq_rows = 6, d4 = 4, cols = (heads + 2 * kv) * d4;
  const std::vector<float> values = random_values(seq_rows * cols, 52);
  Both<float> turned(values, Shape{seq_rows, cols}, rank);
  const ops::Rotary turn{.seq = 3, .heads = heads, .kv_heads = kv, .theta = 100, .inverse = false};
  ops::rotary<float>(turned.on_host(), turn, host);
  ops::rotary<float>(turned.on_device(), turn, q);
  expect.near("rotary on grouped qkv", turned, 1e-6);
  double moved = 0, v_moved = 0;
  for (std::int64_t r = 0; r < seq_rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto e = static_cast<std::size_t>(r * cols + c);
      const double change = std::abs(turned.host[e] - values[e]);
      double& most = c >= (heads + kv) * d4 ? v_moved : moved;  // V's columns, or the turned ones
      most = std::max(most, change);
    }
  }
  CHECK(moved > 0.1);
  CHECK(v_moved == 0);
}

}  // namespace

void llama_parts(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  swiglu(rank, q, expect);
  grouped_heads(rank, q, expect);
}

}  // namespace optimus::test::kernel_cases
