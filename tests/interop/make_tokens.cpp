// Writes token files for train_gpt --data tests: make_tokens DIR COUNT. Every file holds a learnable stream of GPT-2
// ids (a repeating phrase of 7 ids above 50000, every 11th token random):
//   train_tokens.bin  COUNT tokens in llm.c's format (256-int header)
//   val_tokens.bin    another COUNT / 4 tokens of the stream, llm.c's format
//   train_raw.bin     train_tokens.bin's tokens as nanoGPT's raw uint16
//   bad_magic.bin     train_tokens.bin with its magic off by one (a damaged header)
//   seventeen.bin     17 tokens, llm.c's format: one sequence of 16 and its target
//   llama_tokens.bin  COUNT tokens of the same kind of stream over Llama 3's 128256 ids (above 65535), llm.c's
//                     version 2 (uint32 ids)
//   small_vocab.bin   COUNT tokens of such a stream over 1000 ids, llm.c's version 1 (a model of --vocab 1000)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

#include "optimus/core/output_file.hpp"

int main(int argc, char** argv) {
  try {
    OPTIMUS_CHECK(argc == 3, "usage: make_tokens DIR COUNT");
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    const std::size_t count = std::stoul(argv[2]);
    const optimus::CounterRng rng(17, 0);
    // n ids of a vocabulary of `vocab`: a phrase of 7 ids near its top, every 11th token random.
    const auto ids = [&]<class Id>(std::size_t n, std::size_t offset, std::uint32_t vocab, Id) {
      std::vector<Id> tokens(n);
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t t = k + offset;
        tokens[k] = t % 11 == 10 ? static_cast<Id>(rng.uniform(t, 0) * vocab)
                                 : static_cast<Id>(vocab - 157 + (t % 7) * 20);
      }
      return tokens;
    };
    const auto stream = [&](std::size_t n, std::size_t offset) { return ids(n, offset, 50257, std::uint16_t{}); };
    const std::vector<std::uint16_t> train = stream(count, 0), valid = stream(count / 4, count);
    const std::vector<std::uint32_t> llama = ids(count, 0, 128256, std::uint32_t{});
    optimus::checkpoint::write_llmc_tokens((dir / "llama_tokens.bin").string(), llama.data(), llama.size());
    const std::vector<std::uint16_t> small = ids(count, 0, 1000, std::uint16_t{});
    optimus::checkpoint::write_llmc_tokens((dir / "small_vocab.bin").string(), small.data(), small.size());
    const auto llmc = [&](const char* name, const std::vector<std::uint16_t>& tokens) {
      optimus::checkpoint::write_llmc_tokens((dir / name).string(), tokens.data(), tokens.size());
    };
    llmc("train_tokens.bin", train);
    llmc("val_tokens.bin", valid);
    llmc("seventeen.bin", std::vector<std::uint16_t>(valid.begin(), valid.begin() + 17));
    optimus::write_file(dir / "train_raw.bin",
                        std::string(reinterpret_cast<const char*>(train.data()), 2 * train.size()));
    llmc("bad_magic.bin", train);
    std::fstream damaged(dir / "bad_magic.bin", std::ios::in | std::ios::out | std::ios::binary);
    std::int32_t magic = 0;
    damaged.read(reinterpret_cast<char*>(&magic), sizeof magic);
    ++magic;
    damaged.seekp(0);
    damaged.write(reinterpret_cast<const char*>(&magic), sizeof magic);
    OPTIMUS_CHECK(damaged.good(), "cannot damage '", (dir / "bad_magic.bin").string(), "'");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_tokens: error: %s\n", e.what());
    return 1;
  }
}
