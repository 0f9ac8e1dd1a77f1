// AdamW over a model's local shards, with the global gradient norm counted once per element.
#include "optimus/layers/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus {

OptimizerPlace::OptimizerPlace(const Grid& grid) : local_(grid), norm_(&grid.grid()) {}

OptimizerPlace::OptimizerPlace(const megatron::Group& group) : local_(group.local()), norm_(&group.tp()) {}

template <class T>
void AdamW<T>::use_order(NormOrder order) {
  OPTIMUS_CHECK(order.across != nullptr && order.slot.size() == params_.size(), "AdamW: a pipeline stage's norm order "
                "has ", order.slot.size(), " slots for ", params_.size(), " parameters",
                order.across == nullptr ? " and no pipeline communicator" : "");
  std::vector<bool> taken(static_cast<std::size_t>(std::max(order.slots, 0)), false);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const int s = order.slot[k];
    if (s == -1) continue;
    OPTIMUS_CHECK(s >= 0 && s < order.slots && !taken[static_cast<std::size_t>(s)], "AdamW: parameter '",
                  params_[k].name, "' has norm slot ", s, ", ",
                  s >= 0 && s < order.slots ? "taken by another parameter" : "outside [0, slots)",
                  " (slots: ", order.slots, ")");
    taken[static_cast<std::size_t>(s)] = true;
  }
  order_ = std::move(order);
}

template <class T>
bool AdamW<T>::counted_here(const ParameterRef<T>& p) const {
  return p.layout.kind != Sharding::Kind::replicated || norm_->rank() == 0;
}

template <class T>
AdamW<T>::AdamW(OptimizerPlace place, std::vector<ParameterRef<T>> params, AdamWOptions options)
    : local_(place.local()),
      norm_(&place.norm()),
      params_(std::move(params)),
      config_(options.config),
      offload_slot_(params_.size(), -1),
      norm_scratch_(Shape{ops::sum_squares_scratch()}, local_.tag(MemoryKind::workspace), Init::none),
      host_scratch_(Shape{ops::sum_squares_scratch()}, MemoryTag{}, Init::none) {
  validate(config_);
  if (options.norm_order) use_order(*std::move(options.norm_order));
  const std::optional<OptimizerOffload>& offload = options.offload;
  const MemoryTag host{.tracker = &local_.memory(), .kind = MemoryKind::optimizer, .device = nullptr};
  std::vector<ParameterRef<T>> on_device;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const ParameterRef<T>& p = params_[k];
    const bool in_host_memory = p.value.device() == Device::cpu;
    if (offload && !in_host_memory) {
      offload_slot_[k] = static_cast<int>(offloaded_.size());
      offloaded_.push_back(k);
      on_device.push_back(p);
      m_.emplace_back();
      v_.emplace_back();
      continue;
    }
    const MemoryTag tag = in_host_memory ? host : local_.tag(MemoryKind::optimizer);
    m_.emplace_back(p.value.shape(), tag);
    v_.emplace_back(p.value.shape(), tag);
  }
  if (offload) offload_ = std::make_unique<OffloadedMoments<T>>(local_, on_device, *offload);
}

template <class T>
TensorView<T> AdamW<T>::first_moment(std::size_t k) {
  const int slot = offload_slot_.at(k);
  return slot >= 0 ? offload_->first_moment(static_cast<std::size_t>(slot)) : m_[k].view();
}

template <class T>
TensorView<T> AdamW<T>::second_moment(std::size_t k) {
  const int slot = offload_slot_.at(k);
  return slot >= 0 ? offload_->second_moment(static_cast<std::size_t>(slot)) : v_[k].view();
}

template <class T>
ops::Queue AdamW<T>::queue_of(const ParameterRef<T>& p) const {
  return p.value.device() == Device::cpu ? ops::Queue{} : local_.queue();
}

template <class T>
double AdamW<T>::squares_of(std::size_t k) {
  const ParameterRef<T>& p = params_[k];
  const bool host = p.grad.device() == Device::cpu;
  return ops::sum_squares<T>(p.grad, (host ? host_scratch_ : norm_scratch_).view(), queue_of(p));
}

template <class T>
void AdamW<T>::set_learning_rate(double lr) {
  AdamWConfig next = config_;
  next.lr = lr;
  validate(next);
  config_ = next;
}

namespace {

// The sum over `comm`'s ranks of their `value`s, added in rank order on every rank. A collective's own sum may add
// in an order that depends on the communicator (MPI's algorithms, say), and sums of squares are not always exact: a
// gradient whose squares span more than 53 bits makes the order show in the norm's last bit, and schedules that
// promise the whole model's bits (pipelines) then differ from it.
double sum_in_rank_order(Communicator& comm, double value) {
  std::vector<double> values(static_cast<std::size_t>(comm.size()));
  comm.all_gather(std::span<const double>(&value, 1), std::span<double>(values));
  double sum = 0;
  for (double v : values) sum += v;
  return sum;
}

}  // namespace

template <class T>
std::vector<double> AdamW<T>::stage_squares() {
  if (!order_) {
    double sq = 0;
    for (std::size_t k = 0; k < params_.size(); ++k) {
      if (counted_here(params_[k])) sq += squares_of(k);
    }
    return {sq};
  }
  std::vector<double> slots(static_cast<std::size_t>(order_->slots), 0.0);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (order_->slot[k] < 0 || !counted_here(params_[k])) continue;
    slots[static_cast<std::size_t>(order_->slot[k])] = squares_of(k);
  }
  return slots;
}

template <class T>
double AdamW<T>::step() {
  std::vector<double> slots = stage_squares();
  if (order_) order_->across->all_reduce(slots.data(), slots.data(), slots.size(), DType::f64, ReduceOp::sum);
  return step_from(slots);
}

template <class T>
double AdamW<T>::step_from(const std::vector<double>& slots) {
  const std::size_t expected = order_ ? static_cast<std::size_t>(order_->slots) : 1;
  OPTIMUS_CHECK(slots.size() == expected, "AdamW::step_from: ", slots.size(), " partial sums of squares; the norm order "
                "has ", expected);
  double sq = 0;
  for (double s : slots) sq += s;  // 0 + s0 + s1 + ...: the whole model's order
  const double norm = std::sqrt(sum_in_rank_order(*norm_, sq));
  if (!std::isfinite(norm)) {  // the same on every rank: nothing is updated
    OPTIMUS_CHECK(nonfinite_ == NonFinite::skip, "AdamW step ", t_ + 1, ": the global gradient norm is ", norm,
                  " (a gradient holds a NaN or an inf); parameters and moments are unchanged");
    ++skipped_;
    return norm;
  }
  ++t_;
  const AdamWStep s{.lr = config_.lr,
                    .beta1 = config_.beta1,
                    .beta2 = config_.beta2,
                    .eps = config_.eps,
                    .weight_decay = 0.0,
                    .clip = config_.max_grad_norm > 0 && norm > config_.max_grad_norm ? config_.max_grad_norm / norm
                                                                                      : 1.0,
                    .c1 = 1.0 - std::pow(config_.beta1, t_),
                    .c2 = 1.0 - std::pow(config_.beta2, t_)};
  std::vector<AdamWStep> steps(params_.size(), s);
  for (std::size_t k = 0; k < params_.size(); ++k) {  // matrices decay; biases and gains do not
    steps[k].weight_decay = params_[k].shape.size() == 2 ? config_.weight_decay : 0.0;
  }
  if (offload_) {
    std::vector<ParameterRef<T>> params;
    std::vector<AdamWStep> offloaded_steps;
    for (std::size_t k : offloaded_) {
      params.push_back(params_[k]);
      offloaded_steps.push_back(steps[k]);
    }
    offload_->update(params, offloaded_steps);
  }
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (offload_slot_[k] >= 0) continue;
    const ParameterRef<T>& p = params_[k];
    // The master and its bf16 copy, if it has one, in one pass (weight_copy.hpp).
    const TensorView<bf16> copy = p.compute != nullptr ? p.compute->written_with_master() : TensorView<bf16>();
    adamw_update_with<T>(p.value, p.grad, m_[k].view(), v_[k].view(), steps[k], copy, queue_of(p));
  }
  return norm;
}

template <class T>
void AdamW<T>::set_steps_taken(int t) {
  OPTIMUS_CHECK(t >= 0, "AdamW: steps taken must be >= 0, got ", t);
  t_ = t;
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace optimus
