// Token files, output files and other programs' files: what a run reads and writes outside its checkpoints
// (token_file.hpp, output_file.hpp, safetensors.hpp, llmc_gpt2.hpp). Nothing half-written, nothing replaced that is not
// a regular file, no input overwritten, a token file's layout never guessed and its truncation an error, not a SIGBUS;
// safetensors and llm.c files read back as written.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optimus/optimus.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "checkpoint_support.hpp"
#include "test_world.hpp"
#include "optimus/core/output_file.hpp"

namespace fs = std::filesystem;
using optimus::GlobalMatrix;
using optimus::checkpoint::TokenFile;
using optimus::checkpoint::TokenFormat;
using optimus::test::fresh_directory;

namespace {

std::string contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::uint16_t> ids(std::size_t n) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t k = 0; k < n; ++k) v[k] = static_cast<std::uint16_t>((k * 7919) % 50257);
  return v;
}

}  // namespace

TEST_CASE("token files: llm.c's by its header, raw only when told; a damaged header and a truncation are errors") {
  const fs::path dir = fresh_directory("tokens");
  const std::vector<std::uint16_t> tokens = ids(1000);
  const fs::path llmc = dir / "train.bin", raw = dir / "raw.bin";
  optimus::checkpoint::write_llmc_tokens(llmc.string(), tokens.data(), tokens.size());
  std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(tokens.data()), 2 * 1000);

  const TokenFile a(llmc.string(), TokenFormat::llmc);
  CHECK(a.size() == 1000);
  CHECK(a.id_bytes() == 2);
  std::vector<std::uint32_t> window(10);
  a.read(990, 10, window.data());
  CHECK(window == std::vector<std::uint32_t>(tokens.end() - 10, tokens.end()));
  const std::vector<std::int64_t> counts = a.histogram();
  CHECK(counts[tokens[3]] >= 1);
  std::int64_t total = 0;
  for (std::int64_t n : counts) total += n;
  CHECK(total == 1000);
  CHECK_THROWS_WITH_AS(a.read(995, 10, window.data()), doctest::Contains("are outside its 1000"), optimus::Error);

  const TokenFile b(raw.string(), TokenFormat::raw_uint16);
  CHECK(b.size() == 1000);
  b.read(0, 10, window.data());
  CHECK(window == std::vector<std::uint32_t>(tokens.begin(), tokens.begin() + 10));
  // A raw file is not read as llm.c's, and an llm.c file whose magic is damaged is not read as raw.
  CHECK_THROWS_WITH_AS(TokenFile(raw.string(), TokenFormat::llmc),
                       doctest::Contains("is not an llm.c token file: it starts with"), optimus::Error);
  {
    std::fstream f(llmc, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1);
    f.put('\x7f');
  }
  CHECK_THROWS_WITH_AS(TokenFile(llmc.string(), TokenFormat::llmc),
                       doctest::Contains("not the magic 20240520 (a damaged llm.c file"), optimus::Error);
  // Truncated while open (another process rewriting it): the next read is an error naming it, not a SIGBUS.
  fs::resize_file(raw, 600);
  std::vector<std::uint32_t> large(250);
  CHECK_THROWS_WITH_AS(b.read(100, 250, large.data()), doctest::Contains("no longer holds its 1000 tokens"),
                       optimus::Error);
  CHECK_THROWS_WITH_AS(TokenFile(dir.string(), TokenFormat::raw_uint16), doctest::Contains("is not a regular file"),
                       optimus::Error);
  fs::remove_all(dir);
}

TEST_CASE("token files: llm.c's version 2 holds uint32 ids (Llama 3's vocabulary); an id no vocabulary holds is an "
          "error naming it") {
  const fs::path dir = fresh_directory("tokens_v2");
  std::vector<std::uint32_t> tokens(300);
  for (std::size_t k = 0; k < tokens.size(); ++k) tokens[k] = static_cast<std::uint32_t>((k * 104729) % 128256);
  tokens[7] = 128255;  // the largest id of Llama 3's vocabulary
  const fs::path v2 = dir / "llama.bin";
  optimus::checkpoint::write_llmc_tokens(v2.string(), tokens.data(), tokens.size());
  CHECK(fs::file_size(v2) == 1024 + 4 * 300);
  const TokenFile a(v2.string(), TokenFormat::llmc);
  CHECK(a.size() == 300);
  CHECK(a.id_bytes() == 4);
  std::vector<std::uint32_t> back(300);
  a.read(0, 300, back.data());
  CHECK(back == tokens);
  const std::vector<std::int64_t> counts = a.histogram();
  CHECK(counts.size() == 128256);  // [largest id + 1]
  CHECK(counts[128255] == 1);
  // The header's count checked against 4-byte ids: the same file's bytes read as version 1 would hold 2x the tokens.
  {
    std::fstream f(v2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    const std::int32_t version = 1;
    f.write(reinterpret_cast<const char*>(&version), sizeof version);
  }
  CHECK_THROWS_WITH_AS(TokenFile(v2.string(), TokenFormat::llmc),
                       doctest::Contains("its header says 300 tokens of 2 bytes but it holds 1200 bytes"),
                       optimus::Error);
  {
    std::fstream f(v2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    const std::int32_t version = 3;
    f.write(reinterpret_cast<const char*>(&version), sizeof version);
  }
  CHECK_THROWS_WITH_AS(TokenFile(v2.string(), TokenFormat::llmc), doctest::Contains("llm.c version 3"),
                       optimus::Error);
  // A damaged id (past 2^24) is named by the histogram, not a 16 GiB allocation.
  tokens[200] = 0xdeadbeefu;
  optimus::checkpoint::write_llmc_tokens(v2.string(), tokens.data(), tokens.size());
  const TokenFile damaged(v2.string(), TokenFormat::llmc);
  CHECK_THROWS_WITH_AS((void)damaged.histogram(), doctest::Contains("holds id 3735928559 at token 200"),
                       optimus::Error);
  fs::remove_all(dir);
}

TEST_CASE("output files: written whole or not at all, only over a regular file, never over an input") {
  const fs::path dir = fresh_directory("outputs");
  const fs::path file = dir / "out.json";
  optimus::write_file(file, "first");
  optimus::write_file(file, "second, longer");
  CHECK(contents(file) == "second, longer");
  CHECK(optimus::test::partial_files(dir).empty());
  {
    // Abandoned before commit: the target keeps its bytes and the partial file goes.
    optimus::OutputFile half(file);
    half.append("xx", 2);
  }
  CHECK(contents(file) == "second, longer");
  CHECK(optimus::test::partial_files(dir).empty());
  // Space running out (a file-size limit of 4 KiB in a child: write() fails past it, as on a full disk) fails the
  // write, and the target keeps its bytes: no truncated file.
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{.rlim_cur = 4096, .rlim_max = 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      optimus::write_file(file, std::string(100000, 'x'));
    } catch (const optimus::Error& e) {
      ::_exit(std::string(e.message()).find("cannot write") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contents(file) == "second, longer");
  CHECK(optimus::test::partial_files(dir).empty());
  // A device is never replaced (as root, a rename over /dev/full would replace the device node).
  CHECK_THROWS_WITH_AS(optimus::write_file("/dev/full", "x"), doctest::Contains("is a character device"),
                       optimus::Error);
  // Not a regular file: a FIFO (whose reader would get the bytes and the FIFO be renamed over) and a directory.
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(optimus::write_file(fifo, "x"), doctest::Contains("is a FIFO"), optimus::Error);
  CHECK(fs::is_fifo(fifo));
  CHECK_THROWS_WITH_AS(optimus::write_file(dir, "x"), doctest::Contains("is a directory"), optimus::Error);
  // Never an input: the same file by another name, or a file inside an input directory.
  fs::create_directory(dir / "ckpt");
  std::ofstream(dir / "ckpt" / "rank_00000.safetensors") << "shard";
  fs::create_symlink(file, dir / "link.json");
  const std::vector<fs::path> inputs{dir / "link.json", dir / "ckpt"};
  const std::vector<std::string> names{"--data", "--resume"};
  CHECK_THROWS_WITH_AS(optimus::check_not_input(dir / "out.json", "--export", inputs, names),
                       doctest::Contains("is --data's input"), optimus::Error);
  CHECK_THROWS_WITH_AS(optimus::check_not_input(dir / "ckpt" / "rank_00000.safetensors", "--export", inputs, names),
                       doctest::Contains("is inside --resume's input"), optimus::Error);
  CHECK_NOTHROW(optimus::check_not_input(dir / "new.json", "--export", inputs, names));
  CHECK_NOTHROW(optimus::check_not_input(dir / "ckpt.json", "--export", inputs, names));
  fs::remove_all(dir);
}

TEST_CASE("one writer per output: two writers of one path never mix, and the second to finish refuses") {
  const fs::path dir = fresh_directory("writers");
  const fs::path file = dir / "model.safetensors";
  const std::string refused = "was written (or removed) by another writer while this one was writing it";
  for (const bool existed : {false, true}) {
    CAPTURE(existed);
    if (existed) optimus::write_file(file, "an older export");
    std::optional<optimus::OutputFile> first(std::in_place, file), second(std::in_place, file);
    // Each writes a hidden file of its own beside the target, named by host, process and a random part.
    CHECK(first->partial() != second->partial());
    CHECK(first->partial().parent_path() == dir);
    CHECK(first->partial().filename().string().starts_with(".model.safetensors."));
    CHECK(optimus::test::partial_files(dir).size() == 2);
    first->append("the first model", 15);
    second->append("the second, longer model", 24);
    first->commit();
    CHECK(contents(file) == "the first model");
    CHECK_THROWS_WITH_AS(second->commit(), doctest::Contains(refused.c_str()), optimus::Error);
    CHECK(contents(file) == "the first model");  // wholly the first writer's
    second.reset();
    first.reset();
    CHECK(optimus::test::partial_files(dir).empty());
    fs::remove(file);
  }
  // A writer that starts after another finished replaces its file, wholly.
  optimus::write_file(file, "one");
  optimus::write_file(file, "two");
  CHECK(contents(file) == "two");
  // Directories (a Llama export) are renamed into place only where none appeared meanwhile.
  const fs::path target = dir / "llama", mine = optimus::temporary_beside(target, ".partial");
  fs::create_directory(mine);
  fs::create_directory(target);
  CHECK_THROWS_WITH_AS(optimus::rename_new(mine, target), doctest::Contains(refused.c_str()), optimus::Error);
  CHECK_FALSE(fs::exists(mine));
  fs::remove(target);
  fs::create_directory(mine);
  optimus::rename_new(mine, target);
  CHECK(fs::is_directory(target));
  // A killed writer's partial file is removed by the next writer of that name on this host once its process is gone;
  // a running writer's is not.
  const pid_t gone = ::fork();
  REQUIRE(gone >= 0);
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  const fs::path running = optimus::temporary_beside(file, ".partial");  // this process's
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  const std::string dead_name = ".model.safetensors." + std::string(host) + "." + std::to_string(gone) + ".0.partial";
  std::ofstream(dir / dead_name) << "killed";
  std::ofstream(running) << "running";
  optimus::write_file(file, "three");
  CHECK_FALSE(fs::exists(dir / dead_name));
  CHECK(fs::exists(running));
  fs::remove_all(dir);
}

TEST_CASE("inputs inside directories are regular files, and config.json's fields have their JSON types") {
  // A FIFO in a checkpoint or a Hugging Face directory used to block the reader's open forever; a directory failed
  // its read with a stream error naming no path; hidden_size 32.5 was read as 32; a string where a number belongs
  // gave nlohmann's "type must be number, but is string", naming no key.
  const fs::path dir = fresh_directory("inputs");
  const fs::path checkpoint = dir / "step_3", llama = dir / "llama";
  fs::create_directories(checkpoint);
  fs::create_directories(llama);
  REQUIRE(::mkfifo((checkpoint / "metadata.json").c_str(), 0600) == 0);
  const std::string fifo = std::string("'").append((checkpoint / "metadata.json").string()).append("' is a FIFO");
  CHECK_THROWS_WITH_AS(optimus::checkpoint::inspect(checkpoint), doctest::Contains(fifo.c_str()), optimus::Error);
  REQUIRE(::mkfifo((llama / "config.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(optimus::checkpoint::hf_llama_config(llama.string()), doctest::Contains("is a FIFO"),
                       optimus::Error);
  fs::remove(llama / "config.json");
  fs::create_directory(llama / "config.json");
  CHECK_THROWS_WITH_AS(optimus::checkpoint::hf_llama_config(llama.string()),
                       doctest::Contains("config.json' is a directory, not a file to read"), optimus::Error);
  fs::remove(llama / "config.json");
  const auto config = [&](const std::string& hidden, const std::string& heads, const std::string& theta) {
    std::ofstream(llama / "config.json")
        << R"({"model_type": "llama", "vocab_size": 64, "max_position_embeddings": 16, "num_hidden_layers": 1, )"
        << R"("hidden_size": )" << hidden
        << R"(, "num_attention_heads": )" << heads << R"(, "intermediate_size": 88, "rope_theta": )" << theta << "}";
    try {
      (void)optimus::checkpoint::hf_llama_config(llama.string());
    } catch (const optimus::Error& e) {
      return e.message();
    }
    return std::string();
  };
  const std::string file = std::string("'").append((llama / "config.json").string()).append("': ");  // (append:
  // GCC 12 warns falsely on "'" + string + "': ")
  CHECK(config("32.5", "4", "10000") == file + "hidden_size is 32.5, not an integer");
  CHECK(config("32", "\"4\"", "10000") == file + "num_attention_heads is \"4\", not an integer");
  CHECK(config("32", "4", "\"x\"") == file + "rope_theta is \"x\", not a number");
  REQUIRE(::mkfifo((llama / "model.safetensors").c_str(), 0600) == 0);  // the fields pass: the weights are read
  CHECK(config("32", "4", "10000").find("model.safetensors' is a FIFO, not a file to read") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("an output never goes into a run's save directory") {
  const fs::path dir = fresh_directory("within");
  const fs::path shard = dir / "run" / "step_2" / "rank_00000.safetensors";
  const std::string inside = "option --export '" + shard.string() + "' is inside --save's directory";
  CHECK_THROWS_WITH_AS(optimus::check_not_within(shard, "option --export", dir / "run", "--save"),
                       doctest::Contains(inside.c_str()), optimus::Error);
  CHECK_THROWS_WITH_AS(optimus::check_not_within(dir / "run" / ".lock", "option --export", dir / "run/", "--save"),
                       doctest::Contains("is inside --save's directory"), optimus::Error);
  CHECK_THROWS_WITH_AS(optimus::check_not_within(dir / "run", "option --export", dir / "." / "run", "--save"),
                       doctest::Contains("is --save's directory"), optimus::Error);
  CHECK_NOTHROW(optimus::check_not_within(dir / "run.safetensors", "option --export", dir / "run", "--save"));
  CHECK_NOTHROW(optimus::check_not_within(dir / "model.bin", "option --export", dir / "run", "--save"));
  fs::remove_all(dir);
}

namespace {

// `from`'s tensors and an lm_head.weight made of wte's bytes, byte `flip` changed (none: flip < 0), written to `to`.
void with_head(const fs::path& from, const fs::path& to, long flip) {
  const optimus::safetensors::Reader in(from.string());
  std::vector<optimus::safetensors::TensorInfo> infos;
  for (const auto& e : in.entries()) infos.push_back(e.info);
  const optimus::safetensors::Entry& wte = in.find("wte.weight");
  infos.push_back({.name = "lm_head.weight", .dtype = wte.info.dtype, .shape = wte.info.shape});
  optimus::safetensors::Writer out(to.string(), infos, {{"format", "pt"}, {"n_head", in.metadata().at("n_head")}});
  for (const auto& e : in.entries()) {
    std::vector<char> bytes(e.info.bytes());
    in.read(e.offset, bytes.size(), bytes.data());
    out.append(bytes.data(), bytes.size());
  }
  std::vector<char> head(wte.info.bytes());
  in.read(wte.offset, head.size(), head.data());
  if (flip >= 0) head[static_cast<std::size_t>(flip)] ^= 1;
  out.append(head.data(), head.size());
  out.finish();
}

}  // namespace

TEST_CASE("a Hugging Face file's lm_head.weight is read only where it is wte's: an untied head is refused") {
  const fs::path dir = fresh_directory("untied");
  optimus::test::run_in_process(1, [&](optimus::Communicator& w) {
    optimus::Gpt2D<float> model(optimus::Grid::create(w, 1), optimus::test::small_config());
    optimus::checkpoint::export_hf((dir / "model.safetensors").string(), model);
  });
  with_head(dir / "model.safetensors", dir / "tied.safetensors", -1);
  with_head(dir / "model.safetensors", dir / "untied.safetensors", 4100);
  CHECK(optimus::checkpoint::hf_config((dir / "tied.safetensors").string()).hidden ==
        optimus::test::small_config().hidden);
  CHECK_THROWS_WITH_AS(optimus::checkpoint::hf_config((dir / "untied.safetensors").string()),
                       doctest::Contains("lm_head.weight differs from wte.weight (first at byte 4100 of its data): an untied LM head"),
                       optimus::Error);
  fs::remove_all(dir);
}

TEST_CASE("an f64 value past f32's range is refused by an f32 model as it loads, naming the file and the element") {
  const fs::path dir = fresh_directory("f64_range");
  optimus::test::run_in_process(1, [&](optimus::Communicator& w) {
    optimus::Gpt2D<float> model(optimus::Grid::create(w, 1), optimus::test::small_config());
    optimus::checkpoint::export_hf((dir / "f32.safetensors").string(), model);
  });
  // The file again in F64, wpe's first element 1e300: finite in f64, inf once cast to f32.
  const optimus::safetensors::Reader in((dir / "f32.safetensors").string());
  std::vector<optimus::safetensors::TensorInfo> infos;
  for (const auto& e : in.entries()) infos.push_back({.name = e.info.name, .dtype = "F64", .shape = e.info.shape});
  const std::string f64 = (dir / "f64.safetensors").string();
  optimus::safetensors::Writer out(f64, infos, in.metadata());
  for (const auto& e : in.entries()) {
    std::vector<float> values(e.info.bytes() / sizeof(float));
    in.read(e.offset, e.info.bytes(), values.data());
    std::vector<double> wide(values.begin(), values.end());
    if (e.info.name == "wpe.weight") wide[0] = 1e300;
    out.append(wide.data(), wide.size() * sizeof(double));
  }
  out.finish();
  optimus::test::run_in_process(1, [&](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 1);
    optimus::Gpt2D<float> narrow(grid, optimus::test::small_config());
    CHECK_THROWS_WITH_AS(optimus::checkpoint::import_hf(f64, narrow),
                         ("'" + f64 + "': load_global: 'wpe' holds 1e+300 at [0, 0], beyond the model's f32 range "
                          "(3.40282e+38); parameters must be finite as the model holds them").c_str(),
                         optimus::Error);
    optimus::Gpt2D<double> wide(grid, optimus::test::small_config());  // f64 holds it
    optimus::checkpoint::import_hf(f64, wide);
    CHECK(wide.gather(false).at("wpe")(0, 0) == 1e300);
  });
  fs::remove_all(dir);
}

TEST_CASE("safetensors: a written file reads back; a malformed one is refused naming it") {
  const fs::path dir = fresh_directory("st");
  const fs::path file = dir / "t.safetensors";
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<double> b = {-1.5};
  {
    optimus::safetensors::Writer w(file.string(),
                                   {{.name = "a", .dtype = "F32", .shape = {2, 3}}, {.name = "b", .dtype = "F64", .shape = {1}}},
                                   {{"k", "v"}});
    w.append(a.data(), 12);
    w.append(a.data() + 3, 12);
    w.append(b.data(), 8);
    w.finish();
  }
  const optimus::safetensors::Reader r(file.string());
  CHECK(r.metadata().at("k") == "v");
  REQUIRE(r.entries().size() == 2);
  const optimus::safetensors::Entry& ea = r.find("a");
  CHECK(ea.info.shape == std::vector<std::int64_t>{2, 3});
  std::vector<float> back(6);
  r.read(ea.offset, 24, back.data());
  CHECK(back == a);
  CHECK(ea.offset % 8 == 0);
  CHECK_THROWS_WITH_AS(r.find("c"), doctest::Contains("has no tensor named 'c'"), optimus::Error);
  fs::resize_file(file, fs::file_size(file) - 1);
  CHECK_THROWS_WITH_AS(optimus::safetensors::Reader(file.string()), doctest::Contains("t.safetensors"),
                       optimus::Error);
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    const char junk[] = "\x05\0\0\0\0\0\0\0{bad}";
    out.write(junk, sizeof junk - 1);
  }
  CHECK_THROWS_WITH_AS(optimus::safetensors::Reader(file.string()), doctest::Contains("header is not a JSON object"),
                       optimus::Error);
  const auto junk_bytes = fs::file_size(file);
  {
    optimus::safetensors::Writer unfinished(file.string(), {{.name = "a", .dtype = "F32", .shape = {2, 3}}}, {});
    CHECK_THROWS_WITH_AS(unfinished.finish(), doctest::Contains("was given 0 of its 24 bytes"), optimus::Error);
  }
  // An unfinished writer leaves the file it would have replaced as it was, and no partial file.
  CHECK(fs::file_size(file) == junk_bytes);
  CHECK(optimus::test::partial_files(dir).empty());
  fs::remove_all(dir);
}

TEST_CASE("llm.c checkpoints: a file written to llm.c's layout imports on a 2x2 grid, and exporting gives its bytes") {
  // vocab 50 (llm.c pads it to 128), ffn = 4h; distinct values in every tensor.
  const optimus::GptConfig config{.vocab = 50, .padded_vocab = 0, .max_seq = 8, .layers = 2, .hidden = 32,
                                  .heads = 4, .ffn = 128, .dropout = 0.0, .seed = 0, .block = {}};
  std::map<std::string, GlobalMatrix> tensors;
  std::uint64_t seed = 40;
  for (const auto& [name, shape] : optimus::reference::gpt_parameter_shapes(config)) {
    tensors[name] = optimus::reference::random_matrix(shape.size() == 2 ? shape[0] : 1, shape.back(), seed++)
                        .cast<float>()
                        .cast<double>();
  }
  // The file, from llm.c's description: header, then each tensor over all layers, Linear weights as [out, in].
  const fs::path dir = fresh_directory("llmc");
  const fs::path file = dir / "gpt2_test.bin";
  {
    std::ofstream out(file, std::ios::binary);
    std::int32_t header[256] = {20240326, 3, 8, 50, 2, 4, 32, 128};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    const auto put = [&](const GlobalMatrix& m, bool transpose, std::int64_t rows_out) {
      const GlobalMatrix t = transpose ? GlobalMatrix(m.transpose()) : m;
      for (std::int64_t r = 0; r < rows_out; ++r) {
        for (std::int64_t c = 0; c < t.cols(); ++c) {
          const float v = r < t.rows() ? static_cast<float>(t(r, c)) : 0.0f;
          out.write(reinterpret_cast<const char*>(&v), 4);
        }
      }
    };
    put(tensors["wte"], false, 128);
    put(tensors["wpe"], false, 8);
    for (const char* part : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                             "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      for (int l = 0; l < 2; ++l) {
        const GlobalMatrix& m = tensors["h." + std::to_string(l) + "." + part];
        const bool weight = std::string(part).ends_with(".weight") && std::string(part).find("ln_") == std::string::npos;
        put(m, weight, weight ? m.cols() : m.rows());
      }
    }
    put(tensors["ln_f.weight"], false, 1);
    put(tensors["ln_f.bias"], false, 1);
  }
  CHECK(optimus::checkpoint::is_llmc_checkpoint(file.string()));
  const optimus::GptConfig read = optimus::checkpoint::llmc_config(file.string());
  CHECK(read.vocab == 50);
  CHECK(read.ffn == 128);
  CHECK(read.heads == 4);
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    optimus::Gpt2D<float> model(grid, read);
    optimus::checkpoint::import_llmc(file.string(), model);
    const auto gathered = model.gather(false);
    if (w.rank() == 0) {
      for (const auto& [name, m] : tensors) {
        CAPTURE_BINDING(name);
        CHECK(gathered.at(name) == m);
      }
    }
    optimus::checkpoint::export_llmc((dir / "exported.bin").string(), model);
  });
  CHECK(contents(dir / "exported.bin") == contents(file));
  fs::resize_file(file, fs::file_size(file) - 4);
  CHECK_THROWS_WITH_AS(optimus::checkpoint::llmc_config(file.string()), doctest::Contains("(truncated?)"),
                       optimus::Error);
  fs::remove_all(dir);
}
