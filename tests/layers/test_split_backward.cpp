// The split backward of zero-bubble pipelines (layers/weight_gradients.hpp), layer by layer: a block's
// backward(saved, dy, later) gives bitwise the input gradient of backward(saved, dy), leaves every weight gradient
// untouched until later.run(), and then holds bitwise the same gradients. The 2D block at q = 1, 2 (f64, f32, and f32
// with bf16 GEMMs, whose split linears keep dY in bf16) and the 1D baseline's block at p = 1, 2, 3 (its column- and
// row-parallel linears, attention, MLP and replicated LayerNorms), f64 and f32, dropout on, in-process ranks.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "layer_cases.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/layers/megatron/block.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace {

using optimus::GlobalMatrix;

bool same_bits(const GlobalMatrix& a, const GlobalMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<std::size_t>(a.size())) == 0;
}

template <class T>
std::map<std::string, GlobalMatrix> gradients(optimus::Communicator& holders,
                                              const std::vector<optimus::ParameterRef<T>>& refs) {
  std::map<std::string, GlobalMatrix> out;
  for (const auto& r : refs) out[r.name] = optimus::gather_parameter(holders, r, true, nullptr);
  return out;
}

// block on `local` (where its activations live), its tensors held by `holders`: the plain backward, then the split one
// of a second, identical forward.
template <class T, class Block>
void check_split(Block& block, const optimus::Grid& local, optimus::Communicator& holders) {
  const optimus::test::LayerShapes s = optimus::test::shapes_for(2);
  std::vector<optimus::ParameterRef<T>> refs;
  block.parameters(refs);
  optimus::test::load_random(refs, 900, nullptr);
  const std::int64_t n = s.batch * s.seq;
  const auto x = optimus::DistMatrix<T>::from_global(local, optimus::reference::random_matrix(n, s.hidden, 51));
  const auto dy = optimus::DistMatrix<T>::from_global(local, optimus::reference::random_matrix(n, s.hidden, 52));
  const optimus::Pass pass = optimus::Pass::train(4, 0);
  typename Block::Context whole, split;
  block.forward(x, s.seq, pass, whole);
  block.forward(x, s.seq, pass, split);

  block.zero_grad();
  const GlobalMatrix dx_whole = block.backward(std::move(whole), dy).to_global().template cast<double>();
  const auto expected = gradients<T>(holders, refs);
  block.zero_grad();
  optimus::WeightGradients later;
  const GlobalMatrix dx_split = block.backward(std::move(split), dy, later).to_global().template cast<double>();
  CHECK(same_bits(dx_split, dx_whole));
  for (const auto& [name, g] : gradients<T>(holders, refs)) {
    CAPTURE_BINDING(name);
    CHECK(g.isZero(0.0));  // nothing before B_weight
    CHECK_FALSE(expected.at(name).isZero(0.0));  // (so the comparisons below compare something)
  }
  later.run();
  for (const auto& [name, g] : gradients<T>(holders, refs)) {
    CAPTURE_BINDING(name);
    CHECK(same_bits(g, expected.at(name)));
  }
}

template <class T>
void check_2d(optimus::Communicator& world, int q, optimus::ops::GemmMath math) {
  const optimus::Grid grid = optimus::Grid::create(world, q).with({.gemm_math = math});
  optimus::TransformerBlock2D<T> block(grid, optimus::test::config_for(2, 1, 0.1), 0);
  check_split<T>(block, grid, grid.grid());
}

template <class T>
void check_1d(optimus::Communicator& world) {
  optimus::megatron::Group group(world);
  optimus::megatron::TransformerBlock1D<T> block(group, optimus::test::config_for(2, 1, 0.1), 0);
  check_split<T>(block, group.local(), world);
}

}  // namespace

TEST_CASE("split backward: the 2D block, q = 1 and 2") {
  for (int q : {1, 2}) {
    CAPTURE(q);
    optimus::run_in_process(q * q, [q](optimus::Communicator& world) {
      check_2d<double>(world, q, optimus::ops::GemmMath::f32);
      check_2d<float>(world, q, optimus::ops::GemmMath::f32);
      check_2d<float>(world, q, optimus::ops::GemmMath::bf16);
    });
  }
}

TEST_CASE("split backward: the 1D baseline's block, p = 1, 2 and 3") {
  for (int p : {1, 2, 3}) {
    CAPTURE(p);
    optimus::run_in_process(p, [](optimus::Communicator& world) {
      check_1d<double>(world);
      check_1d<float>(world);
    });
  }
}
