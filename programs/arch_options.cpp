// The options that name a model's blocks (arch_options.hpp).
#include "optimus/programs/arch_options.hpp"

#include "optimus/core/error.hpp"

namespace optimus::cli {

std::vector<Spec> arch_options() {
  return {choice("arch", {"gpt2", "llama", "bert"},
                 "the blocks: gpt2 (LayerNorm, learned positions, GELU, biases, tied head; default), llama (RMSNorm, "
                 "rotary positions, SwiGLU, grouped-query attention, no biases, untied head) or bert (post-LayerNorm, "
                 "exact GELU, bidirectional attention, token types, a masked-LM head)"),
          integer("kv-heads", 1, 1 << 16, "--arch llama: key/value heads, dividing --heads (default --heads)"),
          // Above 1, as the blocks take it (validate(GptConfig)): a theta of 1 or less gives no rotation.
          real_above("rope-theta", 1, 1e12, "--arch llama: the rotary positions' theta (default 10000)")};
}

BlockConfig arch_of(const Options& o) {
  const std::string arch = o.text("arch", "gpt2");
  for (const char* option : {"kv-heads", "rope-theta"}) {
    OPTIMUS_CHECK(arch == "llama" || !o.has(option), "--", option, " describes --arch llama's blocks, not --arch ",
                  arch, "'s");
  }
  if (arch == "llama") return BlockConfig::llama(o.real("rope-theta", 10000), o.integer("kv-heads", 0));
  return arch == "bert" ? BlockConfig::bert() : BlockConfig{};
}

void check_arch(const Options& o, const BlockConfig& blocks, const std::string& whose) {
  const std::string there = family_name(blocks);
  OPTIMUS_CHECK(!o.has("arch") || o.text("arch", "") == there, "--arch ", o.text("arch", ""), " differs from ", whose,
                " blocks (", there, ")");
}

}  // namespace optimus::cli
