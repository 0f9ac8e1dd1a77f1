// Optimizer offload (AxoNN's): AdamW's moments m and v live in page-locked host memory, not on the device, and each
// step streams them through the device chunk by chunk, or updates on the host. The device keeps the parameters and
// their gradients (those Optimus computes with: f32, whose GEMMs may take bf16 operands), so it holds 2 words per
// parameter instead of 4 — docs/offload.md compares that with AxoNN's figures.
//
// The moments of all of a rank's parameters are one host array, m and v each [P] (parameter k's elements at its offset
// in the parameter list's order), cut into chunks of `chunk_elements` (the last shorter) that may span parameters, so
// that every chunk moves as one copy and costs the same. One step, after the global norm (computed on the device's
// gradients as without offload), for chunks c = 0, 1, ... in a ring of three buffers, b = c mod 3:
//
//   OffloadUpdate::device  (AxoNN's way: the update runs the device's AdamW kernel, as without offload)
//     upload stream    m[c], v[c] host -> device buffers b            (once chunk c-3 has left buffer b)
//     compute stream   adamw_update(w, g, m_b, v_b), per parameter    (after the upload)
//     download stream  m_b, v_b -> host m[c], v[c]                    (after the update)
//                                                                    per step: 2P words up, 2P words down
//   OffloadUpdate::host  (the device's memory holds no optimizer state at all)
//     download stream  w, g device -> host buffers b, per parameter   (once chunk c-3's weights have gone up)
//     host             adamw_update(w_b, g_b, m[c], v[c])              (the CPU kernel, after the download)
//     upload stream    w_b -> device, per parameter
//                                                                    per step: P words up, 2P words down
//
// With three buffers a chunk's upload, update and download each overlap the others' for neighbouring chunks: the step
// takes about max(update, upload, download) over the chunks (two buffers would serialise the upload of chunk c+2 with
// the download of chunk c). P is the rank's local parameter count and a word sizeof(T). Every update is element-wise,
// so cutting it into chunks changes no bit: on the simulated device (whose kernels are the CPU's) both ways give the
// bits of AdamW without offload, which the tests assert. On a GPU the device way runs the same kernel as without
// offload; the host way runs the same per-element formula (core/adamw_step.hpp) compiled for the host.
//
// Memory: 2P words of host moments; three buffers of chunk_of(how, P) words for each of two arrays, on the device
// (device way: m and v) or in page-locked host memory (host way: w and g). Counted by the grid's tracker as optimizer
// memory, on the device or the host. step() returns with the host moments written (checkpoints read them).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimus/core/adamw_step.hpp"
#include "optimus/core/copy_streams.hpp"
#include "optimus/core/pinned_memory.hpp"
#include "optimus/layers/parameter.hpp"

namespace optimus {

enum class OffloadUpdate { device, host };

struct OptimizerOffload {
  OffloadUpdate update = OffloadUpdate::device;
  std::int64_t chunk_elements = std::int64_t{1} << 20;  // the most elements moved in one chunk (it may span parameters)
};

// The elements one chunk moves for `parameters` local elements: chunk_elements, but no more than a sixteenth of them
// (down to 4096), so that the ring of buffers stays a small part of the state it streams — 6/16 of the moments'
// words where a whole chunk of 1 Mi would have been as large as the state at 3 M parameters.
std::int64_t chunk_of(const OptimizerOffload& how, std::int64_t parameters);

// "device" or "host", else optimus::Error naming the text.
OffloadUpdate parse_offload_update(const std::string& text);
// The way that measured faster on `device` (docs/offload.md, "Which way"), for a program that does not choose.
OffloadUpdate preferred_offload_update(Device device);

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

  TensorView<T> first_moment(std::size_t k) { return moment(m_, k); }
  TensorView<T> second_moment(std::size_t k) { return moment(v_, k); }
  const OptimizerOffload& how() const { return how_; }
  // What update() has moved so far (exact).
  TransferBytes transfers() const { return copies_.moved(); }
  const CopyStreams& copies() const { return copies_; }

 private:
  static constexpr int kBuffers = 3;
  // A parameter's elements inside a chunk: [offset, offset + count) of parameter `param`, at `at` in the chunk.
  struct Piece {
    std::size_t param;
    std::int64_t offset, count, at;
  };
  struct Chunk {
    std::int64_t start, count;  // in the flat moments
    std::vector<Piece> pieces;
  };
  TensorView<T> moment(Tensor<T>& flat, std::size_t k) {
    return TensorView<T>(flat.data() + offsets_.at(k), shapes_.at(k), Device::cpu);
  }
  void update_on_device(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps);
  void update_on_host(const std::vector<ParameterRef<T>>& params, const std::vector<AdamWStep>& steps);
  static std::size_t bytes(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(T); }

  Grid grid_;
  OptimizerOffload how_;
  DeviceRuntime* runtime_;
  PinnedHostMemory pinned_;
  std::vector<Shape> shapes_;
  std::vector<std::int64_t> offsets_;  // parameter k's first element in the flat moments
  Tensor<T> m_, v_;                    // [P] each, page-locked host memory
  std::vector<Chunk> chunks_;
  std::array<Tensor<T>, kBuffers> buffer_a_, buffer_b_;  // device way: m, v on the device; host way: w, g (page-locked)
  CopyStreams copies_;
  std::array<std::unique_ptr<DeviceEvent>, kBuffers> loaded_, updated_, freed_;
  std::unique_ptr<DeviceEvent> start_, done_;
};

extern template class OffloadedMoments<float>;
extern template class OffloadedMoments<double>;

}  // namespace optimus
