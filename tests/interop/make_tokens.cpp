// Writes token files for train_gpt --data tests: make_tokens LLMC_FILE RAW_FILE COUNT. Both hold a learnable stream
// of GPT-2 ids (a repeating phrase of 7 ids above 50000, every 11th token random): LLMC_FILE in llm.c's format (256-int
// header), RAW_FILE as nanoGPT's raw uint16 (another COUNT / 4 tokens of the same stream, for validation).
#include <cstdint>
#include <cstdio>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  try {
    OPTIMUS_CHECK(argc == 4, "usage: make_tokens LLMC_FILE RAW_FILE COUNT");
    const std::size_t count = std::stoul(argv[3]);
    const optimus::CounterRng rng(17, 0);
    const auto stream = [&](std::size_t n, std::size_t offset) {
      std::vector<std::uint16_t> tokens(n);
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t t = k + offset;
        tokens[k] = t % 11 == 10 ? static_cast<std::uint16_t>(rng.uniform(t, 0) * 50257)
                                 : static_cast<std::uint16_t>(50100 + (t % 7) * 20);
      }
      return tokens;
    };
    const std::vector<std::uint16_t> train = stream(count, 0), valid = stream(count / 4, count);
    optimus::checkpoint::write_llmc_tokens(argv[1], train.data(), train.size());
    std::FILE* raw = std::fopen(argv[2], "wb");
    OPTIMUS_CHECK(raw != nullptr && std::fwrite(valid.data(), 2, valid.size(), raw) == valid.size() &&
                      std::fclose(raw) == 0,
                  "cannot write '", argv[2], "'");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_tokens: error: %s\n", e.what());
    return 1;
  }
}
