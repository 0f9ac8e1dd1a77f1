// The cases of a block's parts against the reference — LayerNorm2D and RMSNorm2D, Attention2D (multi-head and
// grouped-query, learned or rotary positions, with biases or without), MLP2D (GELU or SwiGLU) — and their checks,
// shared by the MPI and in-process suites.
#include "layer_case_support.hpp"

namespace optimus::test {

// LayerNorm2D as `spec` says against the reference's LayerNorm or RMSNorm (tested with an eps other than LayerNorm's,
// so that the spec reaches the kernels).
template <class T>
void norm_case(const Grid& grid, const LayerShapes& s, const NormSpec& spec, const InFlight& f) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  const bool rms = spec.kind == NormSpec::Kind::rmsnorm;
  LayerNorm2D<T> layer(grid, ParameterTags::of(grid), "norm", h, spec);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  REQUIRE(refs.size() == (rms ? 1u : 2u));  // RMSNorm has no bias
  const reference::Parameters p = load_random(refs, 200, grid.device());
  // A large common offset: a one-pass E[x^2] - E[x]^2 would lose fp32's accuracy here (LayerNorm); RMSNorm does not
  // subtract the mean, so a small one shows in its output.
  const auto x = [&](int c) { return rounded<T>((input<T>(n, h, 3, c).array() + (rms ? 0.5 : 100.0)).matrix()); };
  const auto dy = [&](int c) { return input<T>(n, h, 4, c); };
  LayerRun<typename LayerNorm2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return global(layer.forward(DistMatrix<T>::from_global(grid, x(c)), pass_for(0, c), saved));
      },
      .backward = distributed_backward<T>(grid, layer, dy),
      .expected = [&](int c) -> Expected {
        if (rms) {
          reference::RmsNormCache cache;
          const Matrix y = reference::rmsnorm_forward(x(c), p.at("norm.weight"), spec.eps, cache);
          const reference::RmsNormGrads g = reference::rmsnorm_backward(cache, p.at("norm.weight"), dy(c));
          return {.output = y, .input_grad = g.dx, .grads = {{"norm.weight", g.dgamma}}};
        }
        reference::LayerNormCache cache;
        const Matrix y = reference::layernorm_forward(x(c), p.at("norm.weight"), p.at("norm.bias"), spec.eps, cache);
        const reference::LayerNormGrads g = reference::layernorm_backward(cache, p.at("norm.weight"), dy(c));
        return {.output = y, .input_grad = g.dx, .grads = {{"norm.weight", g.dgamma}, {"norm.bias", g.dbeta}}};
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}

template <class T>
void attention_case(const Grid& grid, const LayerShapes& s, double dropout, const AttentionVariant& v,
                    const InFlight& f) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  const std::int64_t heads = v.rope && (h / s.heads) % 2 != 0 ? s.heads / 2 : s.heads, kv = v.kv_heads(heads);
  const std::optional<RopeSpec>& rope = v.rope;
  Attention2D<T> layer(grid, ParameterTags::of(grid), "attn",
                       AttentionSpec{.hidden = h, .heads = heads, .kv_heads = kv, .dropout = {dropout, 77, 3},
                                     .rope = rope, .bias = v.bias, .causal = v.causal});
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 300, grid.device());
  const auto x = [&](int c) { return input<T>(n, h, 5, c); };
  const auto dy = [&](int c) { return input<T>(n, h, 6, c); };
  LayerRun<typename Attention2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return global(
            layer.forward(DistMatrix<T>::from_global(grid, x(c)), s.seq, pass_for(9, c, s, v.padded), saved));
      },
      .backward = distributed_backward<T>(grid, layer, dy),
      .expected = [&](int c) {
        const reference::Dropout rd{dropout, 77, pass_for(9, c).step, 3};
        const reference::AttentionWeights w = attention_weights(p, "attn");
        reference::AttentionCache cache;
        const reference::KeyMask keys{.causal = v.causal, .lengths = pass_for(9, c, s, v.padded).lengths};
        const Matrix y = reference::attention_forward(x(c), w, s.batch, heads, kv, rope, keys, rd, cache);
        const reference::AttentionGrads g =
            reference::attention_backward(cache, w, s.batch, heads, kv, rope, rd, dy(c));
        Expected e{.output = y, .input_grad = g.dx, .grads = {}};
        put_attention(e.grads, "attn", g.dw);
        return e;
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}

// GELU or SwiGLU; linears with biases or none.
template <class T>
void mlp_case(const Grid& grid, const LayerShapes& s, MlpKind kind, bool bias, const InFlight& f) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  MLP2D<T> layer(grid, ParameterTags::of(grid), "mlp", h, s.ffn, kind, bias);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 400, grid.device());
  const auto x = [&](int c) { return input<T>(n, h, 7, c); };
  const auto dy = [&](int c) { return input<T>(n, h, 8, c); };
  LayerRun<typename MLP2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return global(layer.forward(DistMatrix<T>::from_global(grid, x(c)), pass_for(0, c), saved));
      },
      .backward = distributed_backward<T>(grid, layer, dy),
      .expected = [&](int c) {
        const reference::MlpWeights w = mlp_weights(p, "mlp");
        reference::MlpCache cache;
        const Matrix y = reference::mlp_forward(x(c), w, kind, cache);
        const reference::MlpGrads g = reference::mlp_backward(cache, w, kind, dy(c));
        Expected e{.output = y, .input_grad = g.dx, .grads = {}};
        put_mlp(e.grads, "mlp", g.dw);
        return e;
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}

#define OPTIMUS_INSTANTIATE(T)                                                                                    \
  template void norm_case<T>(const Grid&, const LayerShapes&, const NormSpec&, const InFlight&);                 \
  template void attention_case<T>(const Grid&, const LayerShapes&, double, const AttentionVariant&, const InFlight&); \
  template void mlp_case<T>(const Grid&, const LayerShapes&, MlpKind, bool, const InFlight&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

void check_layernorm(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  in_flight_scenarios<double>([&](const InFlight& f) { norm_case<double>(grid, shapes_for(q), kLayerNorm, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { norm_case<float>(grid, shapes_for(q), kLayerNorm, f); });
}

void check_rmsnorm(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  in_flight_scenarios<double>([&](const InFlight& f) { norm_case<double>(grid, shapes_for(q), kRmsNorm, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { norm_case<float>(grid, shapes_for(q), kRmsNorm, f); });
}

void check_attention(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  attention_case<double>(grid, shapes_for(q), 0.0, AttentionVariant{}, InFlight{});
  attention_case<float>(grid, shapes_for(q), 0.0, AttentionVariant{}, InFlight{});
  in_flight_scenarios<double>([&](const InFlight& f) { attention_case<double>(grid, shapes_for(q), 0.2, AttentionVariant{}, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { attention_case<float>(grid, shapes_for(q), 0.2, AttentionVariant{}, f); });
  // An encoder's: every query sees every key.
  const AttentionVariant encoder = bidirectional_attention();
  attention_case<double>(grid, shapes_for(q), 0.0, encoder, InFlight{});
  attention_case<float>(grid, shapes_for(q), 0.0, encoder, InFlight{});
  in_flight_scenarios<double>([&](const InFlight& f) { attention_case<double>(grid, shapes_for(q), 0.2, encoder, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { attention_case<float>(grid, shapes_for(q), 0.2, encoder, f); });
  // Padded sequences (a key-padding mask): bidirectional in every in-flight scenario, causal in one.
  const AttentionVariant padded = padded_attention(false);
  in_flight_scenarios<double>([&](const InFlight& f) { attention_case<double>(grid, shapes_for(q), 0.2, padded, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { attention_case<float>(grid, shapes_for(q), 0.2, padded, f); });
  attention_case<double>(grid, shapes_for(q), 0.2, padded_attention(true), InFlight{});
  attention_case<float>(grid, shapes_for(q), 0.2, padded_attention(true), InFlight{});
}

void check_rotary_attention(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  const RopeSpec rope{.theta = 500};  // a small theta: every pair turns visibly within the test's 5 positions
  // Llama's attention: rotary positions, no biases; and rotary positions with GPT-2's biases.
  const AttentionVariant llama{.rope = rope, .bias = false};
  attention_case<double>(grid, shapes_for(q), 0.0, llama, InFlight{});
  attention_case<double>(grid, shapes_for(q), 0.0, AttentionVariant{.rope = rope, .bias = true}, InFlight{});
  in_flight_scenarios<double>([&](const InFlight& f) { attention_case<double>(grid, shapes_for(q), 0.2, llama, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { attention_case<float>(grid, shapes_for(q), 0.2, llama, f); });
}

void check_grouped_query_attention(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  // kv_heads = heads / 2 and q (each grid column then holds one key/value head), without and with rotary positions
  // (Llama's attention); kv_heads = heads is the multi-head attention of the cases above.
  const RopeSpec rope{.theta = 500};
  // (heads / 2 where q divides it: with rotary positions the shapes have 6 heads, and q = 2 does not divide 3.)
  const auto half = [q](std::int64_t heads) { return (heads / 2) % q == 0 ? heads / 2 : std::int64_t{q}; };
  const auto one_per_column = [q](std::int64_t) { return std::int64_t{q}; };
  // Every in-flight scenario (f64) for heads / 2; one context for kv = q and for f32 (the contexts' handling is the
  // attention's, whatever kv is).
  const LayerShapes s = shapes_for(q);
  const AttentionVariant half_llama{.rope = rope, .bias = false, .kv_heads = half};
  const AttentionVariant q_llama{.rope = rope, .bias = false, .kv_heads = one_per_column};
  attention_case<double>(grid, s, 0.0, AttentionVariant{.rope = std::nullopt, .bias = true, .kv_heads = half},
                         InFlight{});
  attention_case<double>(grid, s, 0.0, AttentionVariant{.rope = std::nullopt, .bias = true, .kv_heads = one_per_column},
                         InFlight{});
  in_flight_scenarios<double>([&](const InFlight& f) { attention_case<double>(grid, s, 0.2, half_llama, f); });
  attention_case<double>(grid, s, 0.2, q_llama, InFlight{});
  attention_case<float>(grid, s, 0.2, half_llama, InFlight{});
  attention_case<float>(grid, s, 0.2, q_llama, InFlight{});
}

void check_mlp(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (const MlpKind kind : {MlpKind::gelu, MlpKind::gelu_erf}) {  // GPT-2's tanh form, BERT's exact GELU
    CAPTURE(name_of(kind));
    in_flight_scenarios<double>([&](const InFlight& f) { mlp_case<double>(grid, shapes_for(q), kind, true, f); });
    in_flight_scenarios<float>([&](const InFlight& f) { mlp_case<float>(grid, shapes_for(q), kind, true, f); });
  }
}

void check_swiglu_mlp(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  // Llama's MLP (no biases), and SwiGLU with biases.
  in_flight_scenarios<double>([&](const InFlight& f) { mlp_case<double>(grid, shapes_for(q), MlpKind::swiglu, false, f); });
  mlp_case<float>(grid, shapes_for(q), MlpKind::swiglu, false, InFlight{});  // (f32's scenarios: check_f32_layers_on)
  mlp_case<double>(grid, shapes_for(q), MlpKind::swiglu, true, InFlight{});
}

}  // namespace optimus::test
