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

std::vector<Mesh> Mesh::all_of(int world, int max_stages) {
  OPTIMUS_CHECK(world >= 1 && max_stages >= 1, "Mesh::all_of: a world of ", world, " ranks and at most ", max_stages,
                " stages (each at least 1)");
  std::vector<Mesh> out;
  for (TensorParallel tensor : {TensorParallel::two_d, TensorParallel::one_d}) {
    for (int side = tensor == TensorParallel::two_d ? 1 : 2; side <= world; ++side) {
      const Mesh stage{.tensor = tensor, .side = side};
      const std::int64_t t = stage.tensor_ranks();
      if (t > world) break;
      if (world % t != 0) continue;
      for (int pp = 1; pp <= world / t && pp <= max_stages; ++pp) {
        if ((world / t) % pp != 0) continue;
        out.push_back({.dp = static_cast<int>(world / t / pp), .pp = pp, .tensor = tensor, .side = side});
      }
    }
  }
  return out;
}

}  // namespace optimus
