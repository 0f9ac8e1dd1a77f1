// optimus-bench attention: the fused causal attention alone (ops::flash_attention_*), forward and backward, at each
// sequence length of --s, on the CPU, the simulated device or a GPU. Per row: the median time of forward and of
// backward over --iters, their TFLOP/s as FlashAttention counts them (forward 4·b·heads·s²·d / 2 for the causal half;
// backward 2.5 times that), and the tensor bytes the attention holds at its peak (qkv, out, lse, dout, dqkv, delta)
// beside the b·heads·s² f32 probabilities an unfused attention would add: memory grows with s, not s².
//
//   optimus-bench attention [--device cpu|sim|cuda] [--b 2] [--s 1024,2048,4096,8192] [--heads 16] [--d 128]
//                           [--dropout 0] [--gemm f32|bf16] [--warmup 1] [--iters 3] [--json FILE]
// --gemm bf16 is mixed precision's attention as a block runs it: qkv kept in bf16 and read so, the output written in
// bf16, the products' operands bf16 with f32 accumulation (tensor cores on a GPU), checked against the CPU's (the
// same rounding, its sums in another order) within bf16's 2e-2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/memory.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/device/rank_device.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

// The median of the seconds `run` takes, over `iters` runs after `warmup` untimed ones; `sync` waits for the device.
template <class Run, class Sync>
double median_seconds(int warmup, int iters, Run&& run, Sync&& sync) {
  for (int i = 0; i < warmup; ++i) run();
  sync();
  std::vector<double> seconds;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    sync();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Elements of `got` (an accelerator's) off the host's `want` by more than `tolerance` relatively (1 + |want|): 0 on
// the simulated device, which runs the CPU's code.
std::int64_t wrong(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  std::int64_t count = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    count += !(std::abs(got[e] - want[e]) <= tolerance * (1.0f + std::abs(want[e])));
  }
  return count;
}

std::vector<float> widened(const std::vector<bf16>& x) {
  std::vector<float> y(x.size());
  for (std::size_t e = 0; e < x.size(); ++e) y[e] = static_cast<float>(x[e]);
  return y;
}

// The attention's tensors: qkv and out in bf16 under mixed precision (the f32 ones then empty), else in f32.
struct Tensors {
  Tensor<float> qkv, out;
  Tensor<bf16> qkv16, out16;
  Tensor<float> lse, dout, dqkv, delta;

  std::vector<float> qkv_values() const { return qkv16.numel() > 0 ? widened(download(qkv16)) : download(qkv); }
  std::vector<float> out_values() const { return out16.numel() > 0 ? widened(download(out16)) : download(out); }
  void forward(const ops::AttentionShape& shape, const ops::Queue& queue) {
    if (qkv16.numel() > 0) {
      ops::flash_attention_forward(std::as_const(qkv16).view(), shape, out16.view(), lse.view(), queue);
    } else {
      ops::flash_attention_forward<float>(std::as_const(qkv).view(), shape, out.view(), lse.view(), queue);
    }
  }
  // D from the output (ops::attention_delta), then the backward: both timed as the backward.
  void backward(const ops::AttentionShape& shape, const ops::Queue& queue) {
    if (qkv16.numel() > 0) {
      ops::attention_delta(std::as_const(out16).view(), std::as_const(dout).view(), shape, delta.view(), queue);
      ops::flash_attention_backward(std::as_const(qkv16).view(), std::as_const(dout).view(),
                                    std::as_const(lse).view(), std::as_const(delta).view(), shape, dqkv.view(), queue);
    } else {
      ops::attention_delta<float>(std::as_const(out).view(), std::as_const(dout).view(), shape, delta.view(), queue);
      ops::flash_attention_backward<float>(std::as_const(qkv).view(), std::as_const(dout).view(),
                                           std::as_const(lse).view(), std::as_const(delta).view(), shape, dqkv.view(),
                                           queue);
    }
  }
};

// The accelerator's forward and backward of `shape` against the host's from the same inputs (qkv's values in f32,
// under the same math): the wrong elements of out, lse and dqkv (1e-5 off under f32 products, 2e-2 under bf16).
std::int64_t check_against_host(const ops::AttentionShape& shape, ops::GemmMath math, const Tensors& t) {
  const MemoryTag host{};
  const std::vector<float> values = t.qkv_values();
  const Tensor<float> q = upload(values.data(), Shape{t.dqkv.size(0), t.dqkv.size(1)}, host);
  const Tensor<float> g = upload(download(t.dout).data(), t.dout.shape(), host);
  Tensor<float> o(t.dout.shape(), host, Init::none), l(t.lse.shape(), host, Init::none),
      dq(t.dqkv.shape(), host, Init::none), delta(t.lse.shape(), host, Init::none);
  const ops::Queue cpu{.math = math};
  ops::flash_attention_forward<float>(q.view(), shape, o.view(), l.view(), cpu);
  ops::attention_delta<float>(std::as_const(o).view(), g.view(), shape, delta.view(), cpu);
  ops::flash_attention_backward<float>(q.view(), g.view(), std::as_const(l).view(), std::as_const(delta).view(), shape,
                                       dq.view(), cpu);
  const float tolerance = math == ops::GemmMath::bf16 ? 2e-2f : 1e-5f;
  return wrong(t.out_values(), download(o), tolerance) + wrong(download(t.lse), download(l), tolerance) +
         wrong(download(t.dqkv), download(dq), tolerance);
}

// The attention's tensors for n = b·s tokens of `width` = heads·d, under `math` (qkv and out in bf16 under bf16
// products), on `tag`'s memory: qkv [n, 3 width] and dout [n, width] of fixed values in [-1, 1], the rest unset.
Tensors attention_tensors(std::int64_t n, std::int64_t width, std::int64_t heads, ops::GemmMath math,
                          const MemoryTag& tag) {
  std::vector<float> values(static_cast<std::size_t>(n * 3 * width));
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = static_cast<float>((e * 7919) % 2001) / 1000.0f - 1.0f;
  Tensors t;
  if (math == ops::GemmMath::bf16) {
    std::vector<bf16> bits(values.size());
    for (std::size_t e = 0; e < bits.size(); ++e) bits[e] = bf16(values[e]);
    t.qkv16 = upload(bits.data(), Shape{n, 3 * width}, tag);
    t.out16 = Tensor<bf16>(Shape{n, width}, tag, Init::none);
  } else {
    t.qkv = upload(values.data(), Shape{n, 3 * width}, tag);
    t.out = Tensor<float>(Shape{n, width}, tag, Init::none);
  }
  t.lse = Tensor<float>(Shape{n * heads}, tag, Init::none);
  values.resize(static_cast<std::size_t>(n * width));
  t.dout = upload(values.data(), Shape{n, width}, tag);
  t.dqkv = Tensor<float>(Shape{n, 3 * width}, tag, Init::none);
  t.delta = Tensor<float>(Shape{n * heads}, tag, Init::none);
  return t;
}

// The bench's settings from the options, but the sequence lengths (a row each).
struct AttentionSettings {
  std::string device;  // where the attention runs: cpu, sim or cuda
  std::int64_t b, heads, d;
  double dropout;
  ops::GemmMath math;
  int warmup, iters;
};

// Where the attention runs: the queue, and on an accelerator the rank's device (its memory and stream); null on the
// CPU.
struct On {
  ops::Queue queue;
  RankDevice* rank;
};

// The report's columns and header lines.
Report attention_report(const AttentionSettings& a) {
  Report report({{"device", 6}, {"b", 3}, {"s", 6}, {"heads", 5}, {"d", 4}, {"fwd_ms", 9}, {"bwd_ms", 9},
                 {"fwd_TFLOP/s", 11}, {"bwd_TFLOP/s", 11}, {"TFLOP/s", 8}, {"peak_MiB", 9}, {"probs_MiB", 9},
                 {"#wrong", 6}});
  report.header(format("optimus-bench attention: the fused causal attention (FlashAttention-2's algorithm), b=%lld "
                       "heads=%lld d=%lld dropout=%g, %s products, on %s",
                       static_cast<long long>(a.b), static_cast<long long>(a.heads), static_cast<long long>(a.d),
                       a.dropout, a.math == ops::GemmMath::bf16 ? "bf16" : "f32", a.device.c_str()));
  report.header("ms: median of the iterations; TFLOP/s: forward 2 b heads s^2 d (the causal half of 4 b heads s^2 d), "
                "backward 2.5 times that; peak_MiB: the attention's tensors at their peak (qkv, out, lse, dout, dqkv, "
                "delta; qkv and out in bf16 under --gemm bf16); probs_MiB: the b heads s^2 f32 probabilities an unfused attention keeps besides; #wrong: on an "
                "accelerator, elements of out, lse and dqkv more than 1e-5 (bf16 products: 2e-2) off the CPU's from the "
                "same inputs (n/a on the CPU, or above 2^22 qkv elements)");
  return report;
}

// The row of sequence length s into `report`: forward and backward timed, and on an accelerator (up to 2^22 qkv
// elements) checked against the CPU's; its wrong elements.
std::int64_t run_row(Report& report, const AttentionSettings& a, std::int64_t s, const On& on) {
  const std::int64_t b = a.b, heads = a.heads, d = a.d, n = b * s, width = heads * d;
  DeviceMemory* memory = on.rank ? &on.rank->memory() : nullptr;
  MemoryTracker tracker;
  const MemoryTag tag{&tracker, MemoryKind::activations, memory};
  Tensors t = attention_tensors(n, width, heads, a.math, tag);
  const ops::AttentionShape shape{.seq = s, .heads = heads, .dropout = a.dropout, .seed = 1, .stream = 1,
                                  .first_batch = 0, .first_head = 0, .total_heads = heads,
                                  .causal = true, .lengths = {}};
  const auto sync = [&] {
    if (on.rank) on.rank->stream().synchronize();
  };
  const double fwd = median_seconds(a.warmup, a.iters, [&] { t.forward(shape, on.queue); }, sync);
  const double bwd = median_seconds(a.warmup, a.iters, [&] { t.backward(shape, on.queue); }, sync);
  const bool checked = memory != nullptr && n * 3 * width <= (1 << 22);
  const std::int64_t wrong_elements = checked ? check_against_host(shape, a.math, t) : 0;
  const double fwd_flops = 2.0 * static_cast<double>(b * heads) * static_cast<double>(s) * static_cast<double>(s) *
                           static_cast<double>(d);
  const double bwd_flops = 2.5 * fwd_flops;
  const double mib = 1024.0 * 1024.0;
  report.row({a.device, format("%lld", static_cast<long long>(b)),
              format("%lld", static_cast<long long>(s)), format("%lld", static_cast<long long>(heads)),
              format("%lld", static_cast<long long>(d)), format("%.3f", 1e3 * fwd), format("%.3f", 1e3 * bwd),
              format("%.3f", fwd_flops / fwd / 1e12), format("%.3f", bwd_flops / bwd / 1e12),
              format("%.3f", (fwd_flops + bwd_flops) / (fwd + bwd) / 1e12),
              format("%.1f", static_cast<double>(tracker.peak_total()) / mib),
              format("%.1f", 4.0 * static_cast<double>(b * heads * s * s) / mib),
              checked ? format("%lld", static_cast<long long>(wrong_elements)) : std::string("n/a")});
  return wrong_elements;
}

}  // namespace

int run_attention_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("attention"));
  OPTIMUS_CHECK(world.size() == 1, "attention runs in one process; launch 1 process, not ", world.size());
  const DeviceChoice choice = choose_device(o);
  const AttentionSettings a{.device = std::string(name_of(choice.kind)),
                   .b = o.integer("b", 2),
                   .heads = o.integer("heads", 16),
                   .d = o.integer("d", 128),
                   .dropout = o.real("dropout", 0.0),
                   .math = o.text("gemm", "f32") == "bf16" ? ops::GemmMath::bf16 : ops::GemmMath::f32,
                   .warmup = static_cast<int>(o.integer("warmup", 1)),
                   .iters = static_cast<int>(o.integer("iters", 3))};
  const std::vector<std::int64_t> seqs = o.integers("s", "1024,2048,4096,8192");
  const std::unique_ptr<DeviceRuntime> accelerator = open_device(choice, 0);
  std::unique_ptr<RankDevice> rank;
  if (accelerator) rank = std::make_unique<RankDevice>(*accelerator, a.math);
  const On on{.queue = rank ? rank->queue() : ops::Queue{.math = a.math}, .rank = rank.get()};

  Report report = attention_report(a);
  if (world.rank() == 0) report.print_header(stdout);
  std::int64_t wrong_total = 0;
  for (const std::int64_t s : seqs) {
    wrong_total += run_row(report, a, s, on);
    if (world.rank() == 0) report.print_row(stdout, report.rows() - 1);
  }
  report.footer(wrong_total == 0 ? "every checked row equals the CPU's" : "ROWS DIFFER FROM THE CPU'S");
  if (world.rank() == 0) {
    report.print_footer(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "attention");
  }
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace optimus::bench
