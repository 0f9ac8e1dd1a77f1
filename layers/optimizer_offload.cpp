// Optimizer offload: the moments in page-locked host memory, the update streamed chunk by chunk
// (optimizer_offload.hpp).
#include "optimus/layers/optimizer_offload.hpp"

#include <algorithm>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus {

OffloadUpdate parse_offload_update(const std::string& text) {
  OPTIMUS_CHECK(text == "device" || text == "host", "an offloaded update runs on the 'device' or the 'host', not '",
                text, "'");
  return text == "device" ? OffloadUpdate::device : OffloadUpdate::host;
}

OffloadUpdate preferred_offload_update(Device device) {
  switch (device) {
    case Device::sim:  // measured (docs/offload.md, "Which way"): the device way 3-4% faster at 0.5 GB/s and unthrottled
    case Device::cuda:  // not measured here (no GPU): AxoNN's way, the update at the GPU's memory bandwidth
      return OffloadUpdate::device;
    case Device::cpu: break;
  }
  return OffloadUpdate::host;  // (no device: nothing is offloaded)
}

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

std::int64_t chunk_of(const OptimizerOffload& how, std::int64_t parameters) {
  const std::int64_t sixteenth = std::max<std::int64_t>((parameters + 15) / 16, 4096);
  return std::min({how.chunk_elements, parameters, sixteenth});
}

template <class T>
OffloadedMoments<T>::OffloadedMoments(const Grid& grid, const std::vector<ParameterRef<T>>& params,
                                      OptimizerOffload how)
    : grid_(grid), how_(how), runtime_(&runtime_of(grid)), pinned_(*runtime_), copies_(*runtime_) {
  OPTIMUS_CHECK(how.chunk_elements > 0, "optimizer offload: chunk_elements must be positive, got ",
                how.chunk_elements);
  std::int64_t total = 0;
  for (const ParameterRef<T>& p : params) {
    OPTIMUS_CHECK(p.value.device() != Device::cpu && p.value.is_contiguous() && p.grad.is_contiguous(),
                  "optimizer offload: parameter '", p.name, "' is not a contiguous shard on the grid's device");
    shapes_.push_back(p.value.shape());
    offsets_.push_back(total);
    total += p.value.numel();
  }
  const MemoryTag host{.tracker = &grid.memory(), .kind = MemoryKind::optimizer, .device = &pinned_};
  m_ = Tensor<T>(Shape{total}, host);
  v_ = Tensor<T>(Shape{total}, host);
  // Chunks of the flat moments, each with the pieces of the parameters it covers.
  const std::int64_t elements = chunk_of(how, total);
  std::size_t k = 0;
  for (std::int64_t start = 0; start < total; start += elements) {
    Chunk chunk{.start = start, .count = std::min(elements, total - start), .pieces = {}};
    for (std::int64_t at = 0; at < chunk.count;) {
      while (offsets_[k] + shapes_[k].numel() <= start + at) ++k;  // the parameter holding flat element start + at
      const std::int64_t offset = start + at - offsets_[k];
      const std::int64_t count = std::min(shapes_[k].numel() - offset, chunk.count - at);
      chunk.pieces.push_back({.param = k, .offset = offset, .count = count, .at = at});
      at += count;
    }
    chunks_.push_back(std::move(chunk));
  }
  // The device way's buffers hold m and v on the device; the host way's hold w and g in page-locked host memory.
  const MemoryTag buffers = how.update == OffloadUpdate::device ? grid.tag(MemoryKind::optimizer) : host;
  for (int b = 0; b < kBuffers; ++b) {
    if (elements > 0) {
      buffer_a_[b] = Tensor<T>(Shape{elements}, buffers, Init::none);
      buffer_b_[b] = Tensor<T>(Shape{elements}, buffers, Init::none);
    }
    loaded_[b] = runtime_->create_event();
    updated_[b] = runtime_->create_event();
    freed_[b] = runtime_->create_event();
  }
  start_ = runtime_->create_event();
  done_ = runtime_->create_event();
}

template <class T>
OffloadedMoments<T>::~OffloadedMoments() = default;

template <class T>
void OffloadedMoments<T>::update(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps) {
  OPTIMUS_CHECK(params.size() == shapes_.size() && steps.size() == shapes_.size(), "optimizer offload: ",
                params.size(), " parameters and ", steps.size(), " steps for ", shapes_.size(), " offloaded moments");
  if (how_.update == OffloadUpdate::device) {
    update_on_device(params, steps);
  } else {
    update_on_host(params, steps);
  }
}

// Chunk c: upload (up stream) -> update (compute stream) -> download (down stream), in buffer c mod 3.
template <class T>
void OffloadedMoments<T>::update_on_device(const std::vector<ParameterRef<T>>& params,
                                           const std::vector<AdamWStep>& steps) {
  DeviceStream& compute = *grid_.queue().stream;
  const auto load = [&](std::size_t c) {
    const Chunk& chunk = chunks_[c];
    const std::size_t b = c % kBuffers;
    freed_[b]->wait_on(copies_.up());  // chunk c-3 has left buffer b
    copies_.upload(buffer_a_[b].data(), m_.data() + chunk.start, bytes(chunk.count));
    copies_.upload(buffer_b_[b].data(), v_.data() + chunk.start, bytes(chunk.count));
    loaded_[b]->record(copies_.up());
  };
  if (!chunks_.empty()) load(0);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (c + 1 < chunks_.size()) load(c + 1);  // moves while chunk c updates
    const Chunk& chunk = chunks_[c];
    const std::size_t b = c % kBuffers;
    loaded_[b]->wait_on(compute);
    for (const Piece& piece : chunk.pieces) {
      const ParameterRef<T>& p = params[piece.param];
      const TensorView<T> value = slice(p.value, piece.offset, piece.count);
      const TensorView<const T> grad = slice(TensorView<const T>(p.grad), piece.offset, piece.count);
      const TensorView<T> m = slice(buffer_a_[b].view(), piece.at, piece.count);
      const TensorView<T> v = slice(buffer_b_[b].view(), piece.at, piece.count);
      // The weight's bf16 copy, if it has one, written with its piece (weight_copy.hpp).
      const TensorView<bf16> copy = p.compute != nullptr
                                        ? slice(p.compute->written_with_master(), piece.offset, piece.count)
                                        : TensorView<bf16>();
      adamw_update_with<T>(value, grad, m, v, steps[piece.param], copy, grid_.queue());
    }
    updated_[b]->record(compute);
    updated_[b]->wait_on(copies_.down());
    copies_.download(m_.data() + chunk.start, buffer_a_[b].data(), bytes(chunk.count));
    copies_.download(v_.data() + chunk.start, buffer_b_[b].data(), bytes(chunk.count));
    freed_[b]->record(copies_.down());
  }
  copies_.down().synchronize();  // the host moments are written (and the buffers free) when step() returns
}

// Chunk c: download w, g (down stream) -> the host's update -> upload w (up stream), in buffer c mod 3.
template <class T>
void OffloadedMoments<T>::update_on_host(const std::vector<ParameterRef<T>>& params,
                                         const std::vector<AdamWStep>& steps) {
  DeviceStream& compute = *grid_.queue().stream;
  start_->record(compute);  // the gradients are final
  start_->wait_on(copies_.down());
  const auto fetch = [&](std::size_t c) {
    const std::size_t b = c % kBuffers;
    freed_[b]->wait_on(copies_.down());  // chunk c-3's weights have gone up from buffer b
    for (const Piece& piece : chunks_[c].pieces) {
      const ParameterRef<T>& p = params[piece.param];
      copies_.download(buffer_a_[b].data() + piece.at, p.value.data() + piece.offset, bytes(piece.count));
      copies_.download(buffer_b_[b].data() + piece.at, p.grad.data() + piece.offset, bytes(piece.count));
    }
    loaded_[b]->record(copies_.down());
  };
  if (!chunks_.empty()) fetch(0);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (c + 1 < chunks_.size()) fetch(c + 1);  // moves while the host updates chunk c
    const Chunk& chunk = chunks_[c];
    const std::size_t b = c % kBuffers;
    loaded_[b]->synchronize();
    for (const Piece& piece : chunk.pieces) {
      if (params[piece.param].compute != nullptr) params[piece.param].compute->invalidate();  // the master is uploaded
      const std::int64_t flat = chunk.start + piece.at;
      ops::adamw_update<T>(slice(buffer_a_[b].view(), piece.at, piece.count),
                           slice(TensorView<const T>(buffer_b_[b].view()), piece.at, piece.count),
                           slice(m_.view(), flat, piece.count), slice(v_.view(), flat, piece.count),
                           steps[piece.param], ops::Queue{});
      copies_.upload(params[piece.param].value.data() + piece.offset, buffer_a_[b].data() + piece.at,
                     bytes(piece.count));
    }
    freed_[b]->record(copies_.up());
  }
  done_->record(copies_.up());  // the next forward reads the updated weights
  done_->wait_on(compute);
}

template class OffloadedMoments<float>;
template class OffloadedMoments<double>;

}  // namespace optimus
