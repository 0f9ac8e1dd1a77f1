// This machine's rates, measured (optimus-bench calibrate writes them as JSON; train_gpt --plan auto measures them
// itself): a broadcast's and an all-reduce's cost as alpha + beta * bytes (least squares over 4 KiB .. 2 MiB, the
// traffic convention's bytes), a 1024^3 f32 GEMM's rate beside the processor's theoretical one and its kernel, and over 1024^2 elements the rates of GELU (a
// transcendental per element), of an axpby (streaming) and of AdamW's update (parameters per second), each the median
// over `iters` of the maximum over ranks, every rank working at once on one GEMM thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/plan/cluster.hpp"

namespace optimus::plan {

// A link's cost t = alpha + beta * bytes, fitted to measured (bytes, seconds) by least squares, with alpha >= 0 and
// beta > 0. Where the times do not grow measurably with the bytes (copies between in-process ranks on a busy machine:
// noise decides the slope's sign), beta is the largest message's seconds per byte — the bandwidth that message
// achieved, which the link's exceeds (at least a nanosecond's worth) — and alpha 0.
struct LinkFit {
  double alpha = 0, beta = 0;  // seconds, seconds per byte
};
LinkFit fit_link(const std::vector<double>& bytes, const std::vector<double>& seconds);

struct Calibration {
  int ranks = 0;
  std::string backend;
  double broadcast_alpha = 0, broadcast_beta = 0;  // seconds, seconds per byte
  double allreduce_alpha = 0, allreduce_beta = 0;
  double gemm_gflops = 0;                  // per rank
  double clock_hz = 0;                     // the ranks' mean clock, measured right after their GEMMs
  double hardware_gflops = 0;              // per rank: that clock x f32 FLOPs per cycle (optimus/core/processor.hpp)
  std::string processor{}, gemm_kernel{};  // the header lines of optimus/core/blas_kernel.hpp's describe
  double gelu_per_s = 0, axpby_per_s = 0;  // elements per second per rank
  double adamw_per_s = 0;                  // parameters per second per rank
  double call_seconds = 0;  // the world's seconds per collective call and participant, every rank calling at once:
                            // 200 all-reduces of one double in groups of 2, 4, .. ranks (the median over the sizes);
                            // what the calls cost when ranks share cores (Cluster::call_seconds). Not in the JSON,
                            // which is measured with one rank per core
};

// Collective over `world`. With one rank nothing is communicated: the links are left at 0.
Calibration calibrate(Communicator& world, int iters);

// The JSON optimus-bench calibrate writes (and read_calibration reads).
std::string to_json(const Calibration& c);

// A cluster of `gpus` ranks on `cores` cores with `memory_per_rank` bytes each, at the measured rates (the broadcast's
// alpha and beta for both links); throws optimus::Error when a rate is missing (not positive).
Cluster cluster_of(const Calibration& c, int gpus, int cores, std::uint64_t memory_per_rank, const std::string& source);

}  // namespace optimus::plan
