// llm.c's checkpoint layout: the tensor order, the [out, in] transposes, fp32 and bf16.
#include "optimus/checkpoint/llmc_gpt2.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "checkpoint/model_tensors.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"

namespace optimus::checkpoint {

namespace {

constexpr std::int32_t magic = 20240326;
constexpr std::size_t header_bytes = 256 * sizeof(std::int32_t);

struct Header {
  int version = 0;
  GptConfig config;
  std::int64_t padded_vocab = 0;
};

// One llm.c tensor: the Optimus name of its layer-`l` slice, and the slice's llm.c shape [rows, cols] (vectors: 1 x n).
struct Slice {
  std::string name;
  std::int64_t rows, cols;
  bool transposed;  // an [out, in] weight: Optimus holds its transpose
};

// The file's tensors in llm.c's order, each as its per-layer slices.
std::vector<Slice> layout(const GptConfig& c, std::int64_t padded_vocab) {
  const std::int64_t h = c.hidden, f = c.ffn;
  std::vector<Slice> out = {{"wte", padded_vocab, h, false}, {"wpe", c.max_seq, h, false}};
  const auto per_layer = [&](const std::string& part, std::int64_t rows, std::int64_t cols, bool transposed) {
    for (std::int64_t l = 0; l < c.layers; ++l) out.push_back({"h." + std::to_string(l) + "." + part, rows, cols, transposed});
  };
  per_layer("ln_1.weight", 1, h, false);
  per_layer("ln_1.bias", 1, h, false);
  per_layer("attn.c_attn.weight", 3 * h, h, true);
  per_layer("attn.c_attn.bias", 1, 3 * h, false);
  per_layer("attn.c_proj.weight", h, h, true);
  per_layer("attn.c_proj.bias", 1, h, false);
  per_layer("ln_2.weight", 1, h, false);
  per_layer("ln_2.bias", 1, h, false);
  per_layer("mlp.c_fc.weight", f, h, true);
  per_layer("mlp.c_fc.bias", 1, f, false);
  per_layer("mlp.c_proj.weight", h, f, true);
  per_layer("mlp.c_proj.bias", 1, h, false);
  out.push_back({"ln_f.weight", 1, h, false});
  out.push_back({"ln_f.bias", 1, h, false});
  return out;
}

Header read_header(const std::string& path) {
  check_regular_input(path, "llm.c checkpoint");
  std::ifstream in(path, std::ios::binary);
  OPTIMUS_CHECK(in.good(), "cannot open llm.c checkpoint '", path, "'");
  std::int32_t h[256] = {};
  in.read(reinterpret_cast<char*>(h), sizeof h);
  OPTIMUS_CHECK(in.good(), "'", path, "' is not an llm.c checkpoint: shorter than its 1024-byte header");
  OPTIMUS_CHECK(h[0] == magic, "'", path, "' is not an llm.c checkpoint: magic ", h[0], ", not ", magic);
  OPTIMUS_CHECK(h[1] == 3 || h[1] == 5, "'", path, "': llm.c checkpoint version ", h[1], " (3, fp32, and 5, bf16, are read)");
  Header out{.version = h[1],
             .config = GptConfig{.vocab = h[3], .padded_vocab = 0, .max_seq = h[2], .layers = h[4], .hidden = h[6],
                                 .heads = h[5], .ffn = 4 * static_cast<std::int64_t>(h[6]), .dropout = 0.0, .seed = 0,
                                 .block = {}},
             .padded_vocab = h[7]};
  // Bounds that keep every size below in 64 bits (GPT-2 XL: 48 layers, h 1600, vocab 50257, context 1024).
  OPTIMUS_CHECK(h[2] > 0 && h[2] <= (1 << 24) && h[3] > 0 && h[3] <= (1 << 24) && h[4] >= 0 && h[4] <= 4096 &&
                    h[5] > 0 && h[6] > 0 && h[6] <= 65536 && h[7] >= h[3] && h[7] <= (1 << 24),
                "'", path,
                "': an llm.c header with impossible sizes (max_seq ", h[2], ", vocab ", h[3], ", layers ", h[4],
                ", heads ", h[5], ", channels ", h[6], ", padded vocab ", h[7], ")");
  std::uint64_t elements = 0;
  for (const Slice& s : layout(out.config, out.padded_vocab)) elements += static_cast<std::uint64_t>(s.rows * s.cols);
  const std::uint64_t expected = header_bytes + elements * (out.version == 3 ? 4 : 2);
  const auto actual = static_cast<std::uint64_t>(std::filesystem::file_size(path));
  OPTIMUS_CHECK(actual == expected, "'", path, "': an llm.c checkpoint of this shape has ", expected, " bytes, the file ",
                actual, " (truncated?)");
  return out;
}

}  // namespace

bool is_llmc_checkpoint(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;  // (a FIFO would block the read)
  std::ifstream in(path, std::ios::binary);
  std::int32_t first = 0;
  in.read(reinterpret_cast<char*>(&first), sizeof first);
  return in.good() && first == magic;
}

GptConfig llmc_config(const std::string& path) { return read_header(path).config; }

namespace {

template <class T>
void read_llmc_tensors(const std::string& path, const detail::ModelTensors<T>& model) {
  all_or_throw(model.everyone, [&] {
    const Header header = read_header(path);
    const GptConfig &there = header.config, &here = *model.config;
    OPTIMUS_CHECK(there.vocab == here.vocab && there.max_seq == here.max_seq && there.layers == here.layers &&
                      there.hidden == here.hidden && there.ffn == here.ffn && there.heads == here.heads,
                  "'", path, "' holds a GPT-2 of vocab ", there.vocab, ", context ", there.max_seq, ", ", there.layers,
                  " layers, hidden ", there.hidden, "; the model has ", here.vocab, ", ", here.max_seq, ", ",
                  here.layers, ", ", here.hidden, " (heads ", there.heads, " there, ", here.heads, " here; ffn ",
                  here.ffn, ", llm.c's is 4h)");
    std::map<std::string, ParameterRef<T>> params;  // what this rank holds (a pipeline stage: its tensors only)
    for (const ParameterRef<T>& p : model.held) params.emplace(p.name, p);
    std::ifstream in(path, std::ios::binary);
    std::uint64_t offset = header_bytes;
    const std::size_t e = header.version == 3 ? 4 : 2;
    for (const Slice& s : layout(there, header.padded_vocab)) {
      std::vector<char> bytes(static_cast<std::size_t>(s.rows * s.cols) * e);
      if (params.count(s.name) == 0) {  // another stage's
        offset += bytes.size();
        continue;
      }
      in.seekg(static_cast<std::streamoff>(offset));
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      OPTIMUS_CHECK(in.good(), "cannot read '", path, "' at byte ", offset, " (", s.name, ")");
      offset += bytes.size();
      const std::int64_t rows = s.name == "wte" ? there.vocab : s.rows;  // padding rows dropped
      GlobalMatrix m(s.transposed ? s.cols : rows, s.transposed ? rows : s.cols);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < s.cols; ++c) {
          const char* at = bytes.data() + static_cast<std::size_t>(r * s.cols + c) * e;
          double v;
          if (e == 4) {
            float f;
            std::memcpy(&f, at, 4);
            v = f;
          } else {
            bf16 b;
            std::memcpy(&b.bits, at, 2);
            v = static_cast<float>(b);
          }
          (s.transposed ? m(c, r) : m(r, c)) = v;
        }
      }
      detail::load_from(path, params.at(s.name), m, model.device);
    }
  });
}

template <class T>
void write_llmc_tensors(const std::string& path, const detail::ModelTensors<T>& model) {
  const GptConfig& c = *model.config;
  DeferredFailure outcome(model.writer);
  OPTIMUS_CHECK(c.ffn == 4 * c.hidden, "export_llmc: llm.c's MLP is 4h wide; the model's ffn is ", c.ffn, " for h = ",
                c.hidden);
  const std::int64_t padded = (c.vocab + 127) / 128 * 128;  // llm.c pads its vocabulary to a multiple of 128
  std::optional<OutputFile> file;  // on the writing rank
  outcome.attempt([&] {
    file.emplace(path);
    std::int32_t h[256] = {};
    const std::int64_t fields[] = {magic, 3, c.max_seq, c.vocab, c.layers, c.heads, c.hidden, padded};
    for (std::size_t k = 0; k < 8; ++k) h[k] = static_cast<std::int32_t>(fields[k]);
    file->append(h, sizeof h);
  });
  std::map<std::string, std::size_t> index;  // the whole model's tensors by name
  for (std::size_t k = 0; k < model.order.size(); ++k) index.emplace(model.order[k].name, k);
  for (const Slice& s : layout(c, padded)) {
    const GlobalMatrix m = model.fetch(index.at(s.name));  // one tensor at a time
    outcome.attempt([&] {
      std::vector<float> values(static_cast<std::size_t>(s.rows * s.cols), 0.0f);  // wte's padding rows stay 0
      const std::int64_t rows = s.name == "wte" ? c.vocab : s.rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t col = 0; col < s.cols; ++col) {
          values[static_cast<std::size_t>(r * s.cols + col)] = static_cast<float>(s.transposed ? m(col, r) : m(r, col));
        }
      }
      file->append(values.data(), values.size() * sizeof(float));
    });
  }
  outcome.attempt([&] { file->commit(); });
  outcome.agree(model.everyone);
}

}  // namespace

template <class F>
void import_llmc(const std::string& path, Gpt<F>& model) {
  detail::check_gpt2_blocks(model.config(), "import_llmc");
  read_llmc_tensors(path, detail::tensors_of(model));
}

template <class F>
void export_llmc(const std::string& path, Gpt<F>& model) {
  detail::check_gpt2_blocks(model.config(), "export_llmc");
  write_llmc_tensors(path, detail::tensors_of(model));
}

template void import_llmc(const std::string&, Gpt<TwoD<float>>&);
template void import_llmc(const std::string&, Gpt<OneD<float>>&);
template void import_llmc(const std::string&, Gpt<TwoD<double>>&);
template void import_llmc(const std::string&, Gpt<OneD<double>>&);
template void export_llmc(const std::string&, Gpt<TwoD<float>>&);
template void export_llmc(const std::string&, Gpt<OneD<float>>&);
template void export_llmc(const std::string&, Gpt<TwoD<double>>&);
template void export_llmc(const std::string&, Gpt<OneD<double>>&);

}  // namespace optimus::checkpoint
