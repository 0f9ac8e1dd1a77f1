// The options that name a model's blocks (arch_options.hpp).
#include "optimus/programs/arch_options.hpp"

#include "optimus/core/error.hpp"

namespace optimus::cli {

std::vector<Spec> arch_options() {
  return {choice("arch", {"gpt2", "llama"}, "the blocks: gpt2 (LayerNorm, learned positions, GELU, biases, tied head; "
                 "default) or llama (RMSNorm, rotary positions, SwiGLU, grouped-query attention, no biases, untied "
                 "head)"),
          integer("kv-heads", 1, 1 << 16, "--arch llama: key/value heads, dividing --heads (default --heads)"),
          // Above 1, as the blocks take it (validate(GptConfig)): a theta of 1 or less gives no rotation.
          real_above("rope-theta", 1, 1e12, "--arch llama: the rotary positions' theta (default 10000)")};
}

BlockConfig arch_of(const Options& o) {
  const bool llama = o.text("arch", "gpt2") == "llama";
  OPTIMUS_CHECK(llama || (!o.has("kv-heads") && !o.has("rope-theta")), "--kv-heads and --rope-theta describe "
                "--arch llama's blocks");
  return llama ? BlockConfig::llama(o.real("rope-theta", 10000), o.integer("kv-heads", 0)) : BlockConfig{};
}

}  // namespace optimus::cli
