// Grid, DistMatrix and SUMMA checks shared by the MPI and in-process suites.
#pragma once

#include "optimus/comm/communicator.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::test {

// Grid coordinates and communicators on a world of dp*q*q ranks.
void check_grid(Communicator& world, int q);
// dp x pp x q x q: each rank's replica, stage and (i, j), and every communicator's members (sums of world ranks), the
// pipeline communicator joining (i, j) of every stage; a world of the wrong size refused on every rank.
void check_pipeline_grid(Communicator& world, int q, int pp);
// from_global/to_global round trip, and fill_random bit-identical to a one-rank fill.
void check_dist_matrix(Communicator& world, int q);
// summa_ab/abt/atb against Eigen (f32 and f64, alpha and beta), and exact traffic counters.
void check_summa(Communicator& world, int q);
// Mixed precision (GemmMath::bf16): f32 products with bf16 operands, panels moving as bf16, against Eigen on the
// bf16-rounded inputs; f64 products unchanged.
void check_summa_bf16(Communicator& world, int q);
// SavedActivation: kept in bf16 exactly under bf16 math (counted at 2 bytes), products on it bitwise those on the
// matrix with the same traffic; refused once the grid's math is no longer bf16.
void check_saved_operands(Communicator& world, int q);
// summa_ab with a bias / bias + GELU epilogue equals the product followed by those operations, bitwise.
void check_summa_epilogue(Communicator& world, int q);
// The f32 checks above (products against Eigen with exact traffic, at f32 and bf16 math; saved operands; the
// epilogue) on `grid` as it is placed: on a device grid they run its device path.
void check_summa_f32_on(const Grid& grid);
// Bad input: every rank throws the same optimus::Error naming the values.
void check_bad_input(Communicator& world, int q);

}  // namespace optimus::test
