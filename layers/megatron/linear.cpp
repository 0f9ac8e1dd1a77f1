// Column- and row-parallel linear layers of the 1D baseline.
#include "optimus/layers/megatron/linear.hpp"

#include <utility>

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/grid/mesh.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::megatron {
namespace {

std::int64_t split(std::int64_t n, int p, const std::string& name, const char* what) {
  OPTIMUS_CHECK(n % p == 0, name, ": ", what, " = ", n, " is not divisible by p = ", p);
  return n / p;
}

// The local gradients of both layers, on the group's local grid: dw += x^T dy, db += the column sums of dy (db null:
// no bias). A bf16 x is widened for the GEMM, which rounds it back to the same bf16 values.
template <class T>
void accumulate_grads(const Grid& local, const SavedActivation<T>& x, const DistMatrix<T>& dy, DistMatrix<T>& dw,
                      DistMatrix<T>* db) {
  Tensor<T> widened;
  ops::gemm<T>(Trans::yes, Trans::no, T(1), x.values(widened), dy.local(), T(1), dw.local(), local.queue());
  if (db == nullptr) return;
  Tensor<T> partial(db->local().shape(), local.tag(MemoryKind::workspace), Init::none);
  ops::column_sums<T>(dy.local(), partial.view(), local.queue());
  ops::axpby<T>(T(1), std::as_const(partial).view(), T(1), db->local(), local.queue());
}

// dW, db now (later null), or queued in *later with x and a copy of dy.
template <class T>
void weight_grads(const Grid& local, SavedActivation<T>& x, const DistMatrix<T>& dy, DistMatrix<T>& dw,
                  DistMatrix<T>* db, WeightGradients* later) {
  if (later == nullptr) {
    accumulate_grads(local, x, dy, dw, db);
    return;
  }
  struct Held {
    SavedActivation<T> x;
    DistMatrix<T> dy;
  };
  later->defer(Held{.x = std::move(x), .dy = dy.clone_as(MemoryKind::workspace)},
               [&local, &dw, db](Held& held) { accumulate_grads(local, held.x, held.dy, dw, db); });
}

template <class T>
void zero(const Grid& local, DistMatrix<T>& dw, std::optional<DistMatrix<T>>& db) {
  ops::fill<T>(dw.local(), T(0), local.queue());
  if (db) ops::fill<T>(db->local(), T(0), local.queue());
}

// A linear's bias row [1, n] for its GEMM's epilogue: b itself, or without a bias zeros made in `zeros` (x W + 0).
template <class T>
TensorView<const T> bias_row(const Grid& local, const std::optional<DistMatrix<T>>& b, std::int64_t n,
                             Tensor<T>& zeros) {
  if (b) return std::as_const(*b).local();
  zeros = Tensor<T>(Shape{1, n}, local.tag(MemoryKind::workspace));
  return std::as_const(zeros).view();
}

// The one-rank communicator of this rank, after every rank of `tp` took the GEMM backend's memory (Grid::create would
// only agree on it over that one rank).
std::unique_ptr<Communicator> prepared_self(Communicator& tp) {
  prepare_gemm_together(tp);
  return tp.split(tp.rank(), 0);
}

}  // namespace

Group::Group(Communicator& tp) : tp_(&tp), self_(prepared_self(tp)), local_(Grid::create(*self_, 1)) {}

Group::Group(std::shared_ptr<Communicator> tp, std::shared_ptr<Communicator> pipe, int stages)
    : tp_(tp.get()), owned_tp_(std::move(tp)), self_(std::move(pipe)), local_(Grid::create(*self_, 1, stages)) {}

Group Group::pipeline_stage(Communicator& world, int stages) { return pipeline_stage(world, stages, 1); }

Group Group::pipeline_stage(Communicator& world, int stages, int replicas) {
  OPTIMUS_CHECK(stages >= 1 && replicas >= 1 && world.size() % (stages * replicas) == 0,
                "megatron::Group::pipeline_stage: ", world.size(), " ranks are not ", replicas, " replicas of ", stages,
                " stages of equal groups");
  const Mesh mesh{.dp = replicas, .pp = stages, .tensor = TensorParallel::one_d,
                  .side = world.size() / (stages * replicas)};
  const Mesh::Coordinates at = mesh.of(world.rank());
  const int place = at.replica * stages + at.stage;  // the order Grid::create reads the one-rank grid's ranks in
  const int rank = at.tensor_rank;
  std::shared_ptr<Communicator> tp = world.split(place, rank);
  std::shared_ptr<Communicator> pipe = world.split(rank, place);
  return Group(std::move(tp), std::move(pipe), stages);
}

void Group::place_on(DeviceMemory* device, const ops::Queue& queue) const {
  const Device where = device_of(device);
  OPTIMUS_CHECK(tp_->takes_buffers_on(where), "megatron::Group::place_on: the tensor-parallel communicator (",
                tp_->backend(), ") cannot move ", name_of(where), " buffers");
  local_.place_on(device, queue);
}

template <class T>
void all_reduce_sum(const Group& group, DistMatrix<T>& m) {
  group.tp().all_reduce(m.local().data(), m.local().data(), static_cast<std::size_t>(m.local().numel()), dtype_of<T>,
                        ReduceOp::sum);
}

template <class T>
ColumnParallelLinear<T>::ColumnParallelLinear(const Group& group, const ParameterTags& tags, std::string name,
                                              std::int64_t in, std::int64_t out, FusedColumns fused, bool bias)
    : group_(group),
      name_(std::move(name)),
      in_(in),
      out_(out),
      fused_(fused),
      w_(group.local(), in, split(out, group.size(), name_, "out"), tags.values),
      dw_(group.local(), in, out / group.size(), tags.grads) {
  if (bias) {
    b_.emplace(group.local(), 1, out / group.size(), tags.values);
    db_.emplace(group.local(), 1, out / group.size(), tags.grads);
  }
}

// y = x W + b, or gelu(x W + b) with pre = x W + b when `pre` is given (the GEMM's epilogue).
template <class T>
void ColumnParallelLinear<T>::multiply(const DistMatrix<T>& x, const Pass& pass, Context& saved, DistMatrix<T>& y,
                                       DistMatrix<T>* pre) {
  OPTIMUS_CHECK(x.cols() == in_, name_, ": input has ", x.cols(), " columns, expected ", in_);
  Tensor<T> zeros;
  const ops::Epilogue<T> epilogue = linear_epilogue(bias_row(group_.local(), b_, out_ / group_.size(), zeros), pre);
  ops::gemm<T>(Trans::no, Trans::no, T(1), x.local(), w_.local(), T(0), y.local(), epilogue, group_.local().queue());
  saved = Context{};
  if (pass.training) {
    saved.x.emplace(x, MemoryKind::activations);  // bf16 under mixed precision
    saved.mark = ContextMark(group_.local());
  }
}

template <class T>
void ColumnParallelLinear<T>::multiply(SavedActivation<T> x, const Pass& pass, Context& saved, DistMatrix<T>& y,
                                       DistMatrix<T>* pre) {
  OPTIMUS_CHECK(x.cols() == in_, name_, ": input has ", x.cols(), " columns, expected ", in_);
  Tensor<T> zeros;
  const ops::Epilogue<T> epilogue = linear_epilogue(bias_row(group_.local(), b_, out_ / group_.size(), zeros), pre);
  {
    Tensor<T> widened;  // x in T when kept in bf16
    ops::gemm<T>(Trans::no, Trans::no, T(1), x.values(widened), w_.local(), T(0), y.local(), epilogue,
                 group_.local().queue());
  }
  saved = Context{};
  if (pass.training) {
    saved.x.emplace(std::move(x));
    saved.mark = ContextMark(group_.local());
  }
}

template <class T>
DistMatrix<T> ColumnParallelLinear<T>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  DistMatrix<T> y(group_.local(), x.rows(), out_ / group_.size());
  multiply(std::move(x), pass, saved, y, nullptr);
  return y;
}

template <class T>
ActivationOutput<T> ColumnParallelLinear<T>::forward_gelu(SavedActivation<T> x, const Pass& pass, Context& saved) {
  const std::int64_t rows = x.rows();
  return ActivationOutput<T>::make(group_.local(), rows, out_ / group_.size(), pass,
                             [&](DistMatrix<T>& y, DistMatrix<T>* pre) {
                               multiply(std::move(x), pass, saved, y, pre);
                             });
}

template <class T>
DistMatrix<T> ColumnParallelLinear<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  DistMatrix<T> y(group_.local(), x.rows(), out_ / group_.size());
  multiply(x, pass, saved, y, nullptr);
  return y;
}

template <class T>
ActivationOutput<T> ColumnParallelLinear<T>::forward_gelu(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return ActivationOutput<T>::make(group_.local(), x.rows(), out_ / group_.size(), pass,
                             [&](DistMatrix<T>& y, DistMatrix<T>* pre) { multiply(x, pass, saved, y, pre); });
}

template <class T>
DistMatrix<T> ColumnParallelLinear<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(group_.local(), name_);
  DistMatrix<T> dx(group_.local(), dy.rows(), in_);
  ops::gemm<T>(Trans::no, Trans::yes, T(1), dy.local(), w_.local(), T(0), dx.local(), group_.local().queue());
  // Megatron's asynchronous all-reduce: dx's reduction runs while the weight gradient multiplies (it does not read
  // dx), as the 2D Linear's dX reduction overlaps its dW; blocking with the grid's overlap off. Bitwise the same.
  Request reduce = group_.tp().iall_reduce(dx.local().data(), dx.local().data(),
                                           static_cast<std::size_t>(dx.local().numel()), dtype_of<T>, ReduceOp::sum);
  if (!group_.local().overlap()) reduce.wait();
  weight_grads(group_.local(), *saved.x, dy, dw_, db_ ? &*db_ : nullptr, later);
  reduce.wait();
  return dx;
}

template <class T>
DistMatrix<T> ColumnParallelLinear<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> ColumnParallelLinear<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void ColumnParallelLinear<T>::parameters(std::vector<ParameterRef<T>>& out) {
  Sharding w{.kind = Sharding::Kind::columns, .q = 1, .i = 0, .j = 0, .rows = in_, .cols = out_,
                .fused = fused_, .parts = group_.size(), .part = group_.rank(), .padding_rows = 0, .padding_cols = 0};
  Sharding b = w;
  b.rows = 1;
  out.push_back({name_ + ".weight", {in_, out_}, w, w_.local(), dw_.local()});
  if (b_) out.push_back({name_ + ".bias", {out_}, b, b_->local(), db_->local()});
}

template <class T>
void ColumnParallelLinear<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  out.push_back({.value = &w_.storage(), .grad = &dw_.storage()});
  if (b_) out.push_back({.value = &b_->storage(), .grad = &db_->storage()});
}

template <class T>
void ColumnParallelLinear<T>::zero_grad() {
  zero(group_.local(), dw_, db_);
}

template <class T>
RowParallelLinear<T>::RowParallelLinear(const Group& group, const ParameterTags& tags, std::string name,
                                        std::int64_t in, std::int64_t out, bool bias)
    : group_(group),
      name_(std::move(name)),
      in_(in),
      out_(out),
      w_(group.local(), split(in, group.size(), name_, "in"), out, tags.values),
      dw_(group.local(), in / group.size(), out, tags.grads) {
  if (bias) {
    b_.emplace(group.local(), 1, out, tags.values);
    db_.emplace(group.local(), 1, out, tags.grads);
  }
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::product(TensorView<const T> x, std::int64_t rows) {
  OPTIMUS_CHECK(x.size(1) == in_ / group_.size(), name_, ": input has ", x.size(1), " columns, expected ",
                in_ / group_.size());
  DistMatrix<T> y(group_.local(), rows, out_);
  ops::gemm<T>(Trans::no, Trans::no, T(1), x, w_.local(), T(0), y.local(), group_.local().queue());
  all_reduce_sum(group_, y);
  if (b_) ops::add_row_broadcast<T>(std::as_const(*b_).local(), y.local(), group_.local().queue());
  return y;
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  DistMatrix<T> y = [&] {
    Tensor<T> widened;  // x in T when kept in bf16
    return product(x.values(widened), x.rows());
  }();
  saved = Context{};
  if (pass.training) {
    saved.x.emplace(std::move(x));
    saved.mark = ContextMark(group_.local());
  }
  return y;
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  DistMatrix<T> y = product(x.local(), x.rows());
  saved = Context{};
  if (pass.training) {
    saved.x.emplace(x, MemoryKind::activations);  // bf16 under mixed precision
    saved.mark = ContextMark(group_.local());
  }
  return y;
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(group_.local(), name_);
  DistMatrix<T> dx(group_.local(), dy.rows(), in_ / group_.size());
  ops::gemm<T>(Trans::no, Trans::yes, T(1), dy.local(), w_.local(), T(0), dx.local(), group_.local().queue());
  weight_grads(group_.local(), *saved.x, dy, dw_, db_ ? &*db_ : nullptr, later);
  return dx;
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> RowParallelLinear<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void RowParallelLinear<T>::parameters(std::vector<ParameterRef<T>>& out) {
  const Sharding w{.kind = Sharding::Kind::rows, .q = 1, .i = 0, .j = 0, .rows = in_, .cols = out_,
                      .fused = {}, .parts = group_.size(), .part = group_.rank(), .padding_rows = 0, .padding_cols = 0};
  const Sharding b = Sharding::replicated(1, out_, group_.size(), group_.rank());
  out.push_back({name_ + ".weight", {in_, out_}, w, w_.local(), dw_.local()});
  if (b_) out.push_back({name_ + ".bias", {out_}, b, b_->local(), db_->local()});
}

template <class T>
void RowParallelLinear<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  out.push_back({.value = &w_.storage(), .grad = &dw_.storage()});
  if (b_) out.push_back({.value = &b_->storage(), .grad = &db_->storage()});
}

template <class T>
void RowParallelLinear<T>::zero_grad() {
  zero(group_.local(), dw_, db_);
}

template void all_reduce_sum<float>(const Group&, DistMatrix<float>&);
template void all_reduce_sum<double>(const Group&, DistMatrix<double>&);
template class ColumnParallelLinear<float>;
template class ColumnParallelLinear<double>;
template class RowParallelLinear<float>;
template class RowParallelLinear<double>;

}  // namespace optimus::megatron
