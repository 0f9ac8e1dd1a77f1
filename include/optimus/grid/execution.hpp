// optimus::Execution: how the work on a grid executes — one value, held by each Grid handle (Grid::with) and read by
// what runs on it: SUMMA, the layers and the model built on that handle. Two handles of one grid (its topology, its
// communicators, its memory) may execute differently, so two models on one grid differ without touching each other,
// and nothing a caller holds changes behind its back: a handle's execution is fixed when the handle is made.
#pragma once

#include <optional>

#include "optimus/core/ops.hpp"
#include "optimus/core/timeline.hpp"

namespace optimus {

struct Execution {
  // SUMMA overlaps the next step's panel broadcasts and the previous step's reduction with the current step's GEMM
  // (true), or runs them blocking, for debugging and measurement. Results are bitwise identical.
  bool overlap = true;
  // How f32 products compute: with bf16 (mixed precision) SUMMA moves its panels in bf16 and every GEMM takes bf16
  // operands with f32 accumulation, and activations saved for backward are kept in bf16, while parameters, gradients,
  // optimizer state and the activations passed on stay f32. Unset: the math of the queue the grid was placed with
  // (Grid::place_on; f32 on the host).
  std::optional<ops::GemmMath> gemm_math = std::nullopt;
  // Opt-in debugging (it copies every checked tensor to the host and agrees over the grid): each layer part's output in
  // forward and input gradient in backward is checked, and the first that holds a NaN or an inf stops the step with the
  // same optimus::Error on every rank of the grid, naming the layer, the tensor, the pass and the first rank (and
  // element) where it appears (optimus/layers/finite_check.hpp).
  bool check_finite = false;
  // Where SUMMA records its GEMMs (compute) and its waits for communication (exposed communication), and the queue's
  // CPU operations by kind; null: nothing is recorded. It must outlive the handles that name it.
  Timeline* timeline = nullptr;
};

}  // namespace optimus
