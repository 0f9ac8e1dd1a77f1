// The 1D baseline's GPT (Gpt1D) against the reference: initialization, loss and every gradient with 1, 2 and
// 4 contexts in flight, Megatron's all-reduces counted, micro-batches against the whole batch, and AdamW steps with the
// replicated tensors counted once in the gradient norm and kept equal on every rank.
#include "capture_binding.hpp"
#include "megatron_gpt_cases.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "in_flight.hpp"
#include "layer_case_support.hpp"
#include "layer_cases.hpp"
#include "optimus/layers/adamw.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus::test {
namespace {

using reference::Matrix;

template <class T>
reference::Parameters rounded_init(const GptConfig& config) {
  reference::Parameters p = reference::gpt_init(config);
  for (auto& [name, m] : p) m = rounded<T>(m);
  return p;
}

// The 1D GPT of `block`'s blocks against the reference; a model with token types (BERT's) on an encoder's batch (token
// types, padded sequences).
template <class T>
void gpt_1d_contexts(Communicator& world, const BlockConfig& block, const InFlight& f) {
  megatron::Group group(world);
  const LayerShapes s = shapes_for(2);
  GptConfig config = config_for(2, 2, 0.1);
  config.block = block;
  if (block.rope) config.hidden = 48;  // 12 heads of an even size 4 (rotary positions pair a head's columns)
  Gpt1D<T> model(group, config);
  const reference::Parameters p = rounded_init<T>(config);
  for (const auto& [name, m] : model.gather(false)) {  // the shared initialization rule, padding stripped
    CAPTURE_BINDING(name);
    CHECK(m == p.at(name));
  }
  const std::int64_t n = s.batch * s.seq;
  const auto tokens = [&](int c) { return random_tokens(n, config.vocab, 1 + 1000 * static_cast<std::uint64_t>(c)); };
  const auto targets = [&](int c) { return random_tokens(n, config.vocab, 2 + 1000 * static_cast<std::uint64_t>(c)); };
  const auto step = [](int c) { return 3 + static_cast<std::uint64_t>(c); };
  const EncoderInputs inputs = encoder_inputs(s, block.token_types > 0, block);
  const std::vector<ParameterRef<T>> refs = model.parameters();
  std::vector<std::string> names;
  for (const ParameterRef<T>& r : refs) names.push_back(r.name);
  LayerRun<typename Gpt1D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return Matrix::Constant(1, 1, model.forward(tokens(c), targets(c), inputs, s.batch, step(c), saved));
      },
      .backward = [&](int, auto saved) {
        model.backward(std::move(saved));
        return Matrix();
      },
      .expected = [&](int c) {
        reference::GptResult r =
            reference::gpt_forward_backward(config, p, tokens(c), targets(c), inputs, s.batch, step(c));
        return Expected{.output = Matrix::Constant(1, 1, r.loss), .input_grad = Matrix(), .grads = std::move(r.grads)};
      },
  };
  model.zero_grad();
  run_in_flight(f, run, group.memory(), tolerance<T>(ops::GemmMath::f32), names, [&](const std::string& name) {
    return model.gather(true).at(name);
  });
}

// Megatron's communication: all-reduces of [N, h] (embedding, two per block forward, two per block and the head's
// backward) and the cross-entropy's [N] maximum and [2N] sums.
void gpt_1d_traffic(Communicator& world) {
  megatron::Group group(world);
  const LayerShapes s = shapes_for(2);
  const GptConfig config = config_for(2, 2, 0.0);
  Gpt1D<double> model(group, config);
  const std::int64_t n = s.batch * s.seq;
  world.reset_stats();
  typename Gpt1D<double>::Context saved;
  model.forward(random_tokens(n, config.vocab, 5), random_tokens(n, config.vocab, 6), s.batch, 1, saved);
  const CommStats forward = world.stats();
  model.backward(std::move(saved));
  const auto p = static_cast<std::uint64_t>(world.size());
  const auto ring = [&](std::int64_t elements) {  // bytes one rank receives in a ring all-reduce of `elements`
    return 2 * (p - 1) * static_cast<std::uint64_t>(elements) * sizeof(double) / p;
  };
  const std::int64_t activation = n * config.hidden;
  CHECK(forward[CallKind::all_reduce].calls == 1 + 2 * 2 + 2);
  CHECK(forward.bytes_received == (1 + 2 * 2) * ring(activation) + ring(n) + ring(2 * n));
  CHECK(world.stats()[CallKind::all_reduce].calls == (1 + 2 * 2 + 2) + (2 * 2 + 1));
  CHECK(world.stats().bytes_received == (1 + 2 * 2 + 2 * 2 + 1) * ring(activation) + ring(n) + ring(2 * n));
}

// m micro-batches equal the whole batch (f64 within 1e-12); AdamW for 3 steps against the reference's.
void gpt_1d_training(Communicator& world) {
  megatron::Group group(world);
  const LayerShapes s = shapes_for(2);
  const GptConfig config = config_for(2, 2, 0.1);
  const std::int64_t n = s.batch * s.seq;
  const std::vector<int> tokens = random_tokens(n, config.vocab, 11), targets = random_tokens(n, config.vocab, 12);
  const AdamWConfig adam{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                         .max_grad_norm = 1.0};
  // The same model in 1, 2 and 3 micro-batches; AdamW steps the last, whose parameters the others then load.
  Gpt1D<double> one(group, config), two(group, config, pipeline::one_stage(2)), model(group, config, pipeline::one_stage(3));
  AdamW<double> optimizer(group, model.parameters(), {.config = adam});
  reference::Parameters p = reference::gpt_init(config), m, v;
  for (int step = 1; step <= 3; ++step) {
    CAPTURE(step);
    const reference::GptResult r = reference::gpt_forward_backward(config, p, tokens, targets, s.batch,
                                                                   static_cast<std::uint64_t>(step));
    std::map<std::string, Matrix> whole;
    double whole_loss = 0;
    for (std::int64_t micro : {1, 2, 3}) {
      CAPTURE(micro);
      Gpt1D<double>& by = micro == 1 ? one : micro == 2 ? two : model;
      by.zero_grad();
      const double loss = by.train_step(tokens, targets, s.batch, static_cast<std::uint64_t>(step));
      CHECK(std::abs(loss - r.loss) <= 1e-10 * r.loss);
      const std::map<std::string, Matrix> grads = by.gather(true);
      if (micro == 1) {
        whole = grads;
        whole_loss = loss;
        for (const auto& [name, g] : grads) {
          CAPTURE_BINDING(name);
          CHECK(reference::compare_relative(g, r.grads.at(name), 1e-10).ok());
        }
      } else {
        CHECK(std::abs(loss - whole_loss) <= 1e-12 * whole_loss);
        for (const auto& [name, g] : grads) {
          CAPTURE_BINDING(name);
          CHECK(reference::compare_relative(g, whole.at(name), 1e-12).ok());
        }
      }
    }
    const double norm = optimizer.step();  // on the last (3 micro-batch) gradients
    const double ref_norm = reference::adamw_step(adam, step, p, r.grads, m, v);
    CHECK(std::abs(norm - ref_norm) <= 1e-10 * ref_norm);
    const std::map<std::string, GlobalMatrix> updated = model.gather(false);
    one.load_global(updated);
    two.load_global(updated);
  }
  for (const auto& [name, value] : model.gather(false)) {
    CAPTURE_BINDING(name);
    CHECK(reference::compare_relative(value, p.at(name), 1e-10).ok());
  }
  // Replicated tensors took the same update everywhere: every rank's copy is bitwise rank 0's.
  for (const ParameterRef<double>& r : model.parameters()) {
    if (r.layout.kind != Sharding::Kind::replicated) continue;
    CAPTURE(r.name);
    const auto count = static_cast<std::size_t>(r.value.numel());
    std::vector<double> all(count * static_cast<std::size_t>(world.size()));
    world.all_gather(r.value.data(), all.data(), count, DType::f64);
    for (int rank = 1; rank < world.size(); ++rank) {
      CHECK(std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count),
                       all.begin() + static_cast<std::ptrdiff_t>(count) * rank));
    }
  }
}

}  // namespace

void check_gpt_1d(Communicator& world) {
  for (const InFlight& f : in_flight_cases(true)) gpt_1d_contexts<double>(world, BlockConfig{}, f);
  for (const InFlight& f : in_flight_cases(false)) gpt_1d_contexts<float>(world, BlockConfig{}, f);
  // RMSNorm blocks (replicated norms without bias) with GPT-2's other parts, and without linear biases.
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    BlockConfig rms;
    rms.norm = {.kind = NormSpec::Kind::rmsnorm, .eps = 1e-6};
    rms.bias = bias;
    gpt_1d_contexts<double>(world, rms, InFlight{});
    gpt_1d_contexts<float>(world, rms, InFlight{});
  }
  // Llama's blocks: rotary positions, SwiGLU, p key/value heads of 12 (grouped-query attention: one per rank), no
  // biases, an untied head.
  const BlockConfig llama = BlockConfig::llama(500, world.size());
  gpt_1d_contexts<double>(world, llama, InFlight{});
  gpt_1d_contexts<float>(world, llama, InFlight{});
  // BERT's MLP (the exact GELU), and BERT's blocks (post-norm too).
  BlockConfig erf;
  erf.mlp = MlpKind::gelu_erf;
  gpt_1d_contexts<double>(world, erf, InFlight{});
  gpt_1d_contexts<float>(world, erf, InFlight{});
  BlockConfig bert = erf;
  bert.post_norm = true;
  gpt_1d_contexts<double>(world, bert, InFlight{});
  gpt_1d_contexts<float>(world, bert, InFlight{});
  bert.bidirectional = true;
  gpt_1d_contexts<double>(world, bert, InFlight{});
  gpt_1d_contexts<float>(world, bert, InFlight{});
  // BERT's model: token types and the embeddings' norm (replicated), on padded sequences.
  for (const InFlight& f : in_flight_cases(false)) gpt_1d_contexts<double>(world, bert_model_blocks(), f);
  gpt_1d_contexts<float>(world, bert_model_blocks(), InFlight{});
  gpt_1d_traffic(world);
  gpt_1d_training(world);
}

}  // namespace optimus::test
