// The Hugging Face Llama interop against an external writer, reader and forward (tests/interop/llama_check.py:
// Python's safetensors and numpy, the architecture written from transformers' LlamaForCausalLM):
//
//   llama_interop DIR LOGITS OUT_DIR   the Llama in DIR (config.json and sharded safetensors, written by Python)
//                                      imported on a 2x2 grid (4 in-process ranks); its logits [n, vocab] for the
//                                      tokens (7 k + 1) mod vocab, k < n = max_position_embeddings, written to LOGITS
//                                      ("%.9g" per value, one row per line); the model exported to OUT_DIR in shards
//                                      of at most 4 KiB (so several, with their index)
#include <cstdio>
#include <fstream>
#include <optimus/optimus.hpp>
#include <string>

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    OPTIMUS_CHECK(argc == 4, "usage: llama_interop DIR LOGITS OUT_DIR");
    const std::string dir = argv[1], logits_path = argv[2], out = argv[3];
    optimus::run_in_process(4, [&](optimus::Communicator& world) {
      const optimus::Grid grid = optimus::Grid::create(world, 2);
      const optimus::GptConfig config = optimus::checkpoint::hf_llama_config(dir);
      optimus::Gpt2D<float> model(grid, config);
      optimus::checkpoint::import_hf_llama(dir, model);
      const std::int64_t n = config.max_seq;
      std::vector<int> tokens(static_cast<std::size_t>(2 * n));  // two copies: the grid's 2 rows of sequences
      for (std::size_t k = 0; k < tokens.size(); ++k) {
        tokens[k] = static_cast<int>((7 * (k % static_cast<std::size_t>(n)) + 1) % static_cast<std::size_t>(config.vocab));
      }
      const optimus::GlobalMatrix logits = model.logits(tokens, 2)->to_global().cast<double>();
      if (world.rank() == 0) {
        std::ofstream file(logits_path);
        char value[32];
        for (std::int64_t r = 0; r < n; ++r) {
          for (std::int64_t c = 0; c < config.vocab; ++c) {
            std::snprintf(value, sizeof value, c == 0 ? "%.9g" : " %.9g", logits(r, c));
            file << value;
          }
          file << '\n';
        }
      }
      optimus::checkpoint::export_hf_llama(out, model, 4096, config.max_seq);
      if (world.rank() == 0) {
        std::printf("llama_interop: imported %s (%lld layers, hidden %lld, %lld heads, %lld key/value, ffn %lld, "
                    "vocab %lld), logits of %lld tokens written, exported to %s\n",
                    dir.c_str(), static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
                    static_cast<long long>(config.heads), static_cast<long long>(config.kv_heads()),
                    static_cast<long long>(config.ffn), static_cast<long long>(config.vocab),
                    static_cast<long long>(n), out.c_str());
      }
    });
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("llama_interop", e);
  }
}
