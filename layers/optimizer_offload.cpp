// Optimizer offload: the moments in page-locked host memory, the update streamed chunk by chunk
// (optimizer_offload.hpp).
#include "optimus/layers/optimizer_offload.hpp"

#include <algorithm>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

TransferBytes offload_step_transfers(OffloadUpdate update, std::int64_t parameters, std::size_t word) {
  const auto words = static_cast<std::uint64_t>(parameters) * word;
  return update == OffloadUpdate::device ? TransferBytes{.host_to_device = 2 * words, .device_to_host = 2 * words}
                                         : TransferBytes{.host_to_device = words, .device_to_host = 2 * words};
}

namespace {

// Elements [offset, offset + count) of a contiguous view, as a vector.
template <class T>
TensorView<T> slice(const TensorView<T>& v, std::int64_t offset, std::int64_t count) {
  return TensorView<T>(v.data() + offset, Shape{count}, v.device());
}

DeviceRuntime& runtime_of(const Grid& grid) {
  OPTIMUS_CHECK(grid.device() != nullptr && grid.queue().stream != nullptr,
                "optimizer offload moves AdamW's moments between a device and the host, but this grid's matrices live "
                "on the host (place the grid on a device: RankDevice::grid, distributed_grid)");
  return grid.queue().stream->runtime();
}

}  // namespace

template <class T>
OffloadedMoments<T>::OffloadedMoments(const Grid& grid, const std::vector<ParameterRef<T>>& params,
                                      OptimizerOffload how)
    : grid_(grid), how_(how), runtime_(&runtime_of(grid)), pinned_(*runtime_) {
  OPTIMUS_CHECK(how.chunk_elements > 0, "optimizer offload: chunk_elements must be positive, got ",
                how.chunk_elements);
  const MemoryTag host{.tracker = &grid.memory(), .kind = MemoryKind::optimizer, .device = &pinned_};
  std::int64_t largest = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    m_.emplace_back(params[k].value.shape(), host);
    v_.emplace_back(params[k].value.shape(), host);
    const std::int64_t n = params[k].value.numel();
    for (std::int64_t offset = 0; offset < n; offset += how.chunk_elements) {
      chunks_.push_back({.param = k, .offset = offset, .count = std::min(how.chunk_elements, n - offset)});
      largest = std::max(largest, chunks_.back().count);
    }
  }
  // The device way's buffers hold m and v on the device; the host way's hold w and g in page-locked host memory.
  const MemoryTag buffers = how.update == OffloadUpdate::device ? grid.tag(MemoryKind::optimizer) : host;
  for (int b = 0; b < 2; ++b) {
    buffer_a_[b] = Tensor<T>(Shape{largest}, buffers, Init::none);
    buffer_b_[b] = Tensor<T>(Shape{largest}, buffers, Init::none);
    loaded_[b] = runtime_->create_event();
    updated_[b] = runtime_->create_event();
    freed_[b] = runtime_->create_event();
  }
  up_ = runtime_->create_stream();
  down_ = runtime_->create_stream();
  start_ = runtime_->create_event();
  done_ = runtime_->create_event();
}

template <class T>
OffloadedMoments<T>::~OffloadedMoments() = default;

template <class T>
void OffloadedMoments<T>::copy(void* dst, const void* src, std::int64_t count, DeviceStream& stream, bool up) {
  const auto bytes = static_cast<std::size_t>(count) * sizeof(T);
  runtime_->copy_async(dst, src, bytes, stream);
  (up ? moved_.host_to_device : moved_.device_to_host) += bytes;
}

template <class T>
void OffloadedMoments<T>::update(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps) {
  OPTIMUS_CHECK(params.size() == m_.size() && steps.size() == m_.size(), "optimizer offload: ", params.size(),
                " parameters and ", steps.size(), " steps for ", m_.size(), " offloaded moments");
  if (how_.update == OffloadUpdate::device) {
    update_on_device(params, steps);
  } else {
    update_on_host(params, steps);
  }
}

template <class T>
void OffloadedMoments<T>::update_on_device(const std::vector<ParameterRef<T>>& params,
                                           const std::vector<AdamWStep>& steps) {
  DeviceStream& compute = *grid_.queue().stream;
  const auto load = [&](std::size_t c) {
    const Chunk& k = chunks_[c];
    const std::size_t b = c % 2;
    freed_[b]->wait_on(*up_);  // chunk c-2 has left buffer b
    copy(buffer_a_[b].data(), m_[k.param].data() + k.offset, k.count, *up_, true);
    copy(buffer_b_[b].data(), v_[k.param].data() + k.offset, k.count, *up_, true);
    loaded_[b]->record(*up_);
  };
  if (!chunks_.empty()) load(0);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (c + 1 < chunks_.size()) load(c + 1);  // moves while chunk c updates
    const Chunk& k = chunks_[c];
    const std::size_t b = c % 2;
    const ParameterRef<T>& p = params[k.param];
    loaded_[b]->wait_on(compute);
    ops::adamw_update<T>(slice(p.value, k.offset, k.count), slice(TensorView<const T>(p.grad), k.offset, k.count),
                         slice(buffer_a_[b].view(), 0, k.count), slice(buffer_b_[b].view(), 0, k.count),
                         steps[k.param], grid_.queue());
    updated_[b]->record(compute);
    updated_[b]->wait_on(*down_);
    copy(m_[k.param].data() + k.offset, buffer_a_[b].data(), k.count, *down_, false);
    copy(v_[k.param].data() + k.offset, buffer_b_[b].data(), k.count, *down_, false);
    freed_[b]->record(*down_);
  }
  down_->synchronize();  // the host moments are written (and the buffers free) when step() returns
}

template <class T>
void OffloadedMoments<T>::update_on_host(const std::vector<ParameterRef<T>>& params,
                                         const std::vector<AdamWStep>& steps) {
  DeviceStream& compute = *grid_.queue().stream;
  start_->record(compute);  // the gradients are final
  start_->wait_on(*down_);
  const auto fetch = [&](std::size_t c) {
    const Chunk& k = chunks_[c];
    const std::size_t b = c % 2;
    const ParameterRef<T>& p = params[k.param];
    freed_[b]->wait_on(*down_);  // chunk c-2's weights have gone up from buffer b
    copy(buffer_a_[b].data(), p.value.data() + k.offset, k.count, *down_, false);
    copy(buffer_b_[b].data(), p.grad.data() + k.offset, k.count, *down_, false);
    loaded_[b]->record(*down_);
  };
  if (!chunks_.empty()) fetch(0);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (c + 1 < chunks_.size()) fetch(c + 1);  // moves while the host updates chunk c
    const Chunk& k = chunks_[c];
    const std::size_t b = c % 2;
    loaded_[b]->synchronize();
    ops::adamw_update<T>(slice(buffer_a_[b].view(), 0, k.count), slice(TensorView<const T>(buffer_b_[b].view()), 0, k.count),
                         slice(m_[k.param].view(), k.offset, k.count), slice(v_[k.param].view(), k.offset, k.count),
                         steps[k.param], ops::Queue{});
    copy(params[k.param].value.data() + k.offset, buffer_a_[b].data(), k.count, *up_, true);
    freed_[b]->record(*up_);
  }
  done_->record(*up_);  // the next forward reads the updated weights
  done_->wait_on(compute);
}

template class OffloadedMoments<float>;
template class OffloadedMoments<double>;

}  // namespace optimus
