// optimus-sweep: the members of a sweep trained at once, for model selection (HYDRA; docs/design.md, "Sweeps").
//
//   optimus-sweep SWEEP.json [--in-process N] [--q Q] [--scheduler lrtf|round-robin|model-parallel|pipeline]
//                            [--device cpu|sim|cuda] [--device-memory SIZE] [--device-bandwidth GB/s]
//                            [--offload none|spill|spill+activations] [--in-flight K]
//                            [--record FILE.json] [--resume] [--timeout SECONDS]
//
// SWEEP.json: {"members": [{"name": "lr3e-4", "options": "--layers 4 --hidden 64 --lr 3e-4 --steps 100"}, ...]}, each
// member's options train_gpt's (optimus/sweep/sweep_file.hpp), checked before any training with train_gpt's table; the
// slots' options (--in-process, --device, --q, --pp, ...) are the sweep's. The slots are the ranks (--in-process N, or
// the MPI world), each a q x q grid of them (--q, default 1: D = ranks / q^2 slots); each member is a pipeline of one
// stage per slot (--q Q --pp D) and trains bitwise as `train_gpt OPTIONS --q Q` does alone, whatever the scheduler.
// Each member prints its own progress lines, after its name; at the end a table of the members by held-out loss, and
// --record's JSON. A member whose loss or gradient norm is not finite stops alone (the exit status is then 1).
// --offload spill keeps each member's blocks in host memory (train_gpt's --offload spill), their device buffers taken
// only while a step is in flight, so that members take turns with the slot's memory; --in-flight K bounds how many do
// at once (on a simulated device, by default, as many as its memory holds: device_memory.hpp). --resume: each member
// that saves (--save DIR) resumes from its newest checkpoint, and trains on bitwise as if never stopped; one that had
// finished is exported and evaluated again (a sweep killed at any point is run again with --resume). The members' and
// the sweep's paths are checked against each other before any training (sweep_members.hpp); the loop runs under the
// watchdog (--timeout); a member's failed export is its own (exit status 1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <optimus/optimus.hpp>

#include "program_options.hpp"
#include "optimus/core/host_allocator.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/sweep/runtime.hpp"
#include "optimus/sweep/sweep_file.hpp"
#include "placement.hpp"
#include "sweep_member_run.hpp"
#include "sweep_members.hpp"
#include "device_memory.hpp"

namespace {

namespace ex = optimus::apps;
namespace sweep = optimus::sweep;

// What the slots set for every member: one rank per slot, a pipeline of one stage per slot; the pipeline baseline's
// members 1F1B over their own micro-batches.
std::vector<std::string> slot_words(const optimus::cli::Options& o, int slots, sweep::Scheduler scheduler) {
  std::vector<std::string> words{"--q", std::to_string(o.integer("q", 1))};
  if (o.has("offload")) words.insert(words.end(), {"--offload", o.text("offload", "")});
  if (o.has("gemm")) words.insert(words.end(), {"--gemm", o.text("gemm", "")});
  if (slots == 1) return words;
  words.insert(words.end(), {"--pp", std::to_string(slots), "--schedule",
                             scheduler == sweep::Scheduler::pipeline ? "1f1b" : "gpipe"});
  return words;
}

// --resume: a member that saves (--save DIR) resumes from DIR's newest complete checkpoint — one that had finished is
// loaded from its last one, trains nothing, and is exported and evaluated again —; one without a checkpoint yet starts
// afresh.
std::optional<std::string> resume_from(const optimus::cli::Options& o, const ex::SweepMember& m) {
  if (!o.has("resume") || !m.options.has("save")) return std::nullopt;
  const std::string dir = m.options.text("save", "");
  if (!std::filesystem::is_directory(dir) || optimus::checkpoint::complete_checkpoints(dir).empty()) return std::nullopt;
  return dir;
}

// Runs `step` of a member's setting up; its optimus::Error (the same on every rank) names the file and the member.
void naming(const std::string& file, const std::string& member, const std::function<void()>& step) {
  try {
    step();
  } catch (const optimus::Error& e) {
    OPTIMUS_FAIL(file, ": member '", member, "': ", e.what());
  }
}

// The members' table by held-out loss (the stopped ones last), on rank 0.
void print_table(std::vector<ex::MemberOutcome> outcomes) {
  std::stable_sort(outcomes.begin(), outcomes.end(), [](const ex::MemberOutcome& a, const ex::MemberOutcome& b) {
    return a.stopped.empty() != b.stopped.empty() ? a.stopped.empty() : a.held_out < b.held_out;
  });
  std::size_t width = 6;
  for (const ex::MemberOutcome& m : outcomes) width = std::max(width, m.name.size());
  std::printf("members by held-out loss:\n  %4s  %-*s  %9s  %9s  %11s\n", "rank", static_cast<int>(width), "member",
              "held-out", "last loss", "steps");
  int rank = 0;
  // A loss of none (a member stopped or finished before this run's first interval) is "-".
  const auto loss = [](double value) {
    char text[32];
    if (std::isfinite(value)) std::snprintf(text, sizeof text, "%9.4f", value);
    else std::snprintf(text, sizeof text, "%9s", "-");
    return std::string(text);
  };
  for (const ex::MemberOutcome& m : outcomes) {
    const std::string steps = std::to_string(m.resumed + m.trained) + "/" + std::to_string(m.steps);
    const std::string why = !m.stopped.empty()         ? "  stopped: " + m.stopped
                            : !m.export_failed.empty() ? "  export failed: " + m.export_failed
                                                       : "";
    std::printf("  %4d  %-*s  %s  %s  %11s%s\n", ++rank, static_cast<int>(width), m.name.c_str(),
                loss(m.held_out).c_str(), loss(m.last_loss).c_str(), steps.c_str(), why.c_str());
  }
}

void write_record(const std::string& file, const std::vector<ex::MemberOutcome>& outcomes, int slots,
                  sweep::Scheduler scheduler, double seconds) {
  nlohmann::json members = nlohmann::json::array();
  for (const ex::MemberOutcome& m : outcomes) {
    members.push_back({{"name", m.name}, {"parameters", m.parameters}, {"steps", m.steps}, {"trained", m.trained},
                       {"skipped", m.skipped}, {"resumed_at", m.resumed}, {"last_loss", m.last_loss},
                       {"held_out_loss", m.held_out}, {"stopped", m.stopped}, {"export_failed", m.export_failed}});
  }
  const nlohmann::json record{{"slots", slots}, {"scheduler", std::string(sweep::name_of(scheduler))},
                              {"seconds", seconds}, {"members", members}};
  optimus::write_file(file, record.dump(2) + "\n");  // atomic: a temporary file renamed over it
}

// Step 1, read: the sweep file's members (train_gpt's checks, before any work) and the slots.
struct Sweep {
  std::vector<ex::SweepMember> members;
  sweep::Scheduler scheduler;
  int q, slots, in_flight;
};

Sweep read(const optimus::Communicator& world, const optimus::cli::Options& o, const ex::Placement& where,
           const std::string& file) {
  Sweep s{.members = ex::check_members(sweep::read_sweep_file(file), file,
                                       o.has("record") ? std::optional(o.text("record", "")) : std::nullopt),
          .scheduler = sweep::parse_scheduler(o.text("scheduler", "lrtf")),
          .q = static_cast<int>(o.integer("q", 1)),
          .slots = 0,
          .in_flight = static_cast<int>(o.integer("in-flight", 0))};
  OPTIMUS_CHECK(world.size() % (s.q * s.q) == 0, world.size(), " ranks are not slots of --q ", s.q, " x ", s.q,
                " ranks each");
  // The sweep's own options, before any member's (a member was blamed for the sweep's --offload).
  OPTIMUS_CHECK(!o.has("offload") || where.choice.kind != optimus::Device::cpu, "--offload ", o.text("offload", ""),
                " keeps the members' blocks in host memory between their steps on a device: it needs --device sim or "
                "cuda (on the CPU everything is in host memory already)");
  for (const ex::SweepMember& m : s.members) {
    OPTIMUS_CHECK(!o.has("resume") || !m.options.has("resume") || !m.options.has("save"), file, ": member '", m.name,
                  "' resumes from --resume ", m.options.text("resume", ""), " itself, and the sweep's --resume would "
                  "resume it from its --save directory ", m.options.text("save", ""), ": give one of them");
  }
  s.slots = world.size() / (s.q * s.q);
  // Across processes, a device's exchanges are its own collectives, ordered on the one stream all of a slot's members
  // share, where a send waits for its receive: members interleaved there could each wait behind the other's message.
  OPTIMUS_CHECK(where.in_process || where.choice.kind == optimus::Device::cpu || s.slots == 1 ||
                    s.scheduler == sweep::Scheduler::model_parallel || s.scheduler == sweep::Scheduler::pipeline ||
                    s.in_flight == 1,
                s.slots, " slots on devices in separate processes train one member at a time "
                "(--in-flight 1, or --scheduler model-parallel or pipeline): interleaved members would wait on each "
                "other's device messages on the slots' one stream; --in-process ranks exchange through the host and "
                "interleave");
  return s;
}

// Step 2, place: this slot's device, which its members share (its memory pool: what one member's step frees the next
// one takes). Declared before the members, which live on it.
struct SlotDevice {
  std::unique_ptr<optimus::DeviceRuntime> own;  // this process's (one rank per process)
  std::unique_ptr<optimus::RankDevice> rank;
};

ex::Placement place(optimus::Communicator& world, const optimus::cli::Options& o, const ex::Placement& where,
                    SlotDevice& device) {
  ex::Placement here{.choice = where.choice, .in_process = where.in_process, .shared = nullptr, .slot = nullptr};
  if (where.choice.kind == optimus::Device::cpu) return here;
  if (!where.in_process) device.own = ex::open_device(where, world);
  device.rank = ex::open_rank_device(where.in_process ? *where.shared : *device.own,
                                     o.text("gemm", "f32") == "bf16" ? optimus::ops::GemmMath::bf16
                                                                     : optimus::ops::GemmMath::f32,
                                     where, world);
  here.slot = device.rank.get();
  return here;
}

// Step 3, build: each member's options with the slots' words, its own world (split from the sweep's) and its run, in
// member order on every rank; every member read and started (its shape final: --init's, --resume's), and all of them
// checked against the slots' device memory, before any is built. Returns the most members in flight at once
// (LoopOptions::in_flight): --in-flight's, or as many as the devices hold (device_memory.hpp).
struct Members {
  std::deque<optimus::cli::Options> options;  // a deque: each run keeps a reference to its member's
  std::vector<std::unique_ptr<optimus::Communicator>> worlds;
  std::vector<std::unique_ptr<ex::MemberRun>> runs;
};

int build(optimus::Communicator& world, const optimus::cli::Options& o, const Sweep& s, const ex::Placement& here,
          const std::string& file, Members& out) {
  std::vector<std::string> names;
  for (const ex::SweepMember& m : s.members) {
    std::vector<std::string> words = slot_words(o, s.slots, s.scheduler);
    const std::optional<std::string> from = resume_from(o, m);
    if (from) words.insert(words.end(), {"--resume", *from});
    out.options.push_back(ex::member_options({.name = m.name, .words = m.words}, words, file));
    out.worlds.push_back(world.split(0, world.rank()));
    names.push_back(m.name);
    naming(file, m.name, [&] {
      ex::Setup setup = ex::read_setup(*out.worlds.back(), out.options.back(), here);
      setup.finished_resume = from.has_value();  // a member that had finished is built again, trains nothing
      out.runs.push_back(std::make_unique<ex::MemberRun>(*out.worlds.back(), m.name, out.options.back(), here,
                                                         std::move(setup)));
    });
  }
  int in_flight = s.in_flight;
  if (here.choice.kind == optimus::Device::sim) {
    std::vector<ex::MemberDeviceBytes> bytes;
    for (const auto& r : out.runs) bytes.push_back(ex::member_device_bytes(r->setup()));
    in_flight = ex::admitted_in_flight(file, names, bytes,
                                       {.capacity = here.choice.sim_capacity, .slots = s.slots, .slot_ranks = s.q * s.q,
                                        .shared = here.in_process, .per_rank = here.slot->gemm().workspace_bytes()},
                                       s.in_flight);
    if (world.rank() == 0 && in_flight != s.in_flight) {
      std::printf("  in flight: at most %d of the %zu members at once (what the slots' devices hold)\n", in_flight,
                  s.members.size());
    }
  }
  for (std::size_t k = 0; k < s.members.size(); ++k) {
    naming(file, names[k], [&] { out.runs[k]->build(); });
    if (world.rank() == 0) {
      std::printf("  [%s] %lld parameters, %d steps\n", names[k].c_str(),
                  static_cast<long long>(out.runs[k]->outcome().parameters), out.runs[k]->outcome().steps);
    }
  }
  return in_flight;
}

// Step 5, report: every member's export and held-out loss (collective), then on rank 0 the table and the record.
// Returns the exit status: 1 where a member stopped early or its export failed.
int report(const optimus::cli::Options& o, const Sweep& s, const Members& members, double seconds, bool root) {
  std::vector<ex::MemberOutcome> outcomes;
  for (const auto& r : members.runs) {
    r->finish();
    outcomes.push_back(r->outcome());
  }
  const auto stopped = std::count_if(outcomes.begin(), outcomes.end(),
                                     [](const ex::MemberOutcome& m) { return !m.stopped.empty(); });
  const auto failed = std::count_if(outcomes.begin(), outcomes.end(),
                                    [](const ex::MemberOutcome& m) { return !m.export_failed.empty(); });
  const int status = stopped + failed > 0 ? 1 : 0;
  if (!root) return status;
  std::printf("trained in %.2f s (max over slots)\n", seconds);
  print_table(outcomes);
  if (o.has("record")) write_record(o.text("record", ""), outcomes, s.slots, s.scheduler, seconds);
  if (stopped > 0) std::printf("%lld of %zu members stopped early\n", static_cast<long long>(stopped), outcomes.size());
  if (failed > 0) {
    std::printf("%lld of %zu members' exports failed\n", static_cast<long long>(failed), outcomes.size());
  }
  std::fflush(stdout);
  return status;
}

// One rank's part of the sweep, in its named steps. Returns the exit status.
int run(optimus::Communicator& world, const optimus::cli::Options& o, const ex::Placement& where,
        const std::string& file) {
  world.set_timeout(o.timeout());  // before the members' communicators: they inherit it
  const Sweep s = read(world, o, where, file);
  const bool root = world.rank() == 0;
  if (root) {
    std::printf("optimus-sweep: %zu members on %d slots of %d x %d ranks (%s, %s), scheduler %s\n", s.members.size(),
                s.slots, s.q, s.q, world.backend().c_str(), std::string(optimus::name_of(where.choice.kind)).c_str(),
                std::string(sweep::name_of(s.scheduler)).c_str());
  }
  SlotDevice device;
  const ex::Placement here = place(world, o, where, device);
  Members members;
  const int in_flight = build(world, o, s, here, file, members);
  if (root) std::fflush(stdout);
  // Step 4, train: the members' operations on the slots, by the scheduler.
  std::vector<sweep::MemberSteps*> steps;
  for (const auto& r : members.runs) steps.push_back(r.get());
  const auto begin = std::chrono::steady_clock::now();
  const std::unique_ptr<optimus::Communicator> slot_ranks = world.split(world.rank() / (s.q * s.q), world.rank());
  sweep::train_members(steps, {.scheduler = s.scheduler, .in_flight = in_flight}, world, *slot_ranks);
  const double seconds = world.all_reduce(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(), optimus::ReduceOp::max);
  return report(o, s, members, seconds, root);
}

}  // namespace

int main(int argc, char** argv) {
  optimus::retain_freed_host_memory();
  optimus::Process ctx(argc, argv);
  try {
    // The sweep file: the one word that is neither an option nor an option's value, before or among the options.
    const std::vector<optimus::cli::Spec> table = ex::optimus_sweep_options();
    std::vector<char*> words{argv[0]};
    std::vector<std::string> files;
    for (int a = 1; a < argc; ++a) {
      const std::string word = argv[a];
      const auto spec = std::find_if(table.begin(), table.end(), [&](const optimus::cli::Spec& s) {
        return word == "--" + s.name;
      });
      if (word.rfind("--", 0) != 0 && word != "-h") {
        files.push_back(word);
        continue;
      }
      words.push_back(argv[a]);
      if (spec != table.end() && spec->kind != optimus::cli::Kind::flag && a + 1 < argc) words.push_back(argv[++a]);
    }
    const optimus::cli::Options o(static_cast<int>(words.size()), words.data(), 1, table);
    OPTIMUS_CHECK(files.size() == 1, "optimus-sweep SWEEP.json [options]: give one sweep file",
                  files.empty() ? std::string(", not none") : ", not " + std::to_string(files.size()) + " ('" +
                                                                 files[0] + "', '" + files[1] + "', ...)");
    const std::string file = files[0];
    ex::Placement where{
        .choice = optimus::choose_device(o), .in_process = o.has("in-process"), .shared = nullptr, .slot = nullptr};
    return ex::run_ranks(ctx, o, where, "optimus-sweep",
                         [&](optimus::Communicator& world) { return run(world, o, where, file); });
  } catch (const optimus::cli::HelpRequested& help) {
    if (ctx.world().rank() == 0) std::printf("%s\n", help.what());
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("optimus-sweep", e);
  }
}
