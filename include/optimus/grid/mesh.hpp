// The parallel dimensions of a job, named (docs/design.md, "Mesh"): data-parallel replicas (dp), pipeline stages (pp)
// and the tensor parallelism of a stage — a q x q grid (2D) or a group of p ranks (the 1D baseline). The one place
// that says which rank is where: world rank r is
//
//   replica r / (pp t),  stage (r / t) % pp,  tensor rank r % t        (t = the stage's tensor ranks: q*q or p)
//
// and on a grid tensor rank k is (i, j) = (k / q, k % q). Grid::create and megatron::Group::pipeline_stage lay their
// communicators out by it, the programs check a world against it (of_world).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace optimus {

// How a stage's ranks split the model's tensors.
enum class TensorParallel { two_d, one_d };
const char* name_of(TensorParallel kind);  // "2D", "1D"

struct Mesh {
  int dp = 1;  // data-parallel replicas
  int pp = 1;  // pipeline stages
  TensorParallel tensor = TensorParallel::two_d;
  int side = 1;  // the grid's q (2D), or the group's p (1D)

  // Where a world rank is.
  struct Coordinates {
    int replica = 0;
    int stage = 0;
    int tensor_rank = 0;  // in its stage: i*q + j on a grid, the group rank in 1D
  };

  // In 64 bits: a product of dimensions a user gave may pass int's range (and is then refused, not wrapped).
  std::int64_t tensor_ranks() const {
    return tensor == TensorParallel::two_d ? std::int64_t{side} * side : std::int64_t{side};
  }
  std::int64_t ranks() const { return std::int64_t{dp} * pp * tensor_ranks(); }
  // Throws optimus::Error unless 0 <= rank < ranks().
  Coordinates of(int rank) const;
  // "dp 2 x pp 2 x q^2 4 = 16 ranks", "dp 1 x pp 2 x p 4 = 8 ranks".
  std::string describe() const;

  // The mesh of a world of `world` ranks whose stages have `pp` stages of `tensor` parallelism on `side`: `dp` as
  // given, or implied (world / (pp * tensor ranks)) where it is not. Throws optimus::Error naming the dimensions and
  // their product unless each is at least 1 and they multiply to the world.
  static Mesh of_world(int world, int pp, TensorParallel tensor, int side, std::optional<int> dp);
  // Every mesh of a world of `world` ranks with at most `max_stages` stages (the planner's space), in the order its
  // ties are reported in: 2D before 1D, the tensor ranks ascending, then the stages (the replicas implied). 1D starts
  // at p = 2 (a group of one rank is the grid of q = 1). Throws optimus::Error unless world, max_stages >= 1.
  static std::vector<Mesh> all_of(int world, int max_stages);
};

}  // namespace optimus
