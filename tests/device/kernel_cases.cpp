// Every operation of optimus/core/ops.hpp on a device against the same operation on the host (device_cases.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "capture_binding.hpp"
#include "device_cases.hpp"
#include "device_world.hpp"
#include "kernel_case_support.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/rng.hpp"

namespace optimus::test {
namespace {

using kernel_cases::attention_kernels;
using kernel_cases::Both;
using kernel_cases::Expect;
using kernel_cases::gelu_erf;
using kernel_cases::random_values;
using kernel_cases::to_bits;
using kernel_cases::widened;

void element_wise(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 7, cols = 9;
  const Shape m{rows, cols};
  Both<float> x(random_values(rows * cols, 1, 3.0), m, rank), y(random_values(rows * cols, 2), m, rank);
  Both<float> row(random_values(cols, 3), Shape{1, cols}, rank), sums(std::vector<float>(cols), Shape{1, cols}, rank);
  ops::fill<float>(y.on_host(), 0.25f, host);
  ops::fill<float>(y.on_device(), 0.25f, q);
  expect.same("fill", y);
  ops::axpby<float>(1.5f, x.in_host(), -0.5f, y.on_host(), host);
  ops::axpby<float>(1.5f, x.in_device(), -0.5f, y.on_device(), q);
  expect.same("axpby", y);
  ops::add_row_broadcast<float>(row.in_host(), y.on_host(), host);
  ops::add_row_broadcast<float>(row.in_device(), y.on_device(), q);
  expect.same("add_row_broadcast", y);
  ops::column_sums<float>(y.in_host(), sums.on_host(), host);
  ops::column_sums<float>(y.in_device(), sums.on_device(), q);
  expect.same("column_sums", sums);
  {  // with y's bf16 copy written in the same pass (a linear layer's output gradient under mixed precision): on each
     // device the plain form's sums and the cast's bits
    Both<float> with_copy(std::vector<float>(cols), Shape{1, cols}, rank);
    Both<bf16> y16(std::vector<bf16>(static_cast<std::size_t>(rows * cols)), m, rank);
    ops::column_sums(y.in_host(), with_copy.on_host(), y16.on_host(), host);
    ops::column_sums(y.in_device(), with_copy.on_device(), y16.on_device(), q);
    CHECK(with_copy.host == sums.host);
    CHECK(download(with_copy.device) == download(sums.device));
    CHECK(y16.host == to_bits(y.host));
    CHECK(download(y16.device) == to_bits(y.host));
  }
  Both<float> g(std::vector<float>(rows * cols), m, rank);
  ops::gelu_forward<float>(x.in_host(), g.on_host(), host);
  ops::gelu_forward<float>(x.in_device(), g.on_device(), q);
  expect.same("gelu_forward", g);
  {  // into bf16 (mixed precision's MLP): on each device the f32 GELU's bits and x, rounded
    const std::vector<bf16> zeros(static_cast<std::size_t>(rows * cols));
    Both<bf16> y16(zeros, m, rank), x16(zeros, m, rank);
    ops::gelu_forward(x.in_host(), y16.on_host(), x16.on_host(), host);
    ops::gelu_forward(x.in_device(), y16.on_device(), x16.on_device(), q);
    CHECK(y16.host == to_bits(g.host));
    CHECK(x16.host == to_bits(x.host));
    CHECK(download(y16.device) == to_bits(download(g.device)));
    CHECK(download(x16.device) == to_bits(x.host));
    expect.near("gelu_forward into bf16", y16, 1e-2);  // one rounding of values 1e-5 apart
  }
  ops::gelu_backward<float>(x.in_host(), y.in_host(), g.on_host(), host);
  ops::gelu_backward<float>(x.in_device(), y.in_device(), g.on_device(), q);
  expect.same("gelu_backward", g);
  {  // GELU's input kept in bf16 (mixed precision), read as it is: on each device the f32 form's bits on its values.
    const std::vector<bf16> bits = to_bits(x.host);
    const Both<bf16> x16(bits, m, rank);
    const Both<float> x32(widened(bits), m, rank);
    Both<float> from16(g.host, m, rank), from32(g.host, m, rank);
    ops::gelu_backward(x16.in_host(), y.in_host(), from16.on_host(), host);
    ops::gelu_backward<float>(x32.in_host(), y.in_host(), from32.on_host(), host);
    ops::gelu_backward(x16.in_device(), y.in_device(), from16.on_device(), q);
    ops::gelu_backward<float>(x32.in_device(), y.in_device(), from32.on_device(), q);
    CHECK(from16.host == from32.host);
    CHECK(download(from16.device) == download(from32.device));
    CHECK(from16.host != g.host);  // the rounding of x changed something
  }
  // axpby with beta = 0 ignores y: a NaN there does not propagate.
  std::vector<float> nan_values(static_cast<std::size_t>(rows * cols), std::numeric_limits<float>::quiet_NaN());
  Both<float> overwritten(nan_values, m, rank);
  ops::axpby<float>(2.0f, x.in_device(), 0.0f, overwritten.on_device(), q);
  ops::axpby<float>(2.0f, x.in_host(), 0.0f, overwritten.on_host(), host);
  expect.same("axpby over NaN with beta = 0", overwritten);
}

void dropout_and_reductions(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  // Dropout of a strided block of a wider activation, with an inf and a NaN among the inputs: a dropped element is 0
  // whatever it was, on every device (the CUDA kernel used to multiply by 0: inf * 0 = NaN).
  std::vector<float> values = random_values(6 * 11, 4);
  for (std::size_t e = 0; e < values.size(); e += 5) values[e] = std::numeric_limits<float>::infinity();
  for (std::size_t e = 3; e < values.size(); e += 7) values[e] = std::numeric_limits<float>::quiet_NaN();
  Both<float> x(values, Shape{6, 11}, rank);
  ops::dropout<float>(x.on_host().block(0, 1, 6, 9), 10, 4, 0.4, 77, 5, host);
  ops::dropout<float>(x.on_device().block(0, 1, 6, 9), 10, 4, 0.4, 77, 5, q);
  expect.same("dropout (a strided block, infs and NaNs dropped to 0)", x, true);
  int dropped_nonfinite = 0;
  for (std::int64_t r = 0; r < 6; ++r) {
    for (std::int64_t c = 1; c < 10; ++c) {
      const float before = values[static_cast<std::size_t>(r * 11 + c)];
      const float after = x.host[static_cast<std::size_t>(r * 11 + c)];
      if (!std::isfinite(before) && after == 0.0f) ++dropped_nonfinite;
    }
  }
  CHECK(dropped_nonfinite > 0);  // the case the test is about occurred
  // The in-process reductions, f32 and f64: the host's bits everywhere.
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Both<float> acc(random_values(33, 5), Shape{33}, rank);
    const Both<float> other(random_values(33, 6), Shape{33}, rank);
    ops::reduce_into<float>(acc.on_host(), other.in_host(), op, host);
    ops::reduce_into<float>(acc.on_device(), other.in_device(), op, q);
    expect.same("reduce_into f32", acc, true);
    const std::vector<float> a = random_values(5, 7), b = random_values(5, 8);
    Both<double> acc64(std::vector<double>(a.begin(), a.end()), Shape{5}, rank);
    const Both<double> other64(std::vector<double>(b.begin(), b.end()), Shape{5}, rank);
    ops::reduce_into<double>(acc64.on_host(), other64.in_host(), op, host);
    ops::reduce_into<double>(acc64.on_device(), other64.in_device(), op, q);
    expect.same("reduce_into f64", acc64, true);
  }
  // bf16 casts: from a strided f32 window, and back.
  Both<float> wide(random_values(5 * 8, 9, 100.0), Shape{5, 8}, rank);
  Both<bf16> half(std::vector<bf16>(5 * 6), Shape{5, 6}, rank);
  ops::to_bf16(wide.in_host().block(0, 2, 5, 6), half.on_host(), host);
  ops::to_bf16(wide.in_device().block(0, 2, 5, 6), half.on_device(), q);
  expect.same("to_bf16", half, true);
  Both<float> back(std::vector<float>(30), Shape{5, 6}, rank);
  ops::to_f32(half.in_host(), back.on_host(), host);
  ops::to_f32(half.in_device(), back.on_device(), q);
  expect.same("to_f32", back, true);
  // Contiguous casts of 4n + 3 values: the GPU converts four at a time, then the last three one by one.
  Both<float> run(random_values(23, 14, 100.0), Shape{1, 23}, rank);
  Both<bf16> run_half(std::vector<bf16>(23), Shape{1, 23}, rank);
  ops::to_bf16(run.in_host(), run_half.on_host(), host);
  ops::to_bf16(run.in_device(), run_half.on_device(), q);
  expect.same("to_bf16 (contiguous)", run_half, true);
  ops::to_f32(run_half.in_host(), run.on_host(), host);
  ops::to_f32(run_half.in_device(), run.on_device(), q);
  expect.same("to_f32 (contiguous)", run, true);
}

// Reductions over many rows: column sums over a partial tile of columns (a GPU sums them in row lanes and column
// tiles), and an embedding scatter-add of 300 tokens into 150 vocabulary rows (a GPU splits the rows among 64 buckets).
void many_rows(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 300, cols = 19;
  const Shape m{rows, cols};
  const Both<float> x(random_values(rows * cols, 15, 2.0), m, rank), dy(random_values(rows * cols, 16), m, rank);
  const Both<float> gamma(random_values(cols, 17), Shape{1, cols}, rank);
  Both<float> sums(std::vector<float>(cols), Shape{1, cols}, rank);
  ops::column_sums<float>(x.in_host(), sums.on_host(), host);
  ops::column_sums<float>(x.in_device(), sums.on_device(), q);
  expect.same("column_sums (300 rows)", sums);
  Both<float> dgamma(std::vector<float>(cols), Shape{1, cols}, rank), dbeta(dgamma.host, Shape{1, cols}, rank);
  Both<float> partial(std::vector<float>(2 * rows), Shape{2 * rows}, rank);
  ops::layernorm_backward_partials<float>(dy.in_host(), x.in_host(), gamma.in_host(), dgamma.on_host(), dbeta.on_host(),
                                          partial.on_host(), host);
  ops::layernorm_backward_partials<float>(dy.in_device(), x.in_device(), gamma.in_device(), dgamma.on_device(),
                                          dbeta.on_device(), partial.on_device(), q);
  expect.same("layernorm_backward_partials (300 rows): dgamma", dgamma);
  expect.same("layernorm_backward_partials (300 rows): dbeta", dbeta);
  expect.same("layernorm_backward_partials (300 rows): sums", partial);
  const std::int64_t v0 = 10, vn = 150, width = 3;
  std::vector<int> ids(rows);
  for (std::int64_t t = 0; t < rows; ++t) ids[t] = static_cast<int>((t * 37 + t * t) % (vn + 20));  // some outside
  const Both<int> tokens(ids, Shape{rows}, rank);
  Both<float> dwte(random_values(vn * width, 18), Shape{vn, width}, rank);
  const Both<float> grad(random_values(rows * width, 20), Shape{rows, width}, rank);
  ops::embedding_scatter_add<float>(grad.in_host(), tokens.in_host(), v0, dwte.on_host(), host);
  ops::embedding_scatter_add<float>(grad.in_device(), tokens.in_device(), v0, dwte.on_device(), q);
  expect.same("embedding_scatter_add (300 tokens, 150 rows)", dwte, true);
}

void rows_and_layernorm(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 5, cols = 12, hidden = 36;  // the row's other columns on other ranks
  const ops::Normalization norm{.hidden = hidden, .eps = 1e-5, .centered = true};
  Both<float> x(random_values(rows * cols, 10, 3.0), Shape{rows, cols}, rank);
  Both<float> sum(std::vector<float>(rows), Shape{rows}, rank);
  ops::row_sums<float>(x.in_host(), sum.on_host(), host);
  ops::row_sums<float>(x.in_device(), sum.on_device(), q);
  expect.same("row_sums", sum);
  Both<float> sq(std::vector<float>(rows), Shape{rows}, rank), rstd(std::vector<float>(rows), Shape{rows}, rank);
  const Both<float> gamma(random_values(cols, 11), Shape{1, cols}, rank), beta(random_values(cols, 12), Shape{1, cols}, rank);
  Both<float> xhat(std::vector<float>(rows * cols), Shape{rows, cols}, rank), y(xhat.host, Shape{rows, cols}, rank);
  // Continue from the host's sums on both sides, so that each operation is compared on the same inputs.
  sum = Both<float>(sum.host, Shape{rows}, rank);
  ops::layernorm_square_deviations<float>(x.in_host(), sum.in_host(), hidden, sq.on_host(), host);
  ops::layernorm_square_deviations<float>(x.in_device(), sum.in_device(), hidden, sq.on_device(), q);
  expect.same("layernorm_square_deviations", sq);
  sq = Both<float>(sq.host, Shape{rows}, rank);
  ops::layernorm_normalize<float>(x.in_host(), sum.in_host(), sq.in_host(), gamma.in_host(), beta.in_host(), norm,
                                  xhat.on_host(), rstd.on_host(), y.on_host(), host);
  ops::layernorm_normalize<float>(x.in_device(), sum.in_device(), sq.in_device(), gamma.in_device(), beta.in_device(),
                                  norm, xhat.on_device(), rstd.on_device(), y.on_device(), q);
  expect.same("layernorm_normalize: xhat", xhat);
  expect.same("layernorm_normalize: rstd", rstd);
  expect.same("layernorm_normalize: y", y);
  // Written in bf16: on each device the bits of its own f32 results cast by to_bf16.
  Both<bf16> xhat16(std::vector<bf16>(rows * cols), Shape{rows, cols}, rank), y16(xhat16.host, Shape{rows, cols}, rank);
  Both<float> rstd16(std::vector<float>(rows), Shape{rows}, rank);
  ops::layernorm_normalize(x.in_host(), sum.in_host(), sq.in_host(), gamma.in_host(), beta.in_host(), norm,
                           xhat16.on_host(), rstd16.on_host(), y16.on_host(), host);
  ops::layernorm_normalize(x.in_device(), sum.in_device(), sq.in_device(), gamma.in_device(), beta.in_device(), norm,
                           xhat16.on_device(), rstd16.on_device(), y16.on_device(), q);
  for (const auto& [what, f32, b16] : {std::tuple{"xhat", &xhat, &xhat16}, std::tuple{"y", &y, &y16}}) {
    CAPTURE_BINDING(what);
    Both<bf16> cast(std::vector<bf16>(rows * cols), Shape{rows, cols}, rank);
    ops::to_bf16(f32->in_host(), cast.on_host(), host);
    ops::to_bf16(f32->in_device(), cast.on_device(), q);
    CHECK(cast.host == b16->host);
    CHECK(download(cast.device) == download(b16->device));
  }
  CHECK(download(rstd16.device) == download(rstd.device));
  const Both<float> dy(random_values(rows * cols, 13), Shape{rows, cols}, rank);
  Both<float> dgamma(std::vector<float>(cols), Shape{1, cols}, rank), dbeta(dgamma.host, Shape{1, cols}, rank);
  Both<float> partial(std::vector<float>(2 * rows), Shape{2 * rows}, rank), dx(xhat.host, Shape{rows, cols}, rank);
  xhat = Both<float>(xhat.host, Shape{rows, cols}, rank);
  rstd = Both<float>(rstd.host, Shape{rows}, rank);
  ops::layernorm_backward_partials<float>(dy.in_host(), xhat.in_host(), gamma.in_host(), dgamma.on_host(),
                                          dbeta.on_host(), partial.on_host(), host);
  ops::layernorm_backward_partials<float>(dy.in_device(), xhat.in_device(), gamma.in_device(), dgamma.on_device(),
                                          dbeta.on_device(), partial.on_device(), q);
  expect.same("layernorm_backward_partials: dgamma", dgamma);
  expect.same("layernorm_backward_partials: dbeta", dbeta);
  expect.same("layernorm_backward_partials: sums", partial);
  partial = Both<float>(partial.host, Shape{2 * rows}, rank);
  ops::layernorm_backward_dx<float>(dy.in_host(), xhat.in_host(), gamma.in_host(), rstd.in_host(), partial.in_host(),
                                    norm, TensorView<const float>{}, dx.on_host(), host);
  ops::layernorm_backward_dx<float>(dy.in_device(), xhat.in_device(), gamma.in_device(), rstd.in_device(),
                                    partial.in_device(), norm, TensorView<const float>{}, dx.on_device(), q);
  expect.same("layernorm_backward_dx", dx);
  {  // RMSNorm's (not centered: no mean term), and another eps in the normalization
    const ops::Normalization rms{.hidden = hidden, .eps = 1e-6, .centered = false};
    Both<float> dx_rms(std::vector<float>(rows * cols), Shape{rows, cols}, rank);
    ops::layernorm_backward_dx<float>(dy.in_host(), xhat.in_host(), gamma.in_host(), rstd.in_host(), partial.in_host(),
                                      rms, TensorView<const float>{}, dx_rms.on_host(), host);
    ops::layernorm_backward_dx<float>(dy.in_device(), xhat.in_device(), gamma.in_device(), rstd.in_device(),
                                      partial.in_device(), rms, TensorView<const float>{}, dx_rms.on_device(), q);
    expect.same("layernorm_backward_dx, not centered", dx_rms);
    CHECK(dx_rms.host != dx.host);
    Both<float> xh_rms(std::vector<float>(rows * cols), Shape{rows, cols}, rank), y_rms(xh_rms.host, Shape{rows, cols}, rank);
    Both<float> rstd_rms(std::vector<float>(rows), Shape{rows}, rank);
    ops::layernorm_normalize<float>(x.in_host(), sum.in_host(), sq.in_host(), gamma.in_host(), beta.in_host(), rms,
                                    xh_rms.on_host(), rstd_rms.on_host(), y_rms.on_host(), host);
    ops::layernorm_normalize<float>(x.in_device(), sum.in_device(), sq.in_device(), gamma.in_device(), beta.in_device(),
                                    rms, xh_rms.on_device(), rstd_rms.on_device(), y_rms.on_device(), q);
    expect.same("layernorm_normalize, eps 1e-6: rstd", rstd_rms);
    CHECK(rstd_rms.host != rstd.host);
  }
  // With the residual path's gradient added by the same kernel: on the host, the bits of axpby after it.
  const Both<float> residual(random_values(rows * cols, 14), Shape{rows, cols}, rank);
  Both<float> dx_plus(std::vector<float>(rows * cols), Shape{rows, cols}, rank);
  ops::layernorm_backward_dx<float>(dy.in_host(), xhat.in_host(), gamma.in_host(), rstd.in_host(), partial.in_host(),
                                    norm, residual.in_host(), dx_plus.on_host(), host);
  ops::layernorm_backward_dx<float>(dy.in_device(), xhat.in_device(), gamma.in_device(), rstd.in_device(),
                                    partial.in_device(), norm, residual.in_device(), dx_plus.on_device(), q);
  expect.same("layernorm_backward_dx + residual", dx_plus);
  std::vector<float> unfused = dx.host;
  ops::axpby<float>(1.0f, residual.in_host(), 1.0f, TensorView<float>(unfused.data(), Shape{rows, cols}, Device::cpu),
                    host);
  CHECK(std::memcmp(unfused.data(), dx_plus.host.data(), unfused.size() * sizeof(float)) == 0);
  CHECK(unfused != dx.host);  // the residual changed something
  // xhat kept in bf16 (mixed precision), read as it is: on each device the f32 forms' bits on its values.
  const Both<bf16> xh16(xhat16.host, Shape{rows, cols}, rank);
  const Both<float> xh32(widened(xhat16.host), Shape{rows, cols}, rank);
  std::vector<Both<float>> out;  // dgamma, dbeta, sums, dx of the bf16 form, then of the f32 form
  for (int form = 0; form < 2; ++form) {
    out.emplace_back(dgamma.host, Shape{1, cols}, rank);
    out.emplace_back(dbeta.host, Shape{1, cols}, rank);
    out.emplace_back(partial.host, Shape{2 * rows}, rank);
    out.emplace_back(dx.host, Shape{rows, cols}, rank);
  }
  for (const auto& [on, queue] : {std::pair{0, host}, std::pair{1, q}}) {
    const auto w = [on = on](Both<float>& b) { return on == 0 ? b.on_host() : b.on_device(); };
    const auto r = [on = on](const auto& b) { return on == 0 ? b.in_host() : b.in_device(); };
    ops::layernorm_backward_partials(r(dy), r(xh16), r(gamma), w(out[0]), w(out[1]), w(out[2]), queue);
    ops::layernorm_backward_partials<float>(r(dy), r(xh32), r(gamma), w(out[4]), w(out[5]), w(out[6]), queue);
    ops::layernorm_backward_dx(r(dy), r(xh16), r(gamma), r(rstd), r(partial), norm, r(residual), w(out[3]), queue);
    ops::layernorm_backward_dx<float>(r(dy), r(xh32), r(gamma), r(rstd), r(partial), norm, r(residual), w(out[7]),
                                      queue);
  }
  for (std::size_t k = 0; k < 4; ++k) {
    CAPTURE(k);
    CHECK(out[k].host == out[k + 4].host);
    CHECK(download(out[k].device) == download(out[k + 4].device));
  }
  CHECK(out[3].host != dx_plus.host);  // the rounding of xhat changed something
}

// RoPE on the queries and keys of 2 sequences of 3 rows, 2 heads of dimension 4: the host's values on the device, V
// untouched, and the inverse turning them back.
void rotary_positions(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 6, width = 8;
  const std::vector<float> values = random_values(rows * 3 * width, 30);
  Both<float> qkv(values, Shape{rows, 3 * width}, rank);
  const ops::Rotary turn{.seq = 3, .heads = 2, .kv_heads = 2, .theta = 100, .inverse = false};
  ops::rotary<float>(qkv.on_host(), turn, host);
  ops::rotary<float>(qkv.on_device(), turn, q);
  expect.near("rotary", qkv, 1e-6);  // cos and sin from each device's f64 libm
  double turned = 0, back = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < 3 * width; ++c) {
      const auto e = static_cast<std::size_t>(r * 3 * width + c);
      if (c >= 2 * width) CHECK(qkv.host[e] == values[e]);  // V
      turned = std::max(turned, static_cast<double>(std::abs(qkv.host[e] - values[e])));
    }
  }
  CHECK(turned > 0.1);
  ops::rotary<float>(qkv.on_host(), {.seq = 3, .heads = 2, .kv_heads = 2, .theta = 100, .inverse = true}, host);
  for (std::size_t e = 0; e < values.size(); ++e) back = std::max(back, static_cast<double>(std::abs(qkv.host[e] - values[e])));
  CHECK(back < 1e-5);
}

// The block's residual kernels on a block at global row 20, column 3 (not a whole draw of four columns): each against
// the device's host, and on the host against the unfused operations it replaces, bit for bit.
void residual_paths(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t rows = 6, cols = 11;
  const Shape m{rows, cols};
  const Both<float> residual(random_values(rows * cols, 30, 2.0), m, rank);
  for (const double p : {0.0, 0.3}) {
    CAPTURE(p);
    const ops::DropoutMask mask{.row0 = 20, .col0 = 3, .p = p, .seed = 41, .stream = 7};
    const std::vector<float> values = random_values(rows * cols, 31, 3.0);
    Both<float> x(values, m, rank), sums(std::vector<float>(rows), Shape{rows}, rank);
    ops::dropout_residual<float>(residual.in_host(), x.on_host(), mask, sums.on_host(), host);
    ops::dropout_residual<float>(residual.in_device(), x.on_device(), mask, sums.on_device(), q);
    expect.same("dropout_residual: x", x, true);
    expect.same("dropout_residual: row sums", sums);
    // Unfused on the host: dropout, axpby(1, residual, 1, x), row_sums.
    std::vector<float> unfused = values, unfused_sums(rows);
    const TensorView<float> u(unfused.data(), m, Device::cpu);
    ops::dropout<float>(u, mask.row0, mask.col0, mask.p, mask.seed, mask.stream, host);
    ops::axpby<float>(1.0f, residual.in_host(), 1.0f, u, host);
    ops::row_sums<float>(u, TensorView<float>(unfused_sums.data(), Shape{rows}, Device::cpu), host);
    CHECK(unfused == x.host);
    CHECK(unfused_sums == sums.host);
    // Without row sums.
    Both<float> bare(values, m, rank);
    ops::dropout_residual<float>(residual.in_device(), bare.on_device(), mask, TensorView<float>{}, q);
    bare.host = x.host;
    expect.same("dropout_residual without row sums", bare, true);
    // The out-of-place dropout of backward: y = dropout(x), x kept.
    Both<float> source(values, m, rank), y(std::vector<float>(rows * cols), m, rank);
    ops::dropout_copy<float>(source.in_host(), y.on_host(), mask, host);
    ops::dropout_copy<float>(source.in_device(), y.on_device(), mask, q);
    expect.same("dropout_copy", y, true);
    expect.same("dropout_copy leaves x", source, true);
    std::vector<float> in_place = values;
    ops::dropout<float>(TensorView<float>(in_place.data(), m, Device::cpu), mask.row0, mask.col0, mask.p, mask.seed,
                        mask.stream, host);
    CHECK(in_place == y.host);
    CHECK((p == 0.0) == (y.host == values));  // the mask drops something where p > 0
  }
}

void embedding_loss(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  // A vocabulary slice [v0, v0 + vn) of width 5, tokens in and out of it.
  const std::int64_t n = 8, width = 5, v0 = 3, vn = 4, max_seq = 6, row_offset = 2, rows = 4;
  const Both<int> tokens(std::vector<int>{3, 0, 6, 4, 3, 7, 9, 5}, Shape{n}, rank);
  const Both<float> wte(random_values(vn * width, 16), Shape{vn, width}, rank);
  const Both<float> wpe(random_values(max_seq * width, 17), Shape{max_seq, width}, rank);
  const Both<float> grad(random_values(n * width, 18), Shape{n, width}, rank);
  Both<float> partial(std::vector<float>(n * width), Shape{n, width}, rank);
  Both<float> dwte(random_values(vn * width, 19), Shape{vn, width}, rank);
  Both<float> positions(std::vector<float>(max_seq * width), Shape{max_seq, width}, rank);
  ops::embedding_lookup<float>(wte.in_host(), tokens.in_host(), v0, partial.on_host(), host);
  ops::embedding_lookup<float>(wte.in_device(), tokens.in_device(), v0, partial.on_device(), q);
  expect.same("embedding_lookup", partial);
  ops::add_positions<float>(wpe.in_host(), row_offset, 4, partial.on_host().block(0, 0, rows, width), host);
  ops::add_positions<float>(wpe.in_device(), row_offset, 4, partial.on_device().block(0, 0, rows, width), q);
  expect.same("add_positions", partial);
  ops::embedding_scatter_add<float>(grad.in_host(), tokens.in_host(), v0, dwte.on_host(), host);
  ops::embedding_scatter_add<float>(grad.in_device(), tokens.in_device(), v0, dwte.on_device(), q);
  expect.same("embedding_scatter_add", dwte);
  // All n = 8 rows: two rows per position of a sequence of 4, positions 4 and 5 of max_seq = 6 unused (zero).
  ops::position_grad<float>(grad.in_host(), row_offset, 4, positions.on_host(), host);
  ops::position_grad<float>(grad.in_device(), row_offset, 4, positions.on_device(), q);
  expect.same("position_grad", positions);

  // Cross-entropy of logits [3, 1100] of the slice [6, 1106) of a vocabulary of 1100 ids (the last 6 columns padding):
  // wider than a CPU block of columns (1024) and than a GPU block of threads (256); targets of rows 1..3 of a batch of
  // 10, one past the slice.
  const std::int64_t ce_rows = 3, ce_vn = 1100, ce_v0 = 6, ce_offset = 1, vocab = 1100, mean_over = 30;
  const Both<int> targets(std::vector<int>{0, 7, 2, 1099, 6, 9, 1, 3, 4, 5}, Shape{10}, rank);
  std::vector<float> values = random_values(ce_rows * ce_vn, 20, 3.0);
  values[static_cast<std::size_t>(ce_vn + 1050)] = 9.0f;  // row 1's max in the second CPU block: the sum rescales
  Both<float> logits(values, Shape{ce_rows, ce_vn}, rank);
  Both<float> stats(std::vector<float>(4 * ce_rows), Shape{4, ce_rows}, rank);
  ops::cross_entropy_stats<float>(logits.in_host(), targets.in_host(), ce_offset, ce_v0, vocab, stats.on_host(), host);
  ops::cross_entropy_stats<float>(logits.in_device(), targets.in_device(), ce_offset, ce_v0, vocab, stats.on_device(),
                                  q);
  expect.same("cross_entropy_stats", stats);
  // As if another slice's max were larger by 0.5: the sums rescale to it, and the gradient's softmax is the same.
  for (std::int64_t r = 0; r < ce_rows; ++r) stats.host[static_cast<std::size_t>(ce_rows + r)] += 0.5f;
  stats = Both<float>(stats.host, Shape{4, ce_rows}, rank);
  ops::cross_entropy_rescale<float>(stats.on_host(), host);
  ops::cross_entropy_rescale<float>(stats.on_device(), q);
  expect.same("cross_entropy_rescale", stats);
  // Into bf16 (mixed precision), the logits left as they are: on each device the in-place form's bits, rounded.
  Both<bf16> dlogits16(std::vector<bf16>(static_cast<std::size_t>(ce_rows * ce_vn)), Shape{ce_rows, ce_vn}, rank);
  ops::cross_entropy_gradient(logits.in_host(), stats.in_host(), targets.in_host(), ce_offset, ce_v0, vocab, mean_over,
                              dlogits16.on_host(), host);
  ops::cross_entropy_gradient(logits.in_device(), stats.in_device(), targets.in_device(), ce_offset, ce_v0, vocab,
                              mean_over, dlogits16.on_device(), q);
  CHECK(logits.host == values);
  CHECK(download(logits.device) == values);
  ops::cross_entropy_gradient<float>(logits.on_host(), stats.in_host(), targets.in_host(), ce_offset, ce_v0, vocab,
                                     mean_over, host);
  ops::cross_entropy_gradient<float>(logits.on_device(), stats.in_device(), targets.in_device(), ce_offset, ce_v0,
                                     vocab, mean_over, q);
  expect.same("cross_entropy_gradient", logits);
  CHECK(dlogits16.host == to_bits(logits.host));
  CHECK(download(dlogits16.device) == to_bits(download(logits.device)));
  // The CPU's against the formulas in f64: the softmax over the slice's 1094 ids, its target's one subtracted.
  double worst = 0;
  for (std::int64_t r = 0; r < ce_rows; ++r) {
    const auto x = [&](std::int64_t c) { return static_cast<double>(values[static_cast<std::size_t>(r * ce_vn + c)]); };
    double max = -1e300, sum = 0;
    for (std::int64_t c = 0; c < vocab - ce_v0; ++c) max = std::max(max, x(c));
    for (std::int64_t c = 0; c < vocab - ce_v0; ++c) sum += std::exp(x(c) - max);
    const std::int64_t target = targets.host[static_cast<std::size_t>(ce_offset + r)] - ce_v0;
    for (std::int64_t c = 0; c < ce_vn; ++c) {
      const double p = c < vocab - ce_v0 ? std::exp(x(c) - max) / sum : 0.0;
      const double want = (p - (c == target ? 1.0 : 0.0)) / mean_over;
      worst = std::max(worst, std::abs(logits.host[static_cast<std::size_t>(r * ce_vn + c)] - want) * mean_over);
    }
    CHECK(stats.host[static_cast<std::size_t>(r)] == static_cast<float>(max));  // the slice's own max, exact
    CHECK(stats.host[static_cast<std::size_t>(3 * ce_rows + r)] ==
          (target >= 0 && target < vocab - ce_v0 ? static_cast<float>(x(target)) : 0.0f));
  }
  CAPTURE(worst);
  CHECK(worst < 1e-6);
  // A slice of padding only (ids from the vocabulary's end): no max, a zero sum, no target, a zero gradient.
  Both<float> padding(random_values(ce_rows * 4, 23), Shape{ce_rows, 4}, rank);
  ops::cross_entropy_stats<float>(padding.in_host(), targets.in_host(), ce_offset, vocab, vocab, stats.on_host(), host);
  ops::cross_entropy_stats<float>(padding.in_device(), targets.in_device(), ce_offset, vocab, vocab, stats.on_device(),
                                  q);
  expect.same("cross_entropy_stats of padding", stats);
  CHECK(stats.host[0] == -std::numeric_limits<float>::infinity());
  CHECK(stats.host[2 * ce_rows] == 0.0f);
  ops::cross_entropy_gradient<float>(padding.on_host(), stats.in_host(), targets.in_host(), ce_offset, vocab, vocab,
                                     mean_over, host);
  ops::cross_entropy_gradient<float>(padding.on_device(), stats.in_device(), targets.in_device(), ce_offset, vocab,
                                     vocab, mean_over, q);
  expect.same("cross_entropy_gradient of padding", padding);
  CHECK(std::all_of(padding.host.begin(), padding.host.end(), [](float g) { return g == 0.0f; }));
}

void optimizer(RankDevice& rank, const ops::Queue& q, const Expect& expect) {
  const ops::Queue host{};
  const std::int64_t n = 300;  // more than a GPU block of threads
  const Both<float> grad(random_values(n, 21), Shape{n}, rank);
  Both<double> scratch(std::vector<double>(ops::sum_squares_scratch()), Shape{ops::sum_squares_scratch()}, rank);
  const double on_host = ops::sum_squares<float>(grad.in_host(), TensorView<double>(), host);
  const double on_device = ops::sum_squares<float>(grad.in_device(), scratch.on_device(), q);
  if (expect.exact) {
    CHECK(on_device == on_host);
  } else {
    CHECK(on_device == doctest::Approx(on_host).epsilon(1e-12));
  }
  Both<float> value(random_values(n, 22), Shape{n}, rank), m(std::vector<float>(n), Shape{n}, rank),
      v(std::vector<float>(n), Shape{n}, rank);
  for (int t = 1; t <= 2; ++t) {
    const AdamWStep step{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 0.5,
                         .c1 = 1 - std::pow(0.9, t), .c2 = 1 - std::pow(0.95, t)};
    ops::adamw_update<float>(value.on_host(), grad.in_host(), m.on_host(), v.on_host(), step, host);
    ops::adamw_update<float>(value.on_device(), grad.in_device(), m.on_device(), v.on_device(), step, q);
  }
  expect.same("adamw_update: weights", value);
  expect.same("adamw_update: first moments", m);
  expect.same("adamw_update: second moments", v);
  // The fused form (a weight's bf16 copy written in the same pass): the same update, and on each side the copy is
  // bitwise the cast of that side's new value.
  Both<bf16> copy(std::vector<bf16>(n), Shape{n}, rank);
  const AdamWStep third{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 0.5,
                        .c1 = 1 - std::pow(0.9, 3), .c2 = 1 - std::pow(0.95, 3)};
  ops::adamw_update(value.on_host(), grad.in_host(), m.on_host(), v.on_host(), third, copy.on_host(), host);
  ops::adamw_update(value.on_device(), grad.in_device(), m.on_device(), v.on_device(), third, copy.on_device(), q);
  expect.same("adamw_update with a bf16 copy: weights", value);
  expect.same("adamw_update with a bf16 copy: first moments", m);
  const std::vector<float> device_value = download(value.device);
  const std::vector<bf16> device_copy = download(copy.device);
  bool casts = true;
  for (std::size_t e = 0; e < copy.host.size(); ++e) {
    casts = casts && copy.host[e] == bf16(value.host[e]) &&
            device_copy[e] == bf16(device_value[e]);
  }
  CHECK(casts);
  expect.near("adamw_update with a bf16 copy: the copy", copy, 1e-2);  // one rounding of values 1e-5 apart
}

// GEMMs as the layers run them: every transpose, f32 and bf16 math, each epilogue fused (a leading dimension of GELU's
// input divisible by 8) and not (9), k = 0; and attention's strided batches — Q, K and V side by side in a [s, 3w]
// block, starting at element offsets that are not 256-byte aligned — against the host's products.
void gemms(RankDevice& rank, const Expect& expect) {
  const std::int64_t m = 6, n = 8, k = 5;
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    CAPTURE(static_cast<int>(math));
    ops::Queue q = rank.queue();
    q.math = math;
    const ops::Queue host{.math = math};
    for (Trans ta : {Trans::no, Trans::yes}) {
      for (Trans tb : {Trans::no, Trans::yes}) {
        const Both<float> a(random_values(m * k, 23), ta == Trans::no ? Shape{m, k} : Shape{k, m}, rank);
        const Both<float> b(random_values(k * n, 24), tb == Trans::no ? Shape{k, n} : Shape{n, k}, rank);
        Both<float> c(random_values(m * n, 25), Shape{m, n}, rank);
        ops::gemm<float>(ta, tb, 0.5f, a.in_host(), b.in_host(), -1.0f, c.on_host(), host);
        ops::gemm<float>(ta, tb, 0.5f, a.in_device(), b.in_device(), -1.0f, c.on_device(), q);
        expect.same("gemm", c);
      }
    }
    for (std::int64_t width : {std::int64_t{8}, std::int64_t{9}}) {  // fused by cuBLASLt (ld 8), and not (ld 9)
      const Both<float> a(random_values(m * k, 26), Shape{m, k}, rank), b(random_values(k * width, 27), Shape{k, width}, rank);
      const Both<float> bias(random_values(width, 28), Shape{1, width}, rank);
      Both<float> c(std::vector<float>(m * width), Shape{m, width}, rank), pre(c.host, Shape{m, width}, rank);
      using Kind = ops::Epilogue<float>::Kind;
      ops::gemm<float>(Trans::no, Trans::no, 1.0f, a.in_host(), b.in_host(), 0.0f, c.on_host(),
                       {.kind = Kind::bias_gelu, .bias = bias.in_host(), .pre = pre.on_host()}, host);
      ops::gemm<float>(Trans::no, Trans::no, 1.0f, a.in_device(), b.in_device(), 0.0f, c.on_device(),
                       {.kind = Kind::bias_gelu, .bias = bias.in_device(), .pre = pre.on_device()}, q);
      CAPTURE(width);
      expect.same("gemm with bias and GELU: C", c);
      expect.same("gemm with bias and GELU: GELU's input", pre);
    }
    {  // k = 0: C = beta C; an empty output does nothing
      const Both<float> a(std::vector<float>(), Shape{m, 0}, rank), b(std::vector<float>(), Shape{0, n}, rank);
      Both<float> c(random_values(m * n, 29), Shape{m, n}, rank);
      ops::gemm<float>(Trans::no, Trans::no, 1.0f, a.in_host(), b.in_host(), 0.5f, c.on_host(), host);
      ops::gemm<float>(Trans::no, Trans::no, 1.0f, a.in_device(), b.in_device(), 0.5f, c.on_device(), q);
      expect.same("gemm with k = 0", c, true);
    }
    // Attention: per sequence [s, 3w] of qkv holds Q, K, V of `heads` heads side by side (w = heads * d).
    const std::int64_t s = 5, heads = 3, d = 4, w = heads * d;
    const Both<float> qkv(random_values(2 * s * 3 * w, 30), Shape{2 * s, 3 * w}, rank);
    Both<float> scores(std::vector<float>(heads * s * s), Shape{heads * s, s}, rank);
    Both<float> merged(random_values(2 * s * w, 31), Shape{2 * s, w}, rank);
    const auto side = [&](TensorView<const float> all, int which) {
      return ops::BatchView<const float>{.all = all.block(s, which * w, s, w), .layout = ops::Batched::side_by_side};
    };
    ops::gemm_batched<float>(Trans::no, Trans::yes, 1.0f, side(qkv.in_host(), 0), side(qkv.in_host(), 1), 0.0f,
                             {.all = scores.on_host(), .layout = ops::Batched::stacked}, heads, host);
    ops::gemm_batched<float>(Trans::no, Trans::yes, 1.0f, side(qkv.in_device(), 0), side(qkv.in_device(), 1), 0.0f,
                             {.all = scores.on_device(), .layout = ops::Batched::stacked}, heads, q);
    expect.same("gemm_batched: scores = Q K^T", scores);
    scores = Both<float>(scores.host, Shape{heads * s, s}, rank);
    ops::gemm_batched<float>(Trans::no, Trans::no, 1.0f, {.all = scores.in_host(), .layout = ops::Batched::stacked},
                             side(qkv.in_host(), 2), 0.0f,
                             {.all = merged.on_host().block(s, 0, s, w), .layout = ops::Batched::side_by_side}, heads,
                             host);
    ops::gemm_batched<float>(Trans::no, Trans::no, 1.0f, {.all = scores.in_device(), .layout = ops::Batched::stacked},
                             side(qkv.in_device(), 2), 0.0f,
                             {.all = merged.on_device().block(s, 0, s, w), .layout = ops::Batched::side_by_side},
                             heads, q);
    expect.same("gemm_batched: out = P V", merged);
  }
}

}  // namespace

void check_kernels(RankDevice& rank) {
  const Expect expect{.exact = rank.runtime().device() == Device::sim};
  const ops::Queue q = rank.queue();
  element_wise(rank, q, expect);
  gelu_erf(rank, q, expect);
  dropout_and_reductions(rank, q, expect);
  rows_and_layernorm(rank, q, expect);
  residual_paths(rank, q, expect);
  rotary_positions(rank, q, expect);
  llama_parts(rank, q, expect);
  many_rows(rank, q, expect);
  embedding_loss(rank, q, expect);
  attention_kernels(rank, q, expect);
  optimizer(rank, q, expect);
  gemms(rank, expect);
}

}  // namespace optimus::test
