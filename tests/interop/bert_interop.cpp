// The Hugging Face BERT interop against an external writer, reader and forward (tests/interop/bert_check.py: Python's
// safetensors and numpy, the architecture written from transformers' BertForMaskedLM):
//
//   bert_interop DIR BATCH LOSS OUT_DIR   the BERT in DIR (config.json and sharded safetensors, written by Python)
//                                         imported on a 2x2 grid (4 in-process ranks); its masked-LM loss on BATCH
//                                         (four lines: token ids, token types, lengths, targets with -1 where not
//                                         predicted) written to LOSS ("%.9g"); the model exported to OUT_DIR in shards
//                                         of at most 4 KiB (so several, with their index)
#include <cstdio>
#include <fstream>
#include <optimus/optimus.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

// BATCH's four lines of integers.
std::vector<std::vector<int>> read_batch(const std::string& path) {
  std::ifstream in(path);
  OPTIMUS_CHECK(in.good(), "cannot read the batch '", path, "'");
  std::vector<std::vector<int>> rows;
  for (std::string line; std::getline(in, line);) {
    std::istringstream values(line);
    rows.emplace_back();
    for (int v; values >> v;) rows.back().push_back(v);
  }
  OPTIMUS_CHECK(rows.size() == 4, "the batch '", path, "' has ", rows.size(), " lines, not 4");
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    OPTIMUS_CHECK(argc == 5, "usage: bert_interop DIR BATCH LOSS OUT_DIR");
    const std::string dir = argv[1], batch_path = argv[2], loss_path = argv[3], out = argv[4];
    const std::vector<std::vector<int>> batch = read_batch(batch_path);
    optimus::run_in_process(4, [&](optimus::Communicator& world) {
      const optimus::Grid grid = optimus::Grid::create(world, 2);
      const optimus::GptConfig config = optimus::checkpoint::hf_bert_config(dir);
      optimus::Gpt2D<float> model(grid, config);
      optimus::checkpoint::import_hf_bert(dir, model);
      const optimus::EncoderInputs inputs{.token_types = batch[1], .lengths = batch[2]};
      const auto sequences = static_cast<std::int64_t>(batch[2].size());
      const double loss = model.evaluate(batch[0], batch[3], inputs, sequences);
      if (world.rank() == 0) {
        std::ofstream file(loss_path);
        char value[32];
        std::snprintf(value, sizeof value, "%.9g\n", loss);
        file << value;
      }
      optimus::checkpoint::export_hf_bert(out, model, 4096);
      if (world.rank() == 0) {
        std::printf("bert_interop: imported %s (%lld layers, hidden %lld, %lld heads, ffn %lld, vocab %lld, %lld "
                    "token types), masked-LM loss %.9g on %lld sequences, exported to %s\n",
                    dir.c_str(), static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
                    static_cast<long long>(config.heads), static_cast<long long>(config.ffn),
                    static_cast<long long>(config.vocab), static_cast<long long>(config.block.token_types), loss,
                    static_cast<long long>(sequences), out.c_str());
      }
    });
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("bert_interop", e);
  }
}
