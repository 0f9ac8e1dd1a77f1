// The time model of one training step of a layout (layout.hpp) on a cluster (cluster.hpp), per rank, in seconds.
//
// A transformer block on one micro-batch of N = b*s tokens (b: the replica's micro-batch), h, ffn, a heads, on a stage
// of tp ranks (2D: q x q; 1D: t), GEMM rate R, element rate E:
//   GEMMs          forward  G = 2N(4h^2 + 2h ffn) + 4Nsh flops, / tp per rank; backward 2G
//   element-wise   forward, in elements at the streaming rate S and at the transcendental rate E (d = 1 with dropout):
//                           N h (10/S + 2d/E)          LayerNorms, residual adds, the row-parallel biases, residual
//                                                      dropouts
//                           + N (3h + ffn)/S + N ffn/E the column-parallel biases, GELU
//                           + b a s^2 (2/S + (1+d)/E)  softmax, attention dropout
//                  per rank / tp, except that 1D keeps the first term whole on every rank (its activations [N, h] are
//                  replicated); backward twice the forward
//   communication  2D: traffic.hpp's bytes per block (SUMMA panels, bias and LayerNorm collectives), the weights'
//                  share over the grid's columns and the rest over its rows, 24(q-1) + 10(q-1) messages; a fraction
//                  `overlap` hidden behind the GEMMs; a third in forward, two thirds in backward.
//                  1D: four all-reduces of [N, h] (ring: 2(t-1)/t of the bytes, 2(t-1) messages): the forward's two
//                  exposed, the backward's two each overlapped with its weight-gradient GEMM (Megatron's asynchronous
//                  all-reduce, layers/megatron/linear.cpp), only the excess exposed.
//   recomputation  full: one more forward in backward; selective: the attention core's 4Nsh/tp flops and its
//                  b a s^2 (2/S + (1+d)/E)/tp element-wise work once more.
// The embedding and the head (LM head GEMMs 2NhV each way, softmax and cross-entropy N V (2/S + 1/E) forward and
// 2NV/S backward, / tp) are added to the first and the last virtual stage.
//
// A step: the pipeline schedule (pipeline/simulator.hpp) replayed with each virtual stage's forward and backward (split
// schedules: B_input and B_weight a half each) and a message of one activation block per micro-batch over the
// pipeline's link — for pp = 1 simply m (F + B); then the replicas' gradient all-reduce (ring over dp, not overlapped),
// AdamW (the local parameters at the optimizer rate), and offload's copies over the host link (optimizer: after
// the update's chunks, not hidden; spill: hidden behind the blocks' compute up to its length).
// Ranks sharing cores (Cluster::cores < gpus) cannot all compute at once: the step takes at least the busy time of all
// ranks — compute and copying bytes; a latency is waiting, when another rank computes — divided by the cores
// (`work`); the prediction is the larger of the two.
//
// Links (cluster.hpp's group_link): a 2D grid's rows (q consecutive ranks) are inside a node when q <= gpus_per_node,
// its columns (q ranks q apart) when q^2 <= gpus_per_node; a 1D group when t <= gpus_per_node; the replicas (dp ranks
// pp t apart) when the whole job is. A group across nodes gets the share of the node's adapters of as many ranks as
// the node holds of it (a row or a 1D group spanning nodes: all of the node's; a column strided by a node: one rank's).
// The pipeline's neighbours are inside a node when pp*tp <= gpus_per_node; across nodes each rank gets its own share.
#pragma once

#include <cstdint>
#include <vector>

#include "optimus/plan/cluster.hpp"
#include "optimus/plan/layout.hpp"

namespace optimus::plan {

// One block's seconds on one micro-batch, per rank, under each recomputation policy (indexed by Recompute).
struct BlockSeconds {
  double forward = 0;
  double backward[3] = {0, 0, 0};  // none, selective, full
};

struct Traffic {
  std::uint64_t intra = 0, inter = 0;  // bytes received per rank per step over each link
  std::uint64_t host = 0;              // bytes copied between host and device per rank per step
};

struct StepPrediction {
  double seconds = 0;      // the prediction: max(critical path, work)
  double critical = 0;     // pipeline + data_parallel + optimizer + offload
  double pipeline = 0;     // forward and backward of all micro-batches, bubble included
  double bubble = 0;       // the pipeline's idle fraction
  double tensor_comm = 0;  // exposed tensor-parallel communication inside `pipeline` (per rank, summed)
  double data_parallel = 0;
  double optimizer = 0;
  double offload = 0;  // exposed copies
  double work = 0;     // busy seconds of all ranks / cores, and the collective calls' cost (`calls`)
  double calls = 0;    // with ranks sharing cores: Cluster::call_seconds x the calls' participants (the planner counts
                       // them, plan/run.hpp); 0 otherwise
  Traffic traffic;
};

BlockSeconds block_seconds(const Layout& layout, const Workload& workload, const Cluster& cluster);

// The step (the layout's recompute holds one policy per block). `call_participants`: the step's collective calls, each
// counted once per participant, over all ranks (plan/run.hpp's count_call_participants), charged at
// cluster.call_seconds; 0 where the cluster's call_seconds is 0.
StepPrediction predict_step(const Layout& layout, const Workload& workload, const Cluster& cluster,
                            double call_participants);

}  // namespace optimus::plan
