// Optimizer offload (AxoNN's): AdamW's moments m and v live in page-locked host memory, not on the device, and each
// step streams them through the device chunk by chunk, or updates on the host. The device keeps the parameters and
// their gradients (those Optimus computes with: f32, whose GEMMs may take bf16 operands), so it holds 2 words per
// parameter instead of 4 — docs/offload.md compares that with AxoNN's figures.
//
// One step, after the global norm (computed on the device's gradients as without offload), for chunks c = 0, 1, ...
// of at most `chunk_elements` elements (a parameter is cut into ceil(numel / chunk_elements) chunks), buffer b = c % 2:
//
//   OffloadUpdate::device  (AxoNN's way: the update runs the device's AdamW kernel, as without offload)
//     upload stream    m[c], v[c] host -> device buffers b          (waits until buffer b's chunk c-2 is back)
//     compute stream   adamw_update(w[c], g[c], m_b, v_b)           (waits for the upload)
//     download stream  m_b, v_b -> host m[c], v[c]                  (waits for the update)
//   the upload of chunk c+1 runs while chunk c updates.           per step: 2P words up, 2P words down
//
//   OffloadUpdate::host  (the device's memory holds no optimizer state at all)
//     download stream  w[c], g[c] device -> host buffers b          (waits until buffer b's chunk c-2 went up)
//     host             adamw_update(w_b, g_b, m[c], v[c])            (the CPU kernel, waiting for the download)
//     upload stream    w_b -> device w[c]
//   the download of chunk c+1 runs while the host updates chunk c.  per step: P words up, 2P words down
//
// P is the rank's local parameter count and a word sizeof(T). Every update is element-wise, so cutting it into chunks
// changes no bit: on the simulated device (whose kernels are the CPU's) both ways give the bits of AdamW without
// offload, which the tests assert. On a GPU the device way runs the same kernel as without offload; the host way runs
// the same per-element formula (core/adamw_step.hpp) compiled for the host.
//
// Device memory: two buffers of min(chunk_elements, largest parameter) elements for each of m and v (device way), or
// none (host way; its two buffers for w and g are page-locked host memory). Counted by the grid's tracker as
// optimizer memory, on the device or the host. step() returns with the host moments written (checkpoints read them).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "optimus/core/adamw_step.hpp"
#include "optimus/core/pinned_memory.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus {

enum class OffloadUpdate { device, host };

struct OptimizerOffload {
  OffloadUpdate update = OffloadUpdate::device;
  std::int64_t chunk_elements = std::int64_t{1} << 20;  // the most elements of one parameter moved in one chunk
};

// Bytes copied host to device and device to host.
struct TransferBytes {
  std::uint64_t host_to_device = 0;
  std::uint64_t device_to_host = 0;
};

// The bytes one offloaded step moves, for `parameters` local elements of `word` bytes (the formulas above).
TransferBytes offload_step_transfers(OffloadUpdate update, std::int64_t parameters, std::size_t word);

// The moments of an AdamW whose shards live on `grid`'s device (a grid on the host is refused), and the streamed
// update. Made by AdamW's offloading constructor.
template <class T>
class OffloadedMoments {
 public:
  // Zero moments for `params` (shards on `grid`'s device).
  OffloadedMoments(const Grid& grid, const std::vector<ParameterRef<T>>& params, OptimizerOffload how);
  ~OffloadedMoments();
  OffloadedMoments(const OffloadedMoments&) = delete;
  OffloadedMoments& operator=(const OffloadedMoments&) = delete;

  // Updates every parameter with steps[k] (its weight decay; the other scalars are the step's).
  void update(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps);

  TensorView<T> first_moment(std::size_t k) { return m_.at(k).view(); }
  TensorView<T> second_moment(std::size_t k) { return v_.at(k).view(); }
  const OptimizerOffload& how() const { return how_; }
  // What update() has moved so far (exact).
  TransferBytes transfers() const { return moved_; }

 private:
  struct Chunk {
    std::size_t param;
    std::int64_t offset, count;
  };
  void update_on_device(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps);
  void update_on_host(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps);
  void copy(void* dst, const void* src, std::int64_t count, DeviceStream& stream, bool up);

  Grid grid_;
  OptimizerOffload how_;
  DeviceRuntime* runtime_;
  PinnedHostMemory pinned_;
  std::vector<Tensor<T>> m_, v_;          // [local shape] per parameter, page-locked host memory
  std::vector<Chunk> chunks_;
  std::array<Tensor<T>, 2> buffer_a_, buffer_b_;  // device: m, v; host way: w, g (page-locked)
  std::unique_ptr<DeviceStream> up_, down_;
  std::array<std::unique_ptr<DeviceEvent>, 2> loaded_, updated_, freed_;
  std::unique_ptr<DeviceEvent> start_, done_;
  TransferBytes moved_;
};

extern template class OffloadedMoments<float>;
extern template class OffloadedMoments<double>;

}  // namespace optimus
