// ContextMark::check and the recomputation policies' names and saved bytes.
#include "optimus/layers/context.hpp"

#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"

namespace optimus {
namespace {
const char* math_name(ops::GemmMath math) {
  switch (math) {
    case ops::GemmMath::f32: return "f32";
    case ops::GemmMath::tf32: return "tf32";
    case ops::GemmMath::bf16: return "bf16";
  }
  return "?";
}
}  // namespace

void ContextMark::check(const Grid& grid, std::string_view layer) const {
  OPTIMUS_CHECK(filled_, layer, ": backward without a training forward's context (empty, or already consumed)");
  OPTIMUS_CHECK(grid.gemm_math() == math_ && grid.device() == device_, layer, ": the context was saved under ",
                math_name(math_), " GEMM math in ", name_of(device_of(device_)), " memory, but this layer's grid handle has ",
                math_name(grid.gemm_math()), " in ", name_of(device_of(grid.device())),
                " memory; give a context back to the layer that saved it (or one on a handle that executes alike)");
}

const char* name_of(Recompute policy) {
  switch (policy) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& text) {
  for (Recompute p : {Recompute::none, Recompute::selective, Recompute::full}) {
    if (text == name_of(p)) return p;
  }
  OPTIMUS_FAIL("recompute: '", text, "' is not one of none, selective, full");
}

std::int64_t block_saved_bytes(const BlockActivations& s, Recompute policy) {
  const std::int64_t n = s.batch * s.seq, qq = static_cast<std::int64_t>(s.q) * s.q;
  const std::int64_t per_token = n * (5 * s.hidden + s.qkv_width + s.fc_width + s.ffn) / qq;
  const std::int64_t lse = s.element_bytes * s.batch * s.heads * s.seq / qq;  // the fused attention's, per query
  const std::int64_t rstd = s.element_bytes * 2 * n / s.q;
  switch (policy) {
    case Recompute::none:
    case Recompute::selective: return s.saved_bytes * per_token + lse + rstd;
    case Recompute::full: return s.element_bytes * n * s.hidden / qq;
  }
  return 0;
}

std::int64_t head_saved_bytes(const BlockActivations& s, std::int64_t stored_vocab) {
  const std::int64_t n = s.batch * s.seq, qq = static_cast<std::int64_t>(s.q) * s.q;
  return s.saved_bytes * n * (2 * s.hidden + stored_vocab) / qq + s.element_bytes * n / s.q;
}

}  // namespace optimus
