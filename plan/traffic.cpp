// The communication and activation-memory formulas of traffic.hpp.
#include "optimus/plan/traffic.hpp"

namespace optimus::plan {
namespace {

std::uint64_t all_reduce_bytes(std::uint64_t bytes, std::uint64_t p) { return 2 * (p - 1) * bytes / p; }

}  // namespace

// One Linear2D, forward and backward: three SUMMA products and the bias's gather and reduce-scatter. A rank
// receives (q-1)/q^2 of each moving matrix: X [n, in] and W [in, out] as operands of AB, W as the operand and dX as
// the reduced product of ABT, X as the operand and dW as the reduced product of ATB.

std::uint64_t linear_2d_bytes(std::int64_t n, std::int64_t in, std::int64_t out, std::uint64_t q, std::size_t elem,
                              std::size_t operand, bool bias) {
  const auto share = [&](std::int64_t count) { return (q - 1) * static_cast<std::uint64_t>(count) / (q * q); };
  const std::uint64_t x = share(n * in), w = share(in * out);
  const std::uint64_t summa = (x + w) * operand + (w * operand + x * elem) + (x * operand + w * elem);
  const std::uint64_t bias_bytes = bias ? 2 * (q - 1) * static_cast<std::uint64_t>(out) / (q * q) * elem : 0;
  return summa + bias_bytes;
}

namespace {

// One LayerNorm2D, forward and backward: LayerNorm (`centered`) all-reduces the row sums and the squared deviations'
// forward, RMSNorm only the sums of squares, and has no beta.
std::uint64_t layernorm_2d(std::int64_t n, std::int64_t h, std::uint64_t q, std::size_t elem, bool centered) {
  const std::uint64_t rows = static_cast<std::uint64_t>(n) / q;
  const std::uint64_t forward = centered ? 2 : 1;
  const std::uint64_t stats = forward * all_reduce_bytes(rows * elem, q) + all_reduce_bytes(2 * rows * elem, q);
  const std::uint64_t piece = (q - 1) * static_cast<std::uint64_t>(h) / (q * q) * elem;
  // gamma (and beta) forward, gamma backward; dgamma (and dbeta).
  return stats + (centered ? 5 : 3) * piece;
}

}  // namespace

std::uint64_t predicted_bytes_1d(const BlockShape& s, int p, std::size_t elem, std::int64_t layers) {
  const auto pp = static_cast<std::uint64_t>(p);
  const auto activation = static_cast<std::uint64_t>(s.tokens() * s.hidden) * elem;
  return static_cast<std::uint64_t>(layers) * 4 * all_reduce_bytes(activation, pp);
}

std::uint64_t predicted_bytes_2d(const BlockShape& s, int q, std::size_t elem, std::int64_t layers,
                                 std::size_t operand) {
  const auto qq = static_cast<std::uint64_t>(q);
  const std::int64_t n = s.tokens(), h = s.hidden;
  const std::size_t op = operand == 0 ? elem : operand;
  const std::uint64_t block =
      linear_2d_bytes(n, h, s.qkv_width, qq, elem, op, s.bias) + linear_2d_bytes(n, h, h, qq, elem, op, s.bias) +
      linear_2d_bytes(n, h, s.fc_width, qq, elem, op, s.bias) + linear_2d_bytes(n, s.ffn, h, qq, elem, op, s.bias) +
      2 * layernorm_2d(n, h, qq, elem, s.centered);
  return static_cast<std::uint64_t>(layers) * block;
}

double predicted_activation_bytes_1d(const BlockShape& s, int p, std::size_t elem, std::size_t kept) {
  const double n = static_cast<double>(s.tokens()), h = static_cast<double>(s.hidden), pp = p;
  const double f = static_cast<double>(s.ffn), sq = static_cast<double>(s.seq);
  const double qkv = static_cast<double>(s.qkv_width), fc = static_cast<double>(s.fc_width);
  const double saved = n * h * 4.0 + n * (qkv + h) / pp + n * (fc + f) / pp;
  const double statistics = 2.0 * n + static_cast<double>(s.batch * s.heads) * sq / pp;
  return saved * static_cast<double>(kept == 0 ? elem : kept) + statistics * static_cast<double>(elem);
}

double predicted_activation_bytes_2d(const BlockShape& s, int q, std::size_t elem, std::size_t kept) {
  const double n = static_cast<double>(s.tokens()), h = static_cast<double>(s.hidden), p = q * q;
  const double f = static_cast<double>(s.ffn), sq = static_cast<double>(s.seq);
  const double qkv = static_cast<double>(s.qkv_width), fc = static_cast<double>(s.fc_width);
  const double saved = n * (5.0 * h + qkv + fc + f) / p;
  const double statistics = 2.0 * n / q + static_cast<double>(s.batch * s.heads) * sq / p;
  return saved * static_cast<double>(kept == 0 ? elem : kept) + statistics * static_cast<double>(elem);
}

}  // namespace optimus::plan
