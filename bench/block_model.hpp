// What the block benchmarks share: the GPT configuration of a stack of blocks, its model FLOPs, and the fp64
// reference stack that checks a run.
#pragma once

#include <cstdint>
#include <utility>

#include "optimus/programs/cli.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/reference/gpt.hpp"
#include "traffic_model.hpp"

namespace optimus::bench {

// The shape from --b --s --h --heads --ffn (defaults: `batch`, 64, 256, 8, 4h; --arch llama: ffn 8h/3 rounded up to
// a multiple of 64) and the widths of the linears of the blocks --arch names (cli::arch_of).
BlockShape block_shape_option(const cli::Options& o, std::int64_t batch);

// `layers` blocks of `shape` built as `block` says, no dropout, a tiny vocabulary (the blocks do not use it), seed 99.
GptConfig block_config(const BlockShape& shape, const BlockConfig& block, std::int64_t layers);

// Forward + backward FLOPs of the blocks (no recomputation): 3x the forward's 2 * (matmul MACs), with
// attention's Q K^T and P V counted in full: 3 * (2N(h w_qkv + h^2 + h w_fc + ffn h) + 4N s h) per block (GPT-2:
// 3 * (2N(4h^2 + 2h ffn) + 4N s h)).
double block_flops(const BlockShape& shape, std::int64_t layers);

// The reference stack (fp64): output and input gradient of the blocks for input x and output gradient dy.
std::pair<reference::Matrix, reference::Matrix> reference_blocks(const BlockShape& shape, const BlockConfig& block,
                                                                 std::int64_t layers, double dropout,
                                                                 const reference::Matrix& x,
                                                                 const reference::Matrix& dy);

}  // namespace optimus::bench
