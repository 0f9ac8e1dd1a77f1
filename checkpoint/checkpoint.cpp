// GPT and AdamW checkpoints: which tensors, who writes, and the commit protocol (save directories: save_directory.cpp).
#include "optimus/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <type_traits>

#include "checkpoint/shards.hpp"
#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"

namespace optimus::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// 2: the layout records the mesh (grid/mesh.hpp) by name; 1 spelled it as a kind ("2d", "1d") with q or p, dp (2D
// only) and pp. Both are read.
constexpr int format_version = 2;

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  OPTIMUS_CHECK(fd >= 0, "cannot open directory '", dir.string(), "': ", std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  OPTIMUS_CHECK(ok, "cannot fsync directory '", dir.string(), "': ", std::strerror(errno));
}

// `dir` without a trailing separator, so that parent_path() and filename() name the checkpoint itself.
fs::path normal(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.empty()) return fs::path(".");
  return p.has_parent_path() ? p : fs::path(".") / p;  // "step_10": its parent is ".", not "".
}

// `.NAME` + suffix beside `dir` (built with append: GCC 12 warns falsely on `"." + string + suffix`).
fs::path hidden_beside(const fs::path& dir, const char* suffix) {
  std::string name = ".";
  name.append(dir.filename().string()).append(suffix);
  return dir.parent_path() / name;
}
fs::path partial_of(const fs::path& dir) { return hidden_beside(dir, ".partial"); }

// The block as metadata.json records it; "rope_theta" is null for learned positions.
json block_json(const BlockConfig& b) {
  return {{"norm", name_of(b.norm.kind)},
          {"norm_eps", b.norm.eps},
          {"bias", b.bias},
          {"rope_theta", b.rope ? json(b.rope->theta) : json(nullptr)},
          {"mlp", name_of(b.mlp)},
          {"kv_heads", b.kv_heads},
          {"tied_head", b.tied_head},
          {"post_norm", b.post_norm},
          {"bidirectional", b.bidirectional},
          {"token_types", b.token_types},
          {"embedding_norm", b.embedding_norm},
          {"head_transform", b.head_transform}};
}

json config_json(const GptConfig& c) {
  return {{"vocab", c.vocab},     {"padded_vocab", c.padded_vocab}, {"max_seq", c.max_seq},
          {"layers", c.layers},   {"hidden", c.hidden},             {"heads", c.heads},
          {"ffn", c.ffn},         {"dropout", c.dropout},           {"seed", c.seed},
          {"block", block_json(c.block)}};
}

// A block written before the block configuration was recorded (no "block") is GPT-2's; one written before a field was
// (positions, mlp, kv_heads, tied_head, post_norm, bidirectional, token_types, embedding_norm, head_transform) has
// GPT-2's value of it.
BlockConfig block_from(const json& j) {
  if (!j.contains("block")) return BlockConfig{};
  const json& b = j.at("block");
  const std::string norm = b.at("norm");
  OPTIMUS_CHECK(norm == "layernorm" || norm == "rmsnorm", "checkpoint: unknown norm '", norm, "'");
  const std::string mlp = b.value("mlp", std::string("gelu"));
  const std::optional<MlpKind> mlp_kind = mlp_kind_named(mlp);
  OPTIMUS_CHECK(mlp_kind.has_value(), "checkpoint: unknown mlp '", mlp, "' (gelu, gelu_erf or swiglu)");
  BlockConfig block{.norm = {.kind = norm == "layernorm" ? NormSpec::Kind::layernorm : NormSpec::Kind::rmsnorm,
                             .eps = b.at("norm_eps")},
                    .bias = b.at("bias"),
                    .rope = std::nullopt,
                    .mlp = *mlp_kind,
                    .kv_heads = b.value("kv_heads", std::int64_t{0}),
                    .tied_head = b.value("tied_head", true),
                    .post_norm = b.value("post_norm", false),
                    .bidirectional = b.value("bidirectional", false),
                    .token_types = b.value("token_types", std::int64_t{0}),
                    .embedding_norm = b.value("embedding_norm", false),
                    .head_transform = b.value("head_transform", false)};
  OPTIMUS_CHECK(block.token_types >= 0, "checkpoint: token_types = ", block.token_types, " is negative");
  if (b.contains("rope_theta") && !b.at("rope_theta").is_null()) block.rope = RopeSpec{b.at("rope_theta").get<double>()};
  return block;
}

GptConfig config_from(const json& j) {
  return GptConfig{.vocab = j.at("vocab"),
                   .padded_vocab = j.at("padded_vocab"),
                   .max_seq = j.at("max_seq"),
                   .layers = j.at("layers"),
                   .hidden = j.at("hidden"),
                   .heads = j.at("heads"),
                   .ffn = j.at("ffn"),
                   .dropout = j.at("dropout"),
                   .seed = j.at("seed"),
                   .block = block_from(j)};
}

json adamw_json(const AdamWConfig& c) {
  return {{"lr", c.lr},       {"beta1", c.beta1},       {"beta2", c.beta2},
          {"eps", c.eps},     {"weight_decay", c.weight_decay}, {"max_grad_norm", c.max_grad_norm}};
}

// Every tensor of a model (and optimizer) as this rank's shard. With `saving`, a tensor replicated over a 1D group is
// this rank's to write only on group rank 0 (`first_copy`); a load reads every tensor this rank holds.
// The shards of `params` and the optimizer's moments; when saving, without the replicated tensors' other copies
// (first_copy: this rank writes them) and the tensors named in `elsewhere` (another stage writes them).
template <class T>
std::vector<detail::Shard> shards_of(const std::vector<ParameterRef<T>>& params, AdamW<T>* optimizer,
                                     DeviceMemory* device, bool saving, bool first_copy,
                                     const std::set<std::string>& elsewhere) {
  std::vector<detail::Shard> shards;
  // `data` is on `device`, or in host memory (offloaded moments) when its view says so.
  const auto add = [&](const std::string& key, const ParameterRef<T>& p, const TensorView<T>& data) {
    if (saving && !first_copy && p.layout.kind == Sharding::Kind::replicated) return;
    if (saving && elsewhere.count(p.name) != 0) return;
    shards.push_back({.key = key, .shape = p.shape, .layout = p.layout, .dtype = dtype_of<T>, .data = data.data(),
                      .device = data.device() == Device::cpu ? nullptr : device});
  };
  for (const ParameterRef<T>& p : params) add("model/" + p.name, p, p.value);
  if (optimizer != nullptr) {
    const std::vector<ParameterRef<T>>& given = optimizer->parameters();
    for (std::size_t k = 0; k < given.size(); ++k) {
      add("adam.m/" + given[k].name, given[k], optimizer->first_moment(k));
      add("adam.v/" + given[k].name, given[k], optimizer->second_moment(k));
    }
  }
  return shards;
}

// Where a model's state lives: `holders` hold one copy of a stage between them (a q x q grid, a 1D group) and write it
// (rank_NNNNN is file_rank) if `writer` (replica 0); `stages` joins the holders of a pipeline's stages (null: one
// stage); the leader writes metadata.json; `everyone` are all the ranks taking part; `elsewhere` names the tensors this
// rank holds but another stage writes; `layout` is what metadata.json records.
struct Placement {
  Communicator* holders;
  Communicator* stages;
  std::vector<Communicator*> everyone;
  bool writer, leader;
  int file_rank;
  std::set<std::string> elsewhere;
  DeviceMemory* device;
  json layout;
};

template <class F>
Placement placement_of(Gpt<F>& model) {
  const Grid& grid = model.grid();
  const pipeline::Schedule& schedule = model.schedule();
  Communicator& holders = F::holders(model.place());
  const bool writer = grid.dp_index() == 0, first = grid.stage() == schedule.stage_of(0);
  const Mesh mesh = model.place().mesh();
  json layout{{"mesh",
               {{"dp", mesh.dp},
                {"pp", mesh.pp},
                {"tensor", mesh.tensor == TensorParallel::two_d ? "2d" : "1d"},
                {"side", mesh.side}}}};
  layout["schedule"] = std::string(pipeline::name_of(schedule.kind));
  layout["chunks"] = schedule.chunks;
  return {.holders = &holders,
          .stages = &grid.pipe(),
          .everyone = {&holders, &grid.dp_comm(), &grid.pipe()},
          .writer = writer,
          .leader = writer && first && holders.rank() == 0,
          .file_rank = grid.stage() * holders.size() + holders.rank(),
          .elsewhere = first ? std::set<std::string>{} : std::set<std::string>{"wte"},
          .device = grid.device(),
          .layout = layout};
}

// A save replaces a checkpoint of the same name, never anything else (a user's directory or file of that name).
void check_replaceable_checkpoint(const fs::path& dir) {
  std::error_code error;
  OPTIMUS_CHECK(!fs::exists(fs::symlink_status(dir, error)) || is_checkpoint(dir), "cannot save checkpoint '",
                dir.string(), "': it exists and is not a checkpoint (no metadata.json); it is left as it is");
}

// Makes `partial` the checkpoint `dir` in one atomic step and durable: a rename, or where `dir` exists an exchange
// (renameat2 RENAME_EXCHANGE), after which `partial` holds the replaced checkpoint and is removed. At no moment is
// `dir` missing or incomplete.
void commit(const fs::path& partial, const fs::path& dir) {
  fsync_directory(partial);
  check_replaceable_checkpoint(dir);  // (again: one may have appeared since the save began)
  if (fs::exists(dir)) {
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without the exchange (EINVAL; NFS, say): the old checkpoint is removed first, so a kill between
      // the two steps loses it (the new one stays in `partial`, and the next save of this name starts over).
      OPTIMUS_CHECK(errno == EINVAL || errno == ENOSYS, "cannot replace checkpoint '", dir.string(), "' with '",
                    partial.string(), "': ", std::strerror(errno));
      fs::remove_all(dir);
      fs::rename(partial, dir);
    }
    fsync_directory(dir.parent_path());
    fs::remove_all(partial);  // the replaced checkpoint (nothing, after the fallback)
  } else {
    fs::rename(partial, dir);
    fsync_directory(dir.parent_path());
  }
}

}  // namespace

namespace {

template <class T, class Model>
IoStats save_model(const fs::path& target, Model& model, AdamW<T>* optimizer, const TrainingState& state,
                   const StageHook& hook) {
  const Placement where = placement_of(model);
  const fs::path dir = normal(target), partial = partial_of(dir);
  const bool writer = where.writer, leader = where.leader;
  const std::vector<Communicator*>& everyone = where.everyone;
  const auto started = std::chrono::steady_clock::now();
  IoStats stats;
  all_or_throw(everyone, [&] {
    OPTIMUS_CHECK(fs::is_directory(dir.parent_path()), "cannot save checkpoint '", dir.string(), "': the directory '",
                  dir.parent_path().string(), "' does not exist");
    if (!leader) return;
    check_replaceable_checkpoint(dir);
    fs::remove_all(partial);  // a save of this name that did not finish
    fs::create_directory(partial);
  });
  json mine;
  const std::vector<detail::Shard> shards =
      shards_of(model.parameters(), optimizer, where.device, true, where.holders->rank() == 0, where.elsewhere);
  all_or_throw(everyone, [&] {
    if (!writer) return;
    char name[64];
    std::snprintf(name, sizeof name, "rank_%05d.safetensors", where.file_rank);
    mine = detail::write_shards(partial / name, shards, stats);
  });
  if (hook) hook("files written");
  std::vector<json> described;
  if (writer) described = detail::gather_json(*where.holders, mine);
  if (writer && where.stages != nullptr) {  // every stage's files, stage by stage
    std::vector<json> all;
    for (const json& stage : detail::gather_json(*where.stages, json(described))) {
      all.insert(all.end(), stage.begin(), stage.end());
    }
    described = std::move(all);
  }
  all_or_throw(everyone, [&] {
    if (!leader) return;
    json body = {{"format", "optimus-checkpoint"},
                 {"version", format_version},
                 {"config", config_json(model.config())},
                 {"step", state.step},
                 {"run", state.run},
                 {"extra", state.extra},
                 {"dtype", detail::safetensors_dtype(dtype_of<T>)},
                 {"layout", where.layout},
                 {"files", json::array()},
                 {"tensors", json::object()}};
    if (optimizer != nullptr) {
      body["adamw"] = adamw_json(optimizer->config());
      body["adamw_steps"] = optimizer->steps_taken();
    }
    std::uint64_t bytes = 0;
    for (std::size_t f = 0; f < described.size(); ++f) {
      body["files"].push_back(described[f].at("file"));
      for (const auto& [key, tensor] : described[f].at("tensors").items()) {
        json& entry = body["tensors"][key];
        if (entry.is_null()) entry = {{"shape", tensor.at("shape")}, {"dtype", tensor.at("dtype")},
                                      {"boxes", json::array()}};
        for (json box : tensor.at("boxes")) {
          box["file"] = f;
          bytes += box.at("rows").get<std::uint64_t>() * box.at("cols").get<std::uint64_t>() * sizeof(T);
          entry["boxes"].push_back(std::move(box));
        }
      }
    }
    body["bytes"] = bytes;
    detail::write_metadata(partial / "metadata.json", body);
  });
  if (hook) hook("metadata written");
  all_or_throw(everyone, [&] {
    if (leader) commit(partial, dir);
  });
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return stats;
}

// A checkpoint's mesh: recorded by name (version 2), or spelled as version 1 did ("kind" 2d with q and dp, or 1d with
// p, and pp; a 1D checkpoint of version 1 did not record its replicas: 1).
Mesh mesh_from(const json& layout, int version) {
  const json& m = version >= 2 ? layout.at("mesh") : layout;
  const std::string tensor = version >= 2 ? m.at("tensor").get<std::string>() : m.at("kind").get<std::string>();
  OPTIMUS_CHECK(tensor == "2d" || tensor == "1d", "tensor parallelism '", tensor, "' is neither 2d nor 1d");
  const bool two_d = tensor == "2d";
  return {.dp = m.value("dp", 1),
          .pp = m.value("pp", 1),
          .tensor = two_d ? TensorParallel::two_d : TensorParallel::one_d,
          .side = version >= 2 ? m.at("side").get<int>() : m.at(two_d ? "q" : "p").get<int>()};
}

}  // namespace

Info inspect(const fs::path& target) {
  const fs::path dir = normal(target);
  const json body = detail::read_metadata(dir);
  const fs::path file = dir / "metadata.json";
  try {
    OPTIMUS_CHECK(body.at("format") == "optimus-checkpoint", "not an Optimus checkpoint");
    const int version = body.at("version").is_number_integer() ? body.at("version").get<int>() : 0;
    OPTIMUS_CHECK(version == 1 || version == format_version, "format version ", body.at("version").dump(),
                  " (this build reads 1 to ", format_version, ")");
    Info info{.config = config_from(body.at("config")),
              .state = {.step = body.at("step"), .run = body.value("run", ""), .extra = body.at("extra")},
              .adamw = {},
              .adamw_steps = 0,
              .has_optimizer = body.contains("adamw"),
              .dtype = body.at("dtype"),
              .mesh = mesh_from(body.at("layout"), version),
              .bytes = body.at("bytes")};
    if (info.has_optimizer) {
      const json& a = body.at("adamw");
      info.adamw = AdamWConfig{.lr = a.at("lr"),
                               .beta1 = a.at("beta1"),
                               .beta2 = a.at("beta2"),
                               .eps = a.at("eps"),
                               .weight_decay = a.at("weight_decay"),
                               .max_grad_norm = a.at("max_grad_norm")};
      info.adamw_steps = body.at("adamw_steps");
    }
    return info;
  } catch (const json::exception& e) {
    OPTIMUS_FAIL("'", file.string(), "' is not a checkpoint's metadata: ", e.what());
  } catch (const Error& e) {
    OPTIMUS_FAIL("'", file.string(), "': ", e.message());
  }
}

namespace {

void check_same_model(const fs::path& dir, const GptConfig& there, const GptConfig& here) {
  const auto same = [&](const char* what, auto a, auto b) {
    OPTIMUS_CHECK(a == b, "checkpoint '", dir.string(), "' is of another model: ", what, " ", a, " there, ", b,
                  " here");
  };
  same("vocab", there.vocab, here.vocab);
  same("max_seq", there.max_seq, here.max_seq);
  same("layers", there.layers, here.layers);
  same("hidden", there.hidden, here.hidden);
  same("heads", there.heads, here.heads);
  same("ffn", there.ffn, here.ffn);
  same("norm", name_of(there.block.norm.kind), name_of(here.block.norm.kind));
  same("norm eps", there.block.norm.eps, here.block.norm.eps);
  same("linear biases", there.block.bias, here.block.bias);
  const auto positions = [](const GptConfig& c) { return std::string(c.block.rope ? "rope" : "learned"); };
  same("positions", positions(there), positions(here));
  same("rope theta", there.block.rope ? there.block.rope->theta : 0.0, here.block.rope ? here.block.rope->theta : 0.0);
  same("mlp", name_of(there.block.mlp), name_of(here.block.mlp));
  same("kv_heads", there.kv_heads(), here.kv_heads());
  same("tied head", there.block.tied_head, here.block.tied_head);
  same("post-norm", there.block.post_norm, here.block.post_norm);
  same("bidirectional attention", there.block.bidirectional, here.block.bidirectional);
  same("token types", there.block.token_types, here.block.token_types);
  same("embedding norm", there.block.embedding_norm, here.block.embedding_norm);
  same("masked-LM head transform", there.block.head_transform, here.block.head_transform);
}

}  // namespace

namespace {

template <class T, class Model>
TrainingState load_model(const fs::path& target, Model& model, AdamW<T>* optimizer, IoStats* stats) {
  const Placement where = placement_of(model);
  const fs::path dir = normal(target);
  const auto started = std::chrono::steady_clock::now();
  IoStats mine;
  Info info;
  all_or_throw(where.everyone, [&] {
    info = inspect(dir);
    check_same_model(dir, info.config, model.config());
    OPTIMUS_CHECK(optimizer == nullptr || info.has_optimizer, "checkpoint '", dir.string(),
                  "' holds no optimizer state (saved without one)");
    try {
      detail::read_shards(dir, detail::read_metadata(dir),
                          shards_of(model.parameters(), optimizer, where.device, false, true, {}), mine);
    } catch (const json::exception& e) {  // a checksum that matches a body some other tool wrote
      OPTIMUS_FAIL("'", (dir / "metadata.json").string(), "' does not describe the checkpoint's files and tensors: ",
                   e.what());
    }
    if (optimizer != nullptr) optimizer->set_steps_taken(info.adamw_steps);
  });
  mine.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (stats != nullptr) *stats = mine;
  return info.state;
}

}  // namespace

template <class F>
IoStats save(const fs::path& dir, Gpt<F>& model, AdamW<typename F::Value>* optimizer,
             const TrainingState& state, const StageHook& hook) {
  return save_model(dir, model, optimizer, state, hook);
}

template <class F>
TrainingState load(const fs::path& dir, Gpt<F>& model, AdamW<typename F::Value>* optimizer, IoStats* stats) {
  return load_model(dir, model, optimizer, stats);
}

#define OPTIMUS_INSTANTIATE(Family, T)                                                                        \
  template IoStats save(const fs::path&, Gpt<Family<T>>&, AdamW<T>*, const TrainingState&,         \
                        const StageHook&);                                                                   \
  template TrainingState load(const fs::path&, Gpt<Family<T>>&, AdamW<T>*, IoStats*);
OPTIMUS_INSTANTIATE(TwoD, float)
OPTIMUS_INSTANTIATE(TwoD, double)
OPTIMUS_INSTANTIATE(OneD, float)
OPTIMUS_INSTANTIATE(OneD, double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::checkpoint
