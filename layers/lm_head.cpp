// LmHead<T, Split>: tied logits and the vocabulary-parallel cross-entropy, its products and sums as the split says.
#include "optimus/layers/lm_head.hpp"

#include "optimus/layers/megatron/lm_head.hpp"

#include <limits>
#include <utility>
#include <vector>

#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "cross_entropy.hpp"

namespace optimus {
namespace {

// Throws (naming the values) unless `targets` are n ids in [0, vocab) or math::kIgnoredTarget (a position not
// predicted), and mean_over >= 1 counts at least the predicted ones.
void check_targets(const std::vector<int>& targets, std::int64_t n, std::int64_t vocab, std::int64_t mean_over) {
  OPTIMUS_CHECK(static_cast<std::int64_t>(targets.size()) == n, "cross-entropy: ", targets.size(), " targets for ", n,
                " tokens");
  std::int64_t predicted = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const int id = targets[static_cast<std::size_t>(t)];
    OPTIMUS_CHECK((id >= 0 && id < vocab) || id == math::kIgnoredTarget, "cross-entropy: target id ", id,
                  " at position ", t, " is outside the vocabulary [0, ", vocab, ") and not ", math::kIgnoredTarget,
                  " (not predicted)");
    predicted += id == math::kIgnoredTarget ? 0 : 1;
  }
  OPTIMUS_CHECK(mean_over >= 1 && mean_over >= predicted, "cross-entropy: a mean over ", mean_over,
                " tokens cannot include all ", predicted, " predicted of this pass");
}

}  // namespace

template <class T, class Split>
LmHead<T, Split>::LmHead(const Place& place, const GptConfig& config) : place_(place), vocab_(config.vocab) {
  if (!config.block.head_transform) return;
  const std::int64_t n = Split::head_bias_size(place, config);
  bias_.emplace(grid(), n, MemoryKind::parameters, "the masked-LM head's bias");
  dbias_.emplace(grid(), n, MemoryKind::gradients, "the masked-LM head's bias");
}

template <class T, class Split>
void LmHead<T, Split>::parameters(std::vector<ParameterRef<T>>& out) {
  if (!bias_) return;
  out.push_back({"head.bias", {vocab_}, Split::head_bias_layout(place_, vocab_, bias_->size()), bias_->local(),
                 dbias_->local()});
}

template <class T, class Split>
void LmHead<T, Split>::zero_grad() {
  if (dbias_) ops::fill<T>(dbias_->local(), T(0), grid().queue());
}

template <class T, class Split>
void LmHead<T, Split>::add_bias(DistMatrix<T>& logits) const {
  if (!bias_) return;
  Tensor<T> row(Shape{1, logits.local_cols()}, grid().tag(MemoryKind::workspace), Init::none);
  bias_->gather_column_block(row.view());
  ops::add_row_broadcast<T>(std::as_const(row).view(), logits.local(), grid().queue());
}

template <class T, class Split>
void LmHead<T, Split>::add_bias_gradient(const SavedActivation<T>& dlogits) {
  if (!dbias_) return;
  Tensor<T> widened;  // dlogits in T where kept in bf16
  Tensor<T> partial(Shape{1, dlogits.cols() / grid().q()}, grid().tag(MemoryKind::workspace), Init::none);
  ops::column_sums<T>(dlogits.values(widened), partial.view(), grid().queue());
  dbias_->add_reduced_column_block(std::as_const(partial).view());
}

template <class T, class Split>
void LmHead<T, Split>::mask_padding(DistMatrix<T>& logits) const {
  const std::int64_t width = logits.local_cols();
  const std::int64_t v0 = Split::vocab_offset(place_, logits.col_offset(), width);
  if (v0 + width <= vocab_) return;  // no padding id in this rank's columns
  if (mask_.numel() != width) {
    std::vector<T> host(static_cast<std::size_t>(width));
    for (std::int64_t c = 0; c < width; ++c) {
      host[static_cast<std::size_t>(c)] = v0 + c < vocab_ ? T(0) : -std::numeric_limits<T>::infinity();
    }
    mask_ = upload(host.data(), Shape{width}, grid().tag(MemoryKind::workspace));
  }
  ops::add_row_broadcast<T>(std::as_const(mask_).view(), logits.local(), grid().queue());
}

template <class T, class Split>
DistMatrix<T> LmHead<T, Split>::logits(const DistMatrix<T>& x, const SummaOperand<T>& w) const {
  DistMatrix<T> out = Split::template logits<T>(place_, x, w, vocab_);
  add_bias(out);
  mask_padding(out);
  return Split::whole_logits(place_, std::move(out));
}

template <class T, class Split>
double LmHead<T, Split>::loss(const SummaOperand<T>& x, const SummaOperand<T>& w, const std::vector<int>& targets,
                              std::int64_t mean_over, bool training, Context& saved) {
  const std::int64_t n = x.rows;
  check_targets(targets, n, vocab_, mean_over);
  DistMatrix<T> probs = Split::logits(place_, x, w, vocab_);
  add_bias(probs);
  const Tensor<int> all_targets = upload(targets.data(), Shape{n}, grid().tag(MemoryKind::workspace));
  // The losses of this rank's tokens, identical on the ranks that own their vocabulary's other slices; under training
  // dlogits = (softmax - onehot) / mean_over, kept as backward's products take them.
  const std::int64_t row_offset = probs.row_offset();
  const std::int64_t v0 = Split::vocab_offset(place_, probs.col_offset(), probs.local_cols());
  const double local_loss =
      detail::vocab_parallel_loss<T>(std::move(probs), all_targets.view(), targets, row_offset, v0, vocab_, mean_over,
                                     training, Split::vocab_owners(place_), saved.dlogits);
  if (training) saved.mark = ContextMark(grid());
  return Split::sum_over_rows(place_, local_loss) / static_cast<double>(mean_over);
}

template <class T, class Split>
double LmHead<T, Split>::forward(const DistMatrix<T>& x, const SummaOperand<T>& w, const std::vector<int>& targets,
                                 std::int64_t mean_over, const Pass& pass, Context& saved) {
  if (pass.training) {  // x kept (cast once under bf16 math) for this product and dw's
    return forward(SavedActivation<T>(x, MemoryKind::activations), w, targets, mean_over, pass, saved);
  }
  saved = Context{};
  return loss(x, w, targets, mean_over, false, saved);
}

template <class T, class Split>
double LmHead<T, Split>::forward(SavedActivation<T> x, const SummaOperand<T>& w, const std::vector<int>& targets,
                                 std::int64_t mean_over, const Pass& pass, Context& saved) {
  saved = Context{};
  if (!pass.training) return loss(x, w, targets, mean_over, false, saved);
  saved.x.emplace(std::move(x));
  return loss(*saved.x, w, targets, mean_over, true, saved);
}

template <class T, class Split>
DistMatrix<T> LmHead<T, Split>::backward(Context saved, const SummaOperand<T>& w, DistMatrix<T>& dw) {
  saved.mark.check(grid(), "cross-entropy");
  DistMatrix<T> dx = Split::input_gradient(place_, *saved.dlogits, w);
  Split::add_weight_gradient(place_, *saved.dlogits, *saved.x, dw);
  add_bias_gradient(*saved.dlogits);
  return dx;
}

template <class T, class Split>
DistMatrix<T> LmHead<T, Split>::backward(Context saved, const SummaOperand<T>& w, DistMatrix<T>& dw,
                                         WeightGradients& later) {
  saved.mark.check(grid(), "cross-entropy");
  DistMatrix<T> dx = Split::input_gradient(place_, *saved.dlogits, w);
  add_bias_gradient(*saved.dlogits);  // now: a small sum, not worth holding for B_weight
  struct Held {
    SavedActivation<T> dlogits, x;
  };
  later.defer(Held{.dlogits = std::move(*saved.dlogits), .x = std::move(*saved.x)},
              [place = place_, &dw](Held& held) { Split::add_weight_gradient(place, held.dlogits, held.x, dw); });
  return dx;
}

template class LmHead<float, Split2D>;
template class LmHead<double, Split2D>;
template class LmHead<float, megatron::Split1D>;
template class LmHead<double, megatron::Split1D>;

}  // namespace optimus
