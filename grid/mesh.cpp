// The parallel dimensions of a job (optimus/grid/mesh.hpp).
#include "optimus/grid/mesh.hpp"

#include "optimus/core/error.hpp"

namespace optimus {

const char* name_of(TensorParallel kind) { return kind == TensorParallel::two_d ? "2D" : "1D"; }

Mesh::Coordinates Mesh::of(int rank) const {
  OPTIMUS_CHECK(rank >= 0 && rank < ranks(), "Mesh: rank ", rank, " is outside ", describe());
  const std::int64_t t = tensor_ranks(), r = rank;  // r < ranks(): each coordinate is an int
  return {.replica = static_cast<int>(r / (pp * t)),
          .stage = static_cast<int>((r / t) % pp),
          .tensor_rank = static_cast<int>(r % t)};
}

std::string Mesh::describe() const {
  const bool grid = tensor == TensorParallel::two_d;
  return detail::concat("dp ", dp, " x pp ", pp, grid ? " x q^2 " : " x p ", tensor_ranks(), " = ", ranks(),
                        " ranks");
}

Mesh Mesh::of_world(int world, int pp, TensorParallel tensor, int side, std::optional<int> dp) {
  Mesh mesh{.dp = dp.value_or(1), .pp = pp, .tensor = tensor, .side = side};
  OPTIMUS_CHECK(mesh.dp >= 1 && pp >= 1 && side >= 1, "a mesh's dimensions are at least 1: ", mesh.describe());
  if (!dp) mesh.dp = static_cast<int>(world / (pp * mesh.tensor_ranks()));
  OPTIMUS_CHECK(mesh.dp >= 1 && mesh.ranks() == world, "the mesh ", mesh.describe(), " does not fit a world of ", world,
                " ranks");
  return mesh;
}

}  // namespace optimus
