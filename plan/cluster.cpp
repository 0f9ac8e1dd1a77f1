// Clusters (cluster.hpp): the H100 and Frontera RTX presets, optimus-bench calibrate's JSON, validation.
#include "optimus/plan/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "optimus/core/error.hpp"
#include "optimus/plan/calibrate.hpp"

namespace optimus::plan {

Cluster h100_cluster(int gpus, int gpus_per_node, std::uint64_t device_memory) {
  return Cluster{.gpus = gpus,
                 .gpus_per_node = gpus_per_node,
                 .device_memory = device_memory,
                 .host_memory = std::uint64_t{2} * 1000 * 1000 * 1000 * 1000 /
                                static_cast<std::uint64_t>(std::max(gpus_per_node, 1)),
                 .has_device = true,
                 .intra = Link{.bandwidth = 450e9, .latency = 5e-6},
                 .inter = Link{.bandwidth = 50e9, .latency = 10e-6},
                 .gemm_flops = 600e12,
                 .element_rate = 3.35e12 / 4,
                 .stream_rate = 3.35e12 / 4,
                 .optimizer_rate = 3.35e12 / 28,
                 .host_link = 50e9,
                 .overlap = 0.5,
                 .cores = gpus,
                 .source =
                     "H100 SXM preset: NVLink 4 450 GB/s per GPU inside nodes, InfiniBand NDR 50 GB/s per GPU "
                     "between them, 600 TFLOP/s bf16 GEMMs achieved, element-wise work at 3.35 TB/s "
                     "(0.84e12 2-byte elements read and written per second; AdamW 0.12e12 parameters/s: 28 bytes "
                     "each), PCIe 5 50 GB/s, half of 2D's SUMMA traffic hidden behind its GEMMs"};
}

Cluster frontera_rtx_cluster(int gpus, std::uint64_t device_memory) {
  const double achieved = 0.8;            // of each peak (assumed)
  const double memory_bandwidth = 448e9;  // GDDR6, bytes/s
  return Cluster{.gpus = gpus,
                 .gpus_per_node = 4,
                 .device_memory = device_memory,
                 .host_memory = std::uint64_t{128} * 1000 * 1000 * 1000 / 4,
                 .has_device = true,
                 .intra = Link{.bandwidth = 10e9, .latency = 10e-6},
                 .inter = Link{.bandwidth = 56e9 / 8 * 64 / 66 / 4, .latency = 5e-6},  // FDR's 64b/66b coding
                 .gemm_flops = achieved * 11.2e12,
                 .element_rate = achieved * memory_bandwidth / 8,
                 .stream_rate = achieved * memory_bandwidth / 8,
                 .optimizer_rate = achieved * memory_bandwidth / 28,
                 .host_link = 10e9,
                 .overlap = 0,
                 .cores = gpus,
                 .source = "Frontera RTX preset (docs/paper_claims.md): 4 Quadro RTX 5000 per node, PCIe 3.0 10 GB/s "
                           "per GPU inside nodes, InfiniBand FDR 1.7 GB/s per GPU between them, 9.0 TFLOP/s fp32 "
                           "GEMMs achieved (80% of 11.2), element-wise work at 80% of 448 GB/s, no overlap"};
}

Cluster read_calibration(const std::string& path, int gpus, int cores, std::uint64_t memory_per_rank) {
  std::ifstream in(path);
  OPTIMUS_CHECK(in.good(), "calibration: cannot read '", path, "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    OPTIMUS_FAIL("calibration: '", path, "' is not JSON: ", e.what());
  }
  const auto number = [&](const char* key) {
    OPTIMUS_CHECK(j.is_object() && j.contains(key) && j[key].is_number(), "calibration: '", path, "' has no number '",
                  key, "'");
    const double v = j[key].get<double>();
    OPTIMUS_CHECK(std::isfinite(v) && v >= 0, "calibration: '", path, "': ", key, " = ", v,
                  " is not a finite, non-negative number");
    return v;
  };
  const Calibration c{.ranks = static_cast<int>(number("ranks")),
                      .backend = "",
                      .broadcast_alpha = number("broadcast_alpha_s"),
                      .broadcast_beta = number("broadcast_beta_s_per_byte"),
                      .allreduce_alpha = number("allreduce_alpha_s"),
                      .allreduce_beta = number("allreduce_beta_s_per_byte"),
                      .gemm_gflops = number("gemm_gflops_per_rank"),
                      .gelu_per_s = number("gelu_elements_per_s"),
                      .axpby_per_s = number("axpby_elements_per_s"),
                      .adamw_per_s = number("adamw_parameters_per_s")};
  return cluster_of(c, gpus, cores, memory_per_rank, "calibration " + path);
}

GroupLink group_link(const Cluster& c, int members, int stride) {
  if (static_cast<std::int64_t>(members) * stride <= c.gpus_per_node) return {.link = c.intra, .inside = true};
  const int k = stride >= c.gpus_per_node ? 1 : std::min(members, c.gpus_per_node / stride);
  return {.link = Link{.bandwidth = std::min(c.intra.bandwidth, c.inter.bandwidth * k), .latency = c.inter.latency},
          .inside = false};
}

void validate(const Cluster& c) {
  OPTIMUS_CHECK(c.gpus >= 1 && c.gpus_per_node >= 1 && c.cores >= 1, "cluster: gpus ", c.gpus, ", gpus per node ",
                c.gpus_per_node, " and cores ", c.cores, " must be at least 1");
  OPTIMUS_CHECK(c.device_memory > 0 && c.host_memory > 0, "cluster: device memory ", c.device_memory,
                " and host memory ", c.host_memory, " bytes must be positive");
  const auto rate = [](double v) { return std::isfinite(v) && v > 0; };
  OPTIMUS_CHECK(rate(c.intra.bandwidth) && rate(c.inter.bandwidth) && rate(c.gemm_flops) && rate(c.element_rate) &&
                    rate(c.stream_rate) && rate(c.optimizer_rate),
                "cluster: bandwidths (", c.intra.bandwidth, ", ", c.inter.bandwidth, " B/s), GEMM rate ", c.gemm_flops,
                " flop/s, element rates ", c.element_rate, " and ", c.stream_rate, " /s and optimizer rate ",
                c.optimizer_rate, " /s must be positive");
  OPTIMUS_CHECK(!c.has_device || rate(c.host_link), "cluster: a device needs a host link, got ", c.host_link, " B/s");
  OPTIMUS_CHECK(
      std::isfinite(c.intra.latency) && c.intra.latency >= 0 && std::isfinite(c.inter.latency) && c.inter.latency >= 0,
      "cluster: latencies ", c.intra.latency, " and ", c.inter.latency, " s must be non-negative");
  OPTIMUS_CHECK(c.overlap >= 0 && c.overlap <= 1, "cluster: overlap ", c.overlap, " is not in [0, 1]");
  OPTIMUS_CHECK(std::isfinite(c.call_seconds) && c.call_seconds >= 0, "cluster: ", c.call_seconds,
                " seconds per collective call and participant must be at least 0");
}

}  // namespace optimus::plan
