// The fused attention on a device against the host (kernel_case_support.hpp).
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernel_case_support.hpp"

namespace optimus::test::kernel_cases {
namespace {

// One attention's operands on both sides: qkv (values in [-2, 2]) and dout random from `seed`, the outputs to write.
struct AttentionTensors {
  AttentionTensors(RankDevice& rank, std::int64_t n, std::int64_t width, std::int64_t heads, std::uint64_t seed)
      : qkv(random_values(n * 3 * width, seed, 2.0), Shape{n, 3 * width}, rank),
        dout(random_values(n * width, seed + 1), Shape{n, width}, rank),
        out(std::vector<float>(n * width), Shape{n, width}, rank),
        lse(std::vector<float>(n * heads), Shape{n * heads}, rank),
        delta(lse.host, Shape{n * heads}, rank),
        dqkv(std::vector<float>(n * 3 * width, 7.0f), Shape{n, 3 * width}, rank) {}
  Both<float> qkv, dout, out, lse, delta, dqkv;

  // dqkv on each side from the host's lse and D, so that a device's differs from the host's by its backward alone.
  void backward_from_host_terms(RankDevice& rank, const ops::AttentionShape& shape, const ops::Queue& host,
                                const ops::Queue& q) {
    const Shape rows{static_cast<std::int64_t>(lse.host.size())};
    lse = Both<float>(lse.host, rows, rank);
    delta = Both<float>(delta.host, rows, rank);
    ops::flash_attention_backward<float>(qkv.in_host(), dout.in_host(), lse.in_host(), delta.in_host(), shape,
                                         dqkv.on_host(), host);
    ops::flash_attention_backward<float>(qkv.in_device(), dout.in_device(), lse.in_device(), delta.in_device(), shape,
                                         dqkv.on_device(), q);
  }
};

// The fused attention: 2 sequences of 70 (more than a GPU block's 64 rows and the CPU's tile), 3 heads of d = 8 among
// 5 global heads, dropout 0.2; forward, then backward from the forward's lse.
void flash_attention(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t seq = 70, n = 2 * seq, heads = 3, width = heads * 8;
  const ops::AttentionShape shape{.seq = seq, .heads = heads, .dropout = 0.2, .seed = 9, .stream = 4,
                                  .first_batch = 1, .first_head = 1, .total_heads = 5, .causal = true, .lengths = {}};
  AttentionTensors tensors(rank, n, width, heads, 24);
  auto& [qkv, dout, out, lse, delta, dqkv] = tensors;
  ops::flash_attention_forward<float>(qkv.in_host(), shape, out.on_host(), lse.on_host(), host);
  ops::flash_attention_forward<float>(qkv.in_device(), shape, out.on_device(), lse.on_device(), q);
  expect.same("flash_attention_forward: output", out);
  expect.same("flash_attention_forward: lse", lse);
  // Written in bf16: on each device the bits of its own f32 output cast by to_bf16, and the same lse.
  Both<bf16> out16(std::vector<bf16>(n * width), Shape{n, width}, rank), cast(out16.host, Shape{n, width}, rank);
  Both<float> lse16(lse.host, Shape{n * heads}, rank);
  ops::flash_attention_forward(qkv.in_host(), shape, out16.on_host(), lse16.on_host(), host);
  ops::flash_attention_forward(qkv.in_device(), shape, out16.on_device(), lse16.on_device(), q);
  ops::to_bf16(out.in_host(), cast.on_host(), host);
  ops::to_bf16(out.in_device(), cast.on_device(), q);
  CHECK(cast.host == out16.host);
  CHECK(download(cast.device) == download(out16.device));
  CHECK(lse16.host == lse.host);
  CHECK(download(lse16.device) == download(lse.device));
  // D from each device's output; then the backward of both from the host's lse and D.
  ops::attention_delta<float>(out.in_host(), dout.in_host(), shape, delta.on_host(), host);
  ops::attention_delta<float>(out.in_device(), dout.in_device(), shape, delta.on_device(), q);
  expect.same("attention_delta", delta);
  tensors.backward_from_host_terms(rank, shape, host, q);
  expect.same("flash_attention_backward: dqkv", dqkv);
}

// Mixed precision's fused attention (GemmMath::bf16) at head dimensions 8, 64 and 128: a GPU multiplies on tensor cores
// with bf16 operands (Q, K, V, dO, the probabilities and dS rounded), the CPU keeps f32 products: within bf16's 2e-2
// of each other (the simulated device runs the CPU's: bit for bit). 2 sequences of 70 (a block's 64 rows and a
// partial one), 2 heads among 3, dropout 0.1.
void flash_attention_bf16(RankDevice& rank, const ops::Queue& device_queue, const Expect& expect) {
  ops::Queue q = device_queue;
  q.math = ops::GemmMath::bf16;
  const ops::Queue host{.math = ops::GemmMath::bf16};
  for (const std::int64_t d : {8, 64, 128}) {
    CAPTURE(d);
    const std::int64_t seq = 70, n = 2 * seq, heads = 2, width = heads * d;
    const ops::AttentionShape shape{.seq = seq, .heads = heads, .dropout = 0.1, .seed = 3, .stream = 2,
                                    .first_batch = 0, .first_head = 1, .total_heads = 3, .causal = true, .lengths = {}};
    AttentionTensors tensors(rank, n, width, heads, 40);
    auto& [qkv, dout, out, lse, delta, dqkv] = tensors;
    Both<bf16> out16(std::vector<bf16>(n * width), Shape{n, width}, rank);
    ops::flash_attention_forward<float>(qkv.in_host(), shape, out.on_host(), lse.on_host(), host);
    ops::flash_attention_forward<float>(qkv.in_device(), shape, out.on_device(), lse.on_device(), q);
    expect.near("flash_attention_forward (bf16 products): output", out, 2e-2);
    expect.near("flash_attention_forward (bf16 products): lse", lse, 2e-2);
    ops::flash_attention_forward(qkv.in_host(), shape, out16.on_host(), lse.on_host(), host);
    ops::flash_attention_forward(qkv.in_device(), shape, out16.on_device(), lse.on_device(), q);
    expect.near("flash_attention_forward (bf16 products, bf16 out): output", out16, 2e-2);
    // D from the output as mixed precision keeps it (bf16), then the backward of both from the host's lse and D.
    ops::attention_delta(out16.in_host(), dout.in_host(), shape, delta.on_host(), host);
    ops::attention_delta(out16.in_device(), dout.in_device(), shape, delta.on_device(), q);
    expect.near("attention_delta (bf16 out)", delta, 2e-2);
    tensors.backward_from_host_terms(rank, shape, host, q);
    expect.near("flash_attention_backward (bf16 products): dqkv", dqkv, 2e-2);
    // qkv kept in bf16 (as mixed precision saves it), read as it is: on each device the bits of the f32 form on its
    // values widened, whose rounding to bf16 then changes nothing.
    const std::vector<bf16> bits = to_bits(qkv.host);
    const Both<bf16> qkv16(bits, Shape{n, 3 * width}, rank);
    const Both<float> qkv32(widened(bits), Shape{n, 3 * width}, rank);
    Both<bf16> out_a(out16.host, Shape{n, width}, rank), out_b(out16.host, Shape{n, width}, rank);
    Both<float> lse_a(lse.host, Shape{n * heads}, rank), lse_b(lse.host, Shape{n * heads}, rank);
    Both<float> dqkv_a(dqkv.host, Shape{n, 3 * width}, rank), dqkv_b(dqkv.host, Shape{n, 3 * width}, rank);
    Both<float> delta_a(lse.host, Shape{n * heads}, rank), delta_b(lse.host, Shape{n * heads}, rank);
    ops::flash_attention_forward(qkv16.in_host(), shape, out_a.on_host(), lse_a.on_host(), host);
    ops::flash_attention_forward(qkv32.in_host(), shape, out_b.on_host(), lse_b.on_host(), host);
    ops::attention_delta(out_a.in_host(), dout.in_host(), shape, delta_a.on_host(), host);
    ops::attention_delta(out_b.in_host(), dout.in_host(), shape, delta_b.on_host(), host);
    ops::flash_attention_backward(qkv16.in_host(), dout.in_host(), lse_b.in_host(), delta_b.in_host(), shape,
                                  dqkv_a.on_host(), host);
    ops::flash_attention_backward<float>(qkv32.in_host(), dout.in_host(), lse_b.in_host(), delta_b.in_host(), shape,
                                         dqkv_b.on_host(), host);
    ops::flash_attention_forward(qkv16.in_device(), shape, out_a.on_device(), lse_a.on_device(), q);
    ops::flash_attention_forward(qkv32.in_device(), shape, out_b.on_device(), lse_b.on_device(), q);
    ops::attention_delta(out_a.in_device(), dout.in_device(), shape, delta_a.on_device(), q);
    ops::attention_delta(out_b.in_device(), dout.in_device(), shape, delta_b.on_device(), q);
    ops::flash_attention_backward(qkv16.in_device(), dout.in_device(), lse_b.in_device(), delta_b.in_device(), shape,
                                  dqkv_a.on_device(), q);
    ops::flash_attention_backward<float>(qkv32.in_device(), dout.in_device(), lse_b.in_device(), delta_b.in_device(),
                                         shape, dqkv_b.on_device(), q);
    CHECK(out_a.host == out_b.host);
    CHECK(lse_a.host == lse_b.host);
    CHECK(dqkv_a.host == dqkv_b.host);
    CHECK(delta_a.host == delta_b.host);
    CHECK(download(out_a.device) == download(out_b.device));
    CHECK(download(lse_a.device) == download(lse_b.device));
    CHECK(download(dqkv_a.device) == download(dqkv_b.device));
    CHECK(download(delta_a.device) == download(delta_b.device));
    expect.near("flash_attention_backward (bf16 qkv): dqkv", dqkv_a, 2e-2);
  }
}

// Padded sequences (the key-padding mask): 3 sequences of 70 padded after 70 (none), 1 and 65 tokens (a GPU block
// and one key), bidirectional and causal, f32 products and mixed precision's (head dimension 16), dropout 0.1. The
// lengths live with the other operands: on the host for the host's run, on the device for the device's.
void flash_attention_padded(RankDevice& rank, const ops::Queue& device_queue, const Expect& expect) {
  const std::int64_t seq = 70, batches = 3, n = batches * seq, heads = 2, d = 16, width = heads * d;
  const Both<int> lengths(std::vector<int>{70, 1, 65}, Shape{batches}, rank);
  for (const ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    for (const bool causal : {false, true}) {
      CAPTURE(causal);
      CAPTURE(math == ops::GemmMath::bf16);
      ops::Queue q = device_queue;
      q.math = math;
      const ops::Queue host{.math = math};
      const double tolerance = math == ops::GemmMath::bf16 ? 2e-2 : 1e-5;
      ops::AttentionShape on_host{.seq = seq, .heads = heads, .dropout = 0.1, .seed = 5, .stream = 3,
                                  .first_batch = 2, .first_head = 0, .total_heads = 2, .causal = causal,
                                  .lengths = lengths.in_host()};
      ops::AttentionShape on_device = on_host;
      on_device.lengths = lengths.in_device();
      AttentionTensors tensors(rank, n, width, heads, 60);
      auto& [qkv, dout, out, lse, delta, dqkv] = tensors;
      ops::flash_attention_forward<float>(qkv.in_host(), on_host, out.on_host(), lse.on_host(), host);
      ops::flash_attention_forward<float>(qkv.in_device(), on_device, out.on_device(), lse.on_device(), q);
      expect.near("flash_attention_forward (padded): output", out, tolerance);
      expect.near("flash_attention_forward (padded): lse", lse, tolerance);
      ops::attention_delta<float>(out.in_host(), dout.in_host(), on_host, delta.on_host(), host);
      ops::attention_delta<float>(out.in_device(), dout.in_device(), on_device, delta.on_device(), q);
      const Shape rows{n * heads};
      lse = Both<float>(lse.host, rows, rank);
      delta = Both<float>(delta.host, rows, rank);
      ops::flash_attention_backward<float>(qkv.in_host(), dout.in_host(), lse.in_host(), delta.in_host(), on_host,
                                           dqkv.on_host(), host);
      ops::flash_attention_backward<float>(qkv.in_device(), dout.in_device(), lse.in_device(), delta.in_device(),
                                           on_device, dqkv.on_device(), q);
      expect.near("flash_attention_backward (padded): dqkv", dqkv, tolerance);
      // Sequence 1's keys and values from position 1 on are padding: no query sees them, their gradients are zero.
      const std::vector<float> got = download(dqkv.device);
      float padding = 0.0f;
      for (std::int64_t i = seq + 1; i < 2 * seq; ++i) {
        for (std::int64_t c = width; c < 3 * width; ++c) {
          padding += std::abs(got[static_cast<std::size_t>(i * 3 * width + c)]);
        }
      }
      CHECK(padding == 0.0f);
    }
  }
}

}  // namespace

void attention_kernels(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  flash_attention(rank, q, expect);
  flash_attention_bf16(rank, q, expect);
  flash_attention_padded(rank, q, expect);
}

}  // namespace optimus::test::kernel_cases
