// Downstream use of the installed library: C = A*B on a q x q grid (q = sqrt of the world size), checked.
#include <cmath>
#include <cstdio>
#include <optimus/optimus.hpp>

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    const int q = static_cast<int>(std::lround(std::sqrt(ctx.world().size())));
    optimus::Grid grid = optimus::Grid::create(ctx.world(), q);
    const auto a = optimus::reference::random_matrix(6 * q, 4 * q, 1);
    const auto b = optimus::reference::random_matrix(4 * q, 2 * q, 2);
    auto A = optimus::DistMatrix<double>::from_global(grid, a);
    auto B = optimus::DistMatrix<double>::from_global(grid, b);
    const auto cmp = optimus::reference::compare_relative(optimus::summa_ab(A, B).to_global(), a * b, 1e-12);
    if (ctx.world().rank() == 0) std::printf("downstream: q=%d summa_ab rel_err=%.3g %s\n", q, cmp.rel_error, cmp.ok() ? "ok" : "WRONG");
    return cmp.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    return ctx.fail("downstream", e);
  }
}
