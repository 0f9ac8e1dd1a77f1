// The mesh (optimus/grid/mesh.hpp): each rank's coordinates by the documented arithmetic, a world checked against the
// dimensions, and the grid's communicators laid out by it.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "test_world.hpp"
#include "optimus/core/error.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/grid/mesh.hpp"

using optimus::Mesh;
using optimus::TensorParallel;

TEST_CASE("a mesh says where each rank is: replica, then stage, then the rank in its stage") {
  const Mesh two_d{.dp = 2, .pp = 3, .tensor = TensorParallel::two_d, .side = 2};  // 24 ranks
  CHECK(two_d.ranks() == 24);
  CHECK(two_d.describe() == "dp 2 x pp 3 x q^2 4 = 24 ranks");
  struct Case {
    int rank, replica, stage, tensor_rank;
  };
  for (const Case c : {Case{0, 0, 0, 0}, Case{3, 0, 0, 3}, Case{4, 0, 1, 0}, Case{11, 0, 2, 3}, Case{12, 1, 0, 0},
                       Case{17, 1, 1, 1}, Case{23, 1, 2, 3}}) {
    CAPTURE(c.rank);
    const Mesh::Coordinates at = two_d.of(c.rank);
    CHECK(at.replica == c.replica);
    CHECK(at.stage == c.stage);
    CHECK(at.tensor_rank == c.tensor_rank);
  }
  const Mesh one_d{.dp = 1, .pp = 2, .tensor = TensorParallel::one_d, .side = 3};
  CHECK(one_d.describe() == "dp 1 x pp 2 x p 3 = 6 ranks");
  CHECK(one_d.of(4).stage == 1);
  CHECK(one_d.of(4).tensor_rank == 1);
  CHECK_THROWS_WITH_AS(one_d.of(6), "Mesh: rank 6 is outside dp 1 x pp 2 x p 3 = 6 ranks", optimus::Error);
}

TEST_CASE("a world is checked against a mesh: data parallelism implied, or given and naming the product") {
  CHECK(Mesh::of_world(16, 2, TensorParallel::two_d, 2, std::nullopt).dp == 2);
  CHECK(Mesh::of_world(16, 2, TensorParallel::two_d, 2, 2).dp == 2);
  CHECK(Mesh::of_world(12, 1, TensorParallel::one_d, 4, std::nullopt).dp == 3);
  CHECK_THROWS_WITH_AS(Mesh::of_world(8, 2, TensorParallel::two_d, 2, 3),
                       "the mesh dp 3 x pp 2 x q^2 4 = 24 ranks does not fit a world of 8 ranks", optimus::Error);
  CHECK_THROWS_WITH_AS(Mesh::of_world(6, 4, TensorParallel::one_d, 2, std::nullopt),
                       "the mesh dp 0 x pp 4 x p 2 = 0 ranks does not fit a world of 6 ranks", optimus::Error);
  CHECK_THROWS_WITH_AS(Mesh::of_world(16, 64, TensorParallel::two_d, 64, 1 << 20),
                       "the mesh dp 1048576 x pp 64 x q^2 4096 = 274877906944 ranks does not fit a world of 16 ranks",
                       optimus::Error);  // not wrapped in int
  CHECK_THROWS_WITH_AS(Mesh::of_world(8, 0, TensorParallel::two_d, 2, 1),
                       "a mesh's dimensions are at least 1: dp 1 x pp 0 x q^2 4 = 0 ranks", optimus::Error);
}

TEST_CASE("every mesh of a world, in the planner's order: 2D before 1D, tensor ranks, then stages") {
  std::vector<std::string> got;
  for (const Mesh& m : Mesh::all_of(8, 4)) {
    CHECK(m.ranks() == 8);
    got.push_back(m.describe());
  }
  // q = 1, 2 (q = 3 does not divide 8); p = 2, 4, 8 (p = 1 is q = 1); stages up to 4 dividing what is left.
  CHECK(got == std::vector<std::string>{"dp 8 x pp 1 x q^2 1 = 8 ranks", "dp 4 x pp 2 x q^2 1 = 8 ranks",
                                        "dp 2 x pp 4 x q^2 1 = 8 ranks", "dp 2 x pp 1 x q^2 4 = 8 ranks",
                                        "dp 1 x pp 2 x q^2 4 = 8 ranks", "dp 4 x pp 1 x p 2 = 8 ranks",
                                        "dp 2 x pp 2 x p 2 = 8 ranks", "dp 1 x pp 4 x p 2 = 8 ranks",
                                        "dp 2 x pp 1 x p 4 = 8 ranks", "dp 1 x pp 2 x p 4 = 8 ranks",
                                        "dp 1 x pp 1 x p 8 = 8 ranks"});
  CHECK(Mesh::all_of(1, 1).size() == 1);  // the one rank: q = 1
  CHECK(Mesh::all_of(9, 1).size() == 4);  // q = 1, 3; p = 3, 9
  CHECK_THROWS_WITH_AS(Mesh::all_of(0, 1), "Mesh::all_of: a world of 0 ranks and at most 1 stages (each at least 1)",
                       optimus::Error);
}

TEST_CASE("a grid's communicators are the mesh's: its replicas, stages and (i, j) as the mesh places them") {
  const Mesh mesh{.dp = 2, .pp = 2, .tensor = TensorParallel::two_d, .side = 2};
  optimus::test::run_in_process(static_cast<int>(mesh.ranks()), [&](optimus::Communicator& world) {
    const optimus::Grid grid = optimus::Grid::create(world, 2, 2);
    const Mesh::Coordinates at = mesh.of(world.rank());
    CHECK(grid.dp() == 2);
    CHECK(grid.dp_index() == at.replica);
    CHECK(grid.stage() == at.stage);
    CHECK(grid.row_index() * 2 + grid.col_index() == at.tensor_rank);
    // The ranks of each communicator, as world ranks, are those the mesh puts there.
    auto members = [&](optimus::Communicator& c) {
      std::vector<double> all(static_cast<std::size_t>(c.size()));
      const double mine = world.rank();
      c.all_gather(&mine, all.data(), 1, optimus::DType::f64);
      return all;
    };
    for (double r : members(grid.pipe())) {
      const Mesh::Coordinates them = mesh.of(static_cast<int>(r));
      CHECK(them.replica == at.replica);
      CHECK(them.tensor_rank == at.tensor_rank);
    }
    for (double r : members(grid.dp_comm())) {
      const Mesh::Coordinates them = mesh.of(static_cast<int>(r));
      CHECK(them.stage == at.stage);
      CHECK(them.tensor_rank == at.tensor_rank);
    }
    for (double r : members(grid.grid())) {
      const Mesh::Coordinates them = mesh.of(static_cast<int>(r));
      CHECK(them.replica == at.replica);
      CHECK(them.stage == at.stage);
    }
  });
}
