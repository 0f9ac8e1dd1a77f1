// The machine a plan is made for (optimus-plan's inputs, docs/planner.md): how many accelerators, how they are
// grouped into nodes, their memory, the links between them, and the rates they achieve. Every rate is per
// accelerator (per rank on a CPU cluster), as the time model (time_model.hpp) uses it:
//   a collective step over a link moves `bytes` in latency + bytes / bandwidth seconds;
//   a GEMM of f flops takes f / gemm_flops seconds; element-wise work of n elements n / element_rate (with a
//   transcendental or random number per element) or n / stream_rate seconds; AdamW on n parameters n / optimizer_rate;
//   a copy between host and device memory of b bytes b / host_link seconds.
// `cores`: how many ranks compute at once. A GPU cluster has one per accelerator; ranks oversubscribed on a CPU
// (this project's CI: 16 ranks on 2 cores) share them, so that a step takes at least the whole job's work divided
// among the cores.
//
// Two ways to fill it: presets from known hardware (h100_cluster: NVLink 4 inside nodes, InfiniBand NDR between
// them; frontera_rtx_cluster: the Optimus paper's machine, docs/paper_claims.md) and the JSON that `optimus-bench
// calibrate` writes on the machine itself (read_calibration), whose rates were measured with one rank per core.
#pragma once

#include <cstdint>
#include <string>

namespace optimus::plan {

struct Link {
  double bandwidth = 0;  // bytes per second per rank, each direction
  double latency = 0;    // seconds per message
};

struct Cluster {
  int gpus = 0;                     // ranks in the job
  int gpus_per_node = 0;            // ranks sharing a node (the fast link)
  std::uint64_t device_memory = 0;  // bytes per rank that the plan may fill (the accelerator's, or the rank's RAM)
  std::uint64_t host_memory = 0;    // bytes of host memory per rank (offload's page-locked memory)
  bool has_device = false;          // accelerators (offload modes apply) or CPU ranks
  Link intra, inter;                // inside a node, between nodes
  double gemm_flops = 0;            // achieved GEMM rate per rank (flop/s)
  double element_rate = 0;          // element-wise work with a transcendental or a random number per element (GELU,
                                    // softmax's exp, dropout's Philox), elements/s per rank
  double stream_rate = 0;           // streaming element-wise work (LayerNorm's passes, adds, biases), elements/s
  double optimizer_rate = 0;        // AdamW's update, parameters/s per rank
  double host_link = 0;             // host <-> device copies per rank (bytes/s); 0 without a device
  double overlap = 0;               // the fraction of 2D's SUMMA traffic hidden behind its GEMMs (0..1)
  int cores = 0;                    // ranks that compute at once (gpus, unless oversubscribed)
  double call_seconds = 0;          // with ranks sharing cores: the machine's seconds per collective call and
                                    // participant (waking and switching threads), Calibration::call_seconds measured
                                    // with the plan's ranks (optimus-bench plan sets it); 0 where every rank has its
                                    // own core, whose calls cost their links' latency. Where it is positive the planner
                                    // runs each layout's step once on in-process ranks to count the calls (run.hpp):
                                    // plan outside any in-process run
  std::string source;               // where the figures come from, printed in the plan's header
};

// NVIDIA H100 SXM nodes of `gpus_per_node`: 80 GB each (`device_memory` usable), NVLink 4 at 450 GB/s per GPU and
// direction, InfiniBand NDR at 50 GB/s per GPU (one 400 Gb/s adapter each), bf16 GEMMs at 600 TFLOP/s achieved
// (of 989 dense), element-wise work at 3.35 TB/s HBM3 over 2-byte elements read and written (~0.8e12 elements/s),
// AdamW at 28 bytes per parameter, PCIe 5 at 50 GB/s to 2 TB of host memory per node.
Cluster h100_cluster(int gpus, int gpus_per_node, std::uint64_t device_memory);

// TACC Frontera's GPU nodes, the Optimus paper's machine (Xu et al. 2021), fp32 training: 4 NVIDIA Quadro RTX 5000
// per node, `gpus_per_node` = 4 (Frontera user guide, "GPU Nodes"). Sourced: 11.2 TFLOP/s fp32 peak per GPU (3072
// CUDA cores x 2 x 1.815 GHz, Cornell Virtual Workshop's RTX 5000 page), 16 GB GDDR6 at 448 GB/s (NVIDIA's data
// sheet), 128 GB of host memory per node, PCIe 3.0 x16 (15.75 GB/s per direction). Assumed, not found in a source:
// 80% of each peak achieved (GEMMs 9.0 TFLOP/s; element-wise work on 4-byte elements read and written 0.8 x 448 /
// 8 = 45e9 per second; AdamW 28 bytes per parameter), 10 GB/s per GPU between GPUs of a node (no NVLink bridge;
// peer copies through the host's root complex), one InfiniBand FDR adapter (56 Gb/s, 6.8 GB/s) per node shared by
// its 4 GPUs: 1.7 GB/s per GPU, latencies 10 us (PCIe) and 5 us (InfiniBand), no overlap of 2D's traffic (the
// paper's SUMMA waits for each broadcast). `device_memory`: what the plan may fill of the 16 GB.
Cluster frontera_rtx_cluster(int gpus, std::uint64_t device_memory);

// The figures `optimus-bench calibrate --json FILE` measured (calibrate.hpp: best with one rank per core), for `gpus`
// ranks on `cores` cores with `memory_per_rank` bytes each. Throws optimus::Error naming the file and the missing or
// non-positive key.
Cluster read_calibration(const std::string& path, int gpus, int cores, std::uint64_t memory_per_rank);

// The link a collective among `members` ranks `stride` apart in rank order runs over while every group like it
// communicates at once (a grid's rows or its columns, the 1D groups, the replicas), and whether it stays inside a node
// (members x stride <= gpus_per_node: the fast link). Across nodes a ring or a pipelined broadcast enters and leaves
// each node once per group, so a node's adapters (`inter`: their bandwidth per rank of the node) carry one stream for
// each group it holds members of: a node holding k members of each of gpus_per_node / k groups gives each stream k
// ranks' share (k = 1 for groups strided by a node or more), at most the fast link's — NCCL's ring bandwidth across
// nodes is the node's adapters', not one GPU's share, when the ring passes through every GPU of the node.
struct GroupLink {
  Link link;
  bool inside = false;
};
GroupLink group_link(const Cluster& cluster, int members, int stride);

// Throws optimus::Error naming the field and its value unless the cluster is usable: gpus, gpus_per_node, cores >= 1,
// memory > 0, every rate and bandwidth > 0 (host_link: with a device), latencies and call_seconds >= 0, overlap in
// [0, 1].
void validate(const Cluster& cluster);

}  // namespace optimus::plan
