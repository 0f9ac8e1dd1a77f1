// Grid, DistMatrix and SUMMA on the in-process backend: q = 1..4, and dp = 2 x q = 2.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "test_world.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/grid/summa.hpp"
#include "summa_cases.hpp"

namespace {
void on_grids(void (*check)(optimus::Communicator&, int)) {
  for (int q = 1; q <= 4; ++q) {
    CAPTURE(q);
    optimus::test::run_in_process(q * q, [&](optimus::Communicator& w) { check(w, q); });
  }
  optimus::test::run_in_process(8, [&](optimus::Communicator& w) { check(w, 2); });  // dp = 2
}
}  // namespace

TEST_CASE("in-process grid coordinates and communicators") { on_grids(optimus::test::check_grid); }
TEST_CASE("in-process DistMatrix round trip and partition-independent fill") {
  on_grids(optimus::test::check_dist_matrix);
}
TEST_CASE("in-process SUMMA products match Eigen with exact traffic") { on_grids(optimus::test::check_summa); }
TEST_CASE("in-process SUMMA with bf16 operands matches Eigen on the rounded inputs, panels moving in bf16") {
  on_grids(optimus::test::check_summa_bf16);
}
TEST_CASE("in-process SUMMA on saved operands: bf16 copies under bf16 math, the same products") {
  on_grids(optimus::test::check_saved_operands);
}
TEST_CASE("in-process SUMMA AB with a bias and GELU epilogue") { on_grids(optimus::test::check_summa_epilogue); }
TEST_CASE("in-process bad input gives the same error on every rank") { on_grids(optimus::test::check_bad_input); }
TEST_CASE("in-process pipeline grids: pp stages of q x q grids, dp replicas") {
  struct Shape {
    int dp, pp, q;
  };
  for (const Shape s : {Shape{1, 2, 2}, Shape{1, 4, 1}, Shape{2, 3, 1}, Shape{2, 2, 2}, Shape{1, 2, 3}}) {
    CAPTURE(s.dp);
    CAPTURE(s.pp);
    CAPTURE(s.q);
    optimus::test::run_in_process(s.dp * s.pp * s.q * s.q,
                                  [&](optimus::Communicator& w) { optimus::test::check_pipeline_grid(w, s.q, s.pp); });
  }
}

namespace {

// Host staging that counts the bytes copied through it (into receive buffers, or into the staging area).
class CopyCounting final : public optimus::InProcessStaging {
 public:
  optimus::Device device() const override { return optimus::Device::cpu; }
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override { return host_->allocate(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    copied += static_cast<long>(bytes);
    std::memcpy(dst, src, bytes);
  }
  void reduce(void* acc, const void* x, std::size_t count, optimus::DType dtype, optimus::ReduceOp op) override {
    host_->reduce(acc, x, count, dtype, op);
  }
  long copied = 0;

 private:
  std::shared_ptr<optimus::InProcessStaging> host_ = optimus::host_staging();
};

}  // namespace

TEST_CASE("in-process overlapped SUMMA AB multiplies the roots' panels in place: no panel is copied") {
  optimus::test::run_in_process(4, [](optimus::Communicator& w) {
    auto staging = std::make_shared<CopyCounting>();
    optimus::set_in_process_staging(w, staging);
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    optimus::DistMatrix<float> on(grid, 10, 14), off(grid, 10, 14);
    for (bool overlap : {true, false}) {
      // The operands on a handle running SUMMA in the mode (SUMMA runs as its first operand's handle says).
      const optimus::Grid mode = grid.with({.overlap = overlap});
      optimus::DistMatrix<float> a(mode, 10, 6), b(mode, 6, 14);
      a.fill_random(1);
      b.fill_random(2);
      staging->copied = 0;
      optimus::summa_ab(1.0f, a, b, 0.0f, overlap ? on : off);
      // Blocking, each receiver copies the two panels of the step it does not own: A [5, 3] and B [3, 7] floats.
      CHECK(staging->copied == (overlap ? 0 : (5 * 3 + 3 * 7) * 4));
    }
    const auto x = on.local_to_host(), y = off.local_to_host();
    CHECK(std::memcmp(x.data(), y.data(), sizeof(float) * static_cast<std::size_t>(x.size())) == 0);
  });
}
