// Model spilling: the blocks' home in page-locked host memory, two device slots, the copies ordered by events
// (spill.hpp).
#include "optimus/layers/spill.hpp"

#include <algorithm>
#include <iostream>
#include <type_traits>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus {
namespace {

DeviceRuntime& runtime_of(const Grid& grid, Spill what) {
  OPTIMUS_CHECK(what != Spill::none, "BlockSpill: nothing to spill (Spill::none)");
  OPTIMUS_CHECK(grid.device() != nullptr && grid.queue().stream != nullptr,
                "model spilling moves blocks between a device and the host, but this grid's matrices live on the host "
                "(place the grid on a device: RankDevice::grid, distributed_grid)");
  return grid.queue().stream->runtime();
}

template <class U>
std::size_t bytes_of(const Tensor<U>& t) {
  return t.bytes();
}

// Parks a tensor of a context whose copy is in flight.
template <class U, class Parked>
void park(Parked& parked, Tensor<U>&& t) {
  if constexpr (std::is_same_v<U, bf16>) {
    parked.halves.push_back(std::move(t));
  } else {
    parked.t.push_back(std::move(t));
  }
}

}  // namespace

TransferBytes spill_step_transfers(std::int64_t layers, std::int64_t block_parameters, std::size_t word,
                                   std::int64_t micro_batches, std::int64_t block_activations) {
  const auto block = static_cast<std::uint64_t>(block_parameters) * word;
  const auto l = static_cast<std::uint64_t>(layers), m = static_cast<std::uint64_t>(micro_batches);
  const std::uint64_t values = l + (2 * m - 1) * (l > 2 ? l - 2 : 0), grads_up = (m - 1) * l, grads_down = m * l;
  const std::uint64_t activations = m * (l - 1) * static_cast<std::uint64_t>(block_activations);
  return {.host_to_device = block * (values + grads_up) + activations,
          .device_to_host = block * grads_down + activations};
}

std::int64_t spill_activation_peak(std::int64_t layers, std::int64_t block, std::int64_t transient, std::int64_t tail,
                                   bool activations_spill) {
  if (!activations_spill || layers < 2) return layers * block + std::max(transient, tail);
  return std::max(2 * block + transient, block + tail);
}

template <class T>
BlockSpill<T>::BlockSpill(const Grid& grid, Spill what)
    : grid_(grid),
      what_(what),
      runtime_(&runtime_of(grid, what)),
      home_(*runtime_),
      activation_memory_(*runtime_),
      copies_(*runtime_),
      mark_(runtime_->create_event()) {}

template <class T>
BlockSpill<T>::~BlockSpill() {
  try {
    copies_.synchronize();  // nothing may still read or write the memory released below
  } catch (const std::exception& e) {
    std::cerr << "optimus: ~BlockSpill: " << e.what() << '\n';
  }
}

template <class T>
ParameterTags BlockSpill<T>::home() {
  return {.values = {.tracker = &grid_.memory(), .kind = MemoryKind::parameters, .device = &home_},
          .grads = {.tracker = &grid_.memory(), .kind = MemoryKind::gradients, .device = &home_}};
}

template <class T>
void BlockSpill<T>::attach(std::vector<std::vector<ParameterStorage<T>>> blocks) {
  OPTIMUS_CHECK(storage_.empty(), "BlockSpill::attach: blocks are attached already");
  OPTIMUS_CHECK(!blocks.empty(), "BlockSpill::attach: no blocks to spill");
  storage_ = std::move(blocks);
  const std::vector<ParameterStorage<T>>& first = storage_.front();
  for (std::size_t l = 0; l < storage_.size(); ++l) {
    const std::vector<ParameterStorage<T>>& s = storage_[l];
    OPTIMUS_CHECK(s.size() == first.size(), "BlockSpill::attach: block ", l, " has ", s.size(),
                  " parameters, block 0 ", first.size());
    for (std::size_t k = 0; k < s.size(); ++k) {
      OPTIMUS_CHECK(s[k].value->device_memory() == &home_ && s[k].grad->device_memory() == &home_ &&
                        s[k].value->shape() == first[k].value->shape(),
                    "BlockSpill::attach: block ", l, " is not built at home (BlockSpill::home) or not of block 0's shape");
    }
  }
  const std::size_t n = storage_.size();
  grads_zero_.assign(n, false);
  prefetched_.assign(n, false);
  parked_.resize(n);
  for (std::size_t l = 0; l < n; ++l) {
    stashed_.push_back(runtime_->create_event());
    fetched_.push_back(runtime_->create_event());
  }
  slots_.resize(std::min<std::size_t>(n, 2));
  for (Slot& slot : slots_) {
    slot.uploaded = runtime_->create_event();
    slot.computed = runtime_->create_event();
    slot.drained = runtime_->create_event();
  }
}

template <class T>
void BlockSpill<T>::begin(Direction direction, std::vector<BlockContext<T>>* contexts) {
  OPTIMUS_CHECK(contexts == nullptr || contexts->size() == storage_.size(), "BlockSpill: ", contexts->size(),
                " block contexts for ", storage_.size(), " blocks");
  direction_ = direction;
  contexts_ = contexts;
  prefetched_.assign(storage_.size(), false);
}

// Block l's values (and, in backward, gradients) into its slot, on the up stream.
template <class T>
void BlockSpill<T>::prefetch(std::size_t l) {
  Slot& slot = slot_of(l);
  DeviceStream& up = copies_.up();
  const bool grads = direction_ == Direction::backward;
  slot.computed->wait_on(up);  // the slot's last block has finished computing
  if (grads) slot.drained->wait_on(up);  // ... and its gradients have gone home
  const std::vector<ParameterStorage<T>>& home = storage_[l];
  if (slot.values.empty()) {  // the call's first use of the slot: its device memory
    for (const ParameterStorage<T>& s : home) {
      slot.values.emplace_back(s.value->shape(), grid_.tag(MemoryKind::parameters), Init::none);
      slot.grads.emplace_back(s.grad->shape(), grid_.tag(MemoryKind::gradients), Init::none);
    }
    mark_->record(*grid_.queue().stream);  // memory handed out now is free in the compute stream's order here
    mark_->wait_on(up);
  }
  if (slot.holds != static_cast<std::int64_t>(l)) {
    for (std::size_t k = 0; k < home.size(); ++k) {
      copies_.upload(slot.values[k].data(), home[k].value->data(), bytes_of(slot.values[k]));
    }
    slot.holds = static_cast<std::int64_t>(l);
  }
  if (grads) {
    for (std::size_t k = 0; k < home.size(); ++k) {
      if (grads_zero_[l]) {
        runtime_->fill_async(slot.grads[k].data(), 0, bytes_of(slot.grads[k]), up);
      } else {
        copies_.upload(slot.grads[k].data(), home[k].grad->data(), bytes_of(slot.grads[k]));
      }
    }
  }
  slot.uploaded->record(up);
  prefetched_[l] = true;
}

// Swaps block l's tensors with the slot's: the block's values (and gradients) are the slot's device tensors while it
// is resident, its home tensors otherwise.
template <class T>
void BlockSpill<T>::exchange(std::size_t l, Slot& slot, bool grads) {
  std::vector<ParameterStorage<T>>& block = storage_[l];
  for (std::size_t k = 0; k < block.size(); ++k) {
    std::swap(*block[k].value, slot.values[k]);
    if (grads) std::swap(*block[k].grad, slot.grads[k]);
  }
}

template <class T>
void BlockSpill<T>::enter(std::size_t l) {
  OPTIMUS_CHECK(l < storage_.size(), "BlockSpill::enter: block ", l, " of ", storage_.size());
  Slot& slot = slot_of(l);
  OPTIMUS_CHECK(slot.resident < 0, "BlockSpill::enter: block ", l, "'s slot still holds block ", slot.resident);
  if (!prefetched_[l]) prefetch(l);
  DeviceStream& compute = *grid_.queue().stream;
  slot.uploaded->wait_on(compute);
  const bool backward = direction_ == Direction::backward;
  exchange(l, slot, backward);
  slot.resident = static_cast<std::int64_t>(l);
  slot.with_grads = backward;
  const bool has_next = backward ? l > 0 : l + 1 < storage_.size();
  const std::size_t next = backward ? l - 1 : l + 1;
  if (has_next && slots_.size() > 1) prefetch(next);  // moves while block l computes
  if (backward && contexts_ != nullptr && what_ == Spill::parameters_and_activations) {
    fetch_activations(l);  // already on its way unless block l is the pass's first
    fetched_[l]->wait_on(compute);
    parked_[l] = Parked{};  // the host copies go back to the pool: reused only after the compute stream passes here
    if (has_next) fetch_activations(next);
  }
}

template <class T>
void BlockSpill<T>::leave(std::size_t l) {
  Slot& slot = slot_of(l);
  OPTIMUS_CHECK(slot.resident == static_cast<std::int64_t>(l), "BlockSpill::leave: block ", l, " is not resident");
  DeviceStream& compute = *grid_.queue().stream;
  slot.computed->record(compute);
  if (slot.with_grads) {  // the gradients go home: the block's device tensors to the slot's (home) ones
    slot.computed->wait_on(copies_.down());
    const std::vector<ParameterStorage<T>>& block = storage_[l];
    for (std::size_t k = 0; k < block.size(); ++k) {
      copies_.download(slot.grads[k].data(), block[k].grad->data(), bytes_of(slot.grads[k]));
    }
    slot.drained->record(copies_.down());
    grads_zero_[l] = false;
  }
  exchange(l, slot, slot.with_grads);
  slot.resident = -1;
  if (direction_ == Direction::forward && contexts_ != nullptr && what_ == Spill::parameters_and_activations) {
    if (l + 1 < storage_.size()) stash_activations(l);  // the last block's backward comes next: it stays
    if (l > 0) release_parked(l - 1, *stashed_[l - 1]);
  }
}

template <class T>
void BlockSpill<T>::stash_activations(std::size_t l) {
  DeviceStream& down = copies_.down();
  slot_of(l).computed->wait_on(down);  // block l's forward has written its context
  move_context(l, true);
  stashed_[l]->record(down);
}

// Every tensor of block l's context gets a copy in page-locked host memory (to_host) or in the device's memory, which
// the context then holds; the tensor left behind is parked until its copy is known done.
template <class T>
void BlockSpill<T>::move_context(std::size_t l, bool to_host) {
  for_each_saved_tensor((*contexts_)[l], [&](auto& t) {
    using Element = std::remove_pointer_t<decltype(t.data())>;
    MemoryTag tag = t.tag();
    tag.device = to_host ? &activation_memory_ : grid_.device();
    Tensor<Element> moved(t.shape(), tag, Init::none);
    if (to_host) {
      copies_.download(moved.data(), t.data(), bytes_of(moved));
    } else {
      copies_.upload(moved.data(), t.data(), bytes_of(moved));
    }
    std::swap(t, moved);
    park(parked_[l], std::move(moved));
  });
}

template <class T>
void BlockSpill<T>::release_parked(std::size_t l, const DeviceEvent& copied) {
  if (parked_[l].t.empty() && parked_[l].halves.empty()) return;
  copied.wait_on(*grid_.queue().stream);  // the pool releases device memory in the compute stream's order
  parked_[l] = Parked{};
}

template <class T>
void BlockSpill<T>::fetch_activations(std::size_t l) {
  BlockContext<T>& context = (*contexts_)[l];
  bool on_host = false;
  for_each_saved_tensor(context, [&](auto& t) { on_host = on_host || t.device() == Device::cpu; });
  if (!on_host) return;  // on the device already (the last block's, or fetched ahead)
  DeviceStream& up = copies_.up();
  mark_->record(*grid_.queue().stream);  // device memory handed out now is free in the compute stream's order here
  mark_->wait_on(up);
  move_context(l, false);
  fetched_[l]->record(up);
}

template <class T>
void BlockSpill<T>::gradients_zeroed() {
  grads_zero_.assign(grads_zero_.size(), true);
}

template <class T>
void BlockSpill<T>::finish_now() {
  for (Slot& slot : slots_) {  // after an error: blocks still resident go home (their gradients as they were)
    if (slot.resident >= 0) exchange(static_cast<std::size_t>(slot.resident), slot, slot.with_grads);
    slot.resident = -1;
    slot.holds = -1;
  }
  contexts_ = nullptr;
  copies_.synchronize();  // the gradients are home, the uploads done: the host may now change the blocks
  for (Parked& p : parked_) p = Parked{};  // (only after an error: a pass releases its own)
  for (Slot& slot : slots_) {  // the slots' device memory back to the pool, in the compute stream's order
    slot.values.clear();
    slot.grads.clear();
  }
}

template <class T>
void BlockSpill<T>::finish(bool unwinding) {
  if (!unwinding) {
    finish_now();
    return;
  }
  try {
    finish_now();
  } catch (const std::exception& e) {
    std::cerr << "optimus: BlockSpill: " << e.what() << '\n';
  }
}

template class BlockSpill<float>;
template class BlockSpill<double>;

}  // namespace optimus
