// train_gpt's run in named steps (training_run.hpp).
#include "training_run.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <variant>

#include "auto_plan.hpp"
#include "checkpoint_options.hpp"
#include "program_options.hpp"
#include "device_memory.hpp"
#include "memory_check.hpp"
#include "optimus/programs/arch_options.hpp"
#include "reference_check.hpp"
#include "run_layout.hpp"
#include "stop_fault.hpp"

namespace optimus::apps {

namespace ex = optimus::apps;

Setup read_setup(optimus::Communicator& world, const optimus::cli::Options& o, const ex::Placement& where) {
  Setup setup;
  OPTIMUS_CHECK(!(o.has("data") && o.has("text")), "--data and --text exclude each other");
  OPTIMUS_CHECK(o.has("data") || !o.has("data-format"), "--data-format describes --data's files: give --data");
  const auto format = o.text("data-format", "llmc") == "raw" ? optimus::checkpoint::TokenFormat::raw_uint16
                                                             : optimus::checkpoint::TokenFormat::llmc;
  setup.corpus = o.has("data") ? ex::load_data(o.list("data", ""), format)
                               : ex::load_corpus(o.text("text", "/usr/share/common-licenses/GPL-3"));
  const ex::Corpus& corpus = setup.corpus;
  optimus::GptConfig& config = setup.config;
  OPTIMUS_CHECK(o.has("data") || !o.has("vocab"), "--vocab sizes a model for --data's token ids; a --text model's "
                "vocabulary is the text's characters");
  setup.data_vocab = {.ids = corpus.ids_used, .exact = !o.has("data"), .characters = corpus.chars};
  config.block = optimus::cli::arch_of(o);
  // A text's ids are its characters, and a masked LM's special ids after them.
  config.vocab = o.has("vocab") ? o.integer("vocab", 0)
                 : o.has("data") ? corpus.vocab
                                 : ex::for_blocks(setup.data_vocab, config.block).ids;
  ex::check_vocab_fits(ex::for_blocks(setup.data_vocab, config.block), config.vocab,
                       o.has("vocab") ? "--vocab's" : "the tokenizer's (--vocab sets another)");
  config.layers = o.integer("layers", 2);
  config.hidden = o.integer("hidden", 128);
  config.heads = o.integer("heads", 4);
  const bool llama = config.block.mlp == optimus::MlpKind::swiglu;
  // Llama's inner size rounded up to what the layout splits (64 before a plan picks the layout).
  config.ffn = o.integer("ffn", llama ? optimus::llama_ffn(config.hidden, 64) : 4 * config.hidden);
  config.max_seq = o.integer("seq", 64);
  setup.seq = config.max_seq;
  config.dropout = o.real("dropout", 0.1);
  config.seed = static_cast<std::uint64_t>(o.integer("seed", 1234));
  setup.batch = o.integer("batch", 16);
  // --plan auto: the layout, the micro-batches, each block's recomputation and the offload are the plan's, and
  // --batch is the whole step's batch, which the plan's replicas share.
  OPTIMUS_CHECK(o.has("plan") || (!o.has("calibration") && !o.has("cores")), "--calibration and --cores need --plan auto");
  OPTIMUS_CHECK(!o.has("plan") || (!o.has("layout") && !o.has("p")), "--plan auto chooses the layout itself: it takes "
                "neither --layout nor --p");
  if (o.has("plan")) setup.planned = ex::auto_plan(world, o, where.choice, config, setup.batch, where.in_process);
  setup.recompute = optimus::parse_recompute(o.text("recompute", "none"));
  setup.run = setup.planned ? ex::layout_of(*setup.planned, where.choice.kind)
                            : ex::layout_of(o, where.choice.kind, world.size());
  const optimus::plan::Layout& layout = setup.run.layout;
  setup.run.order = ex::execution_of(o, layout);
  if (llama && !o.has("ffn") && !setup.planned) config.ffn = optimus::llama_ffn(config.hidden, layout.tp);
  if (setup.planned) setup.batch /= layout.dp;
  setup.schedule = optimus::plan::schedule_of(layout);  // the schedule's own checks, before any work
  setup.gemm = o.text("gemm", "f32");
  setup.math = setup.gemm == "bf16" ? optimus::ops::GemmMath::bf16 : optimus::ops::GemmMath::f32;
  setup.steps = static_cast<int>(o.integer("steps", 1200));
  setup.every = static_cast<int>(o.integer("every", 50));
  setup.lr = o.real("lr", 3e-3);
  return setup;
}


Places place(optimus::Communicator& world, const Setup& setup) {
  Places p;
  p.host = optimus::plan::Place::on_host(world, setup.run.layout);
  return p;
}

void place_training(optimus::Communicator& world, const optimus::cli::Options& o, const ex::Placement& where,
                    const Setup& setup, Places& p) {
  const optimus::plan::Layout& layout = setup.run.layout;
  std::optional<optimus::plan::Place> on_device;
  if (where.choice.kind != optimus::Device::cpu) {
    optimus::RankDevice* rank = where.slot;  // a sweep's slot, which its members share
    if (rank == nullptr) {
      if (!where.in_process) p.own_device = ex::open_device(where, world);
      p.rank_device =
          ex::open_rank_device(where.in_process ? *where.shared : *p.own_device, setup.math, where, world);
      rank = p.rank_device.get();
      // A simulated device of this run's own, before the grids take their buffers (a sweep's members share their
      // slot's, which the sweep checks).
      if (where.choice.kind == optimus::Device::sim &&
          where.choice.sim_capacity != std::numeric_limits<std::uint64_t>::max()) {
        ex::check_device_memory(setup, where.choice.sim_capacity, where.in_process, rank->gemm().workspace_bytes());
      }
    }
    on_device = optimus::plan::Place::on_device(
        *rank, world, layout,
        {.shared = where.in_process, .timeout = optimus::DeviceCommunicator::kDefaultTimeout});
  }
  const optimus::Execution execution{.overlap = true, .gemm_math = setup.math, .check_finite = o.has("check-finite"),
                                     .timeline = nullptr};
  p.training = (on_device ? *on_device : *p.host).with(execution);
}


Start start(optimus::Communicator& world, const optimus::cli::Options& o, Setup& setup, const Places& places) {
  using ex::InitFormat;
  optimus::GptConfig& config = setup.config;
  Start s;
  s.saving = ex::saving_options(o);
  OPTIMUS_CHECK(!(o.has("init") && o.has("resume")), "--init and --resume exclude each other (a checkpoint holds the "
                "weights already)");
  if (o.has("init")) {
    const std::string file = o.text("init", "");
    // A directory is a Hugging Face model of the type its config.json names; a file, llm.c's or GPT-2 safetensors.
    namespace cp = optimus::checkpoint;
    if (std::filesystem::is_directory(file)) {
      s.init_format = cp::hf_model_of(file) == cp::HfModel::bert ? InitFormat::hf_bert : InitFormat::hf_llama;
    } else {
      s.init_format = cp::is_llmc_checkpoint(file) ? InitFormat::llmc : InitFormat::hf_gpt2;
    }
    const optimus::GptConfig there = s.init_format == InitFormat::llmc      ? cp::llmc_config(file)
                                     : s.init_format == InitFormat::hf_gpt2 ? cp::hf_config(file)
                                     : s.init_format == InitFormat::hf_bert ? cp::hf_bert_config(file)
                                                                            : cp::hf_llama_config(file);
    s.init_context = there.max_seq;
    ex::adopt_shape(o, there, file, setup.data_vocab, config, setup.seq);
  }
  ex::check_export_target(o, config);  // before training: a target the export would refuse fails now
  if (o.has("resume")) {
    s.resume = optimus::checkpoint::resolve(o.text("resume", ""));
    s.resumed = optimus::checkpoint::inspect(*s.resume);
    ex::adopt_checkpoint(o, s.resumed, places.host->grid().dp(), setup.data_vocab, config, setup.seq, setup.batch,
                         setup.steps, setup.lr, setup.finished_resume);
  }
  places.host->validate(config, ex::config_names(o));
  // (--layers takes at least 1; a file's model may say 0, which no pipeline could place.)
  OPTIMUS_CHECK(config.layers >= 1, ex::config_names(o).subject, ex::config_names(o).layers, " = ", config.layers,
                ": a model needs at least one block");
  const optimus::pipeline::Schedule& schedule = setup.schedule;
  optimus::pipeline::check_layers(config.layers, schedule.stages, schedule.chunks);
  const std::int64_t m = schedule.micro_batches, q = setup.run.layout.q();
  OPTIMUS_CHECK(setup.batch % (m * q) == 0, "--batch ", setup.batch, " in ", m,
                " micro-batches of whole sequences divisible by q = ", q, " (the batch must be a multiple of ", m * q,
                ")");
  s.run = s.resume ? s.resumed.state.run : optimus::checkpoint::shared_run_id(world);
  optimus::all_or_throw({&world}, [&] {
    if (world.rank() != 0 || s.saving.dir.empty()) return;
    s.taken.emplace(optimus::checkpoint::SaveDirectory::open(
        s.saving.dir, {.run = s.run, .resumed_step = s.resume ? std::optional(s.resumed.state.step) : std::nullopt}));
  });
  // A masked LM's data (an encoder's: --arch bert, or its checkpoint), its options checked against the model.
  setup.masking = ex::masking_of(o, config, setup.corpus,
                                 s.resume ? s.resumed.state.extra : std::map<std::string, std::string>{});
  if (setup.masking) {
    OPTIMUS_CHECK(!o.has("sample") || o.integer("sample", 0) == 0, "--sample ", o.integer("sample", 0), ": a masked "
                  "LM (", family_name(config.block), " blocks) does not generate text; give --sample 0 or none");
    OPTIMUS_CHECK(setup.seq >= ex::kShortestMaskedSequence, "--seq ", setup.seq, " cannot hold a masked LM's "
                  "[CLS] A [SEP] B [SEP] (at least ", ex::kShortestMaskedSequence, ")");
  }
  for (const ex::Tokens* t : {&setup.corpus.train, &setup.corpus.valid}) {
    OPTIMUS_CHECK(t->size() >= static_cast<std::size_t>(setup.seq) + 1, "the ",
                  t == &setup.corpus.train ? "training" : "held-out", " tokens (", t->size(),
                  ") are fewer than one sequence of ", setup.seq, " plus its target");
  }
  return s;
}


Trained build(optimus::Communicator& world, const optimus::cli::Options& o, Setup& setup, const Places& places,
              const Start& s, const ex::Placement& where) {
  optimus::plan::Layout& layout = setup.run.layout;
  const optimus::GptConfig& config = setup.config;
  if (!setup.planned) layout.recompute.assign(static_cast<std::size_t>(config.layers), setup.recompute);
  const optimus::Grid& grid = places.training->grid();
  const optimus::pipeline::Schedule& schedule = setup.schedule;
  // What the run will need on this host, before the first large allocation (memory_check.hpp): the model as laid
  // out, in f32 (activations saved in bf16 under --gemm bf16), and the first step's fp64 check.
  ex::check_host_memory(world, layout, ex::workload_of(setup), ex::checked_layers(config, schedule),
                        grid.device() != nullptr);
  ex::check_first_step(world, *places.host, setup, schedule);
  const optimus::AdamWConfig adam{.lr = setup.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                  .max_grad_norm = 1.0};
  const std::string data = o.has("data") ? o.text("data", "") : o.text("text", "/usr/share/common-licenses/GPL-3");
  ex::Persistence persistence{
      .init = o.has("init") ? std::optional(o.text("init", "")) : std::nullopt,
      .init_format = s.init_format,
      .resume = s.resume,
      .saving = s.saving,
      .taken = s.taken ? &*s.taken : nullptr,
      .run_state = {.step = 0,
                    .run = s.run,
                    .extra = {{"steps", std::to_string(setup.steps)},
                              {"lr", ex::format_exact(setup.lr)},
                              {"global_batch", std::to_string(setup.batch * grid.dp())},
                              {"seq", std::to_string(setup.seq)},
                              {o.has("data") ? "data" : "text", data},
                              {"characters", ex::characters_record(setup.corpus.chars)}}}};
  if (setup.masking) {
    const std::map<std::string, std::string> recorded = s.resume ? s.resumed.state.extra
                                                                 : std::map<std::string, std::string>{};
    persistence.run_state.extra.merge(ex::masking_record(*setup.masking, ex::specials_in_data(o, recorded)));
  }
  Trained t{.model = optimus::plan::build_any_gpt<float>(*places.training, config, layout),
            .optimizer = nullptr, .trainee = {}, .first_step = 1};
  t.trainee = ex::trainee_of(t.model, setup.batch);
  std::visit(
      [&](auto& model) {
        model->set_execution({.order = setup.run.order, .jitter = 0});
        t.optimizer = std::make_unique<optimus::AdamW<float>>(
            model->place(), model->parameters(),
            optimus::AdamWOptions{.config = adam, .offload = setup.run.optimizer, .norm_order = model->norm_order()});
        const ex::Restored restored = ex::restore(*model, *t.optimizer, persistence, setup.steps, world);
        t.first_step = restored.first_step;
        t.trainee.save = restored.save;
      },
      t.model);
  t.trainee.optimizer = t.optimizer.get();
  if (const std::optional<ex::StopFault> fault = ex::stop_fault_from_environment()) {  // a test hook (stop_fault.hpp)
    t.trainee.train_step = [step = t.trainee.train_step, fault, rank = world.rank(), in_process = where.in_process](
                               const Batch& batch, std::uint64_t n) {
      ex::stop_if_asked(fault, rank, static_cast<int>(n), true, in_process);
      const double loss = step(batch, n);
      ex::stop_if_asked(fault, rank, static_cast<int>(n), false, in_process);
      return loss;
    };
  }
  if (o.has("skip-nonfinite")) t.optimizer->set_nonfinite(optimus::NonFinite::skip);
  return t;
}

void export_model(const optimus::cli::Options& o, const Setup& setup, const Start& s, Trained& t, bool root) {
  const std::string file = o.text("export", "");
  const optimus::GptConfig& config = setup.config;
  const bool llmc = file.ends_with(".bin");
  const std::string blocks = family_name(config.block);  // check_export_target refused the others
  const bool bert_dir = !llmc && blocks == "bert", llama_dir = !llmc && blocks == "llama";
  const std::uint64_t shard_bytes = std::uint64_t{5} << 30;              // transformers' default, 5 GiB
  // A Llama initialized from a file keeps the file's context in config.json (its training sequences may be shorter).
  const std::int64_t context =
      s.init_format == ex::InitFormat::hf_llama ? std::max(config.max_seq, s.init_context) : config.max_seq;
  std::visit(
      [&](auto& model) {
        if (llmc) optimus::checkpoint::export_llmc(file, *model);
        else if (llama_dir) optimus::checkpoint::export_hf_llama(file, *model, shard_bytes, context);
        else if (bert_dir) optimus::checkpoint::export_hf_bert(file, *model, shard_bytes);
        else optimus::checkpoint::export_hf(file, *model);
      },
      t.model);
  if (root) {
    std::printf("  exported %s (%s)\n", file.c_str(),
                llmc        ? "llm.c"
                : llama_dir ? "Hugging Face Llama directory"
                : bert_dir  ? "Hugging Face BERT directory"
                            : "Hugging Face GPT-2 safetensors");
  }
}

double held_out_loss(const Setup& setup, const Grid& grid, const Trainee& trainee) {
  Batch batch;
  double loss = 0;
  const int batches = 8;
  for (int k = 0; k < batches; ++k) {
    draw_step(setup, setup.corpus.valid, setup.config.seed + 1, static_cast<std::uint64_t>(k), grid.dp_index(),
              grid.dp(), batch);
    loss += trainee.evaluate(batch) / batches;
  }
  return loss;
}

}  // namespace optimus::apps
