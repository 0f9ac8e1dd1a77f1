// train_gpt's memory check (memory_check.hpp).
#include "memory_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/error.hpp"
#include "optimus/plan/memory_model.hpp"

namespace optimus::apps {
namespace {

// The first number in `path` (a cgroup file: "max" or bytes), or none.
std::optional<std::uint64_t> number_in(const char* path) {
  std::ifstream in(path);
  std::uint64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// Which of `world`'s ranks run on this host (by host name): how many, and whether rank 0 is one of them.
struct HostShare {
  int ranks = 0;
  bool has_rank_0 = false;
};

HostShare this_host(Communicator& world) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const double mine = static_cast<double>(std::hash<std::string>{}(name) & 0xffffffffu);  // exact in a double
  std::vector<double> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&mine, all.data(), 1, DType::f64);
  return {.ranks = static_cast<int>(std::count(all.begin(), all.end(), mine)), .has_rank_0 = all[0] == mine};
}

// A rank's host bytes under `layout`: where there is no device, everything it holds (0 for a layout the memory model
// does not describe: the check is a guard, not a gate the run's own checks would not raise).
std::uint64_t host_bytes(const plan::Layout& layout, const plan::Workload& workload, bool has_device) {
  if (!plan::shape_error(layout, workload).empty()) return 0;
  const plan::MemoryPrediction p = plan::predict_memory(layout, workload);
  return p.host.total() + (has_device ? 0 : p.device.total());
}

std::string gib(std::uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1u << 30) << " GiB";
  return out.str();
}

}  // namespace

std::uint64_t host_memory_available() {
  std::uint64_t available = UINT64_MAX;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") available = kib * 1024;
    meminfo.ignore(64, '\n');
  }
  const auto limit = number_in("/sys/fs/cgroup/memory.max"), used = number_in("/sys/fs/cgroup/memory.current");
  if (limit && used) available = std::min(available, *limit > *used ? *limit - *used : 0);
  return available;
}

void check_host_memory(Communicator& world, const plan::Layout& training, const plan::Workload& workload,
                       std::int64_t check_layers, bool has_device) {
  plan::Layout check = training;
  check.offload = Offload::none;
  check.recompute.assign(static_cast<std::size_t>(check_layers), Recompute::none);
  plan::Workload check_workload = workload;
  check_workload.config.layers = check_layers;
  check_workload.element_bytes = check_workload.saved_bytes = 8;
  const HostShare here = this_host(world);
  const auto ranks = static_cast<std::uint64_t>(here.ranks);
  const std::uint64_t train = host_bytes(training, workload, has_device);
  plan::Layout whole = check;  // the reference: the check's model unsharded on one rank
  whole.tensor = plan::TensorParallel::two_d;
  whole.tp = whole.dp = whole.pp = whole.chunks = whole.micro_batches = 1;
  whole.offload = Offload::none;
  const std::uint64_t reference = here.has_rank_0 ? host_bytes(whole, check_workload, false) : 0;
  const std::uint64_t checking = host_bytes(check, check_workload, has_device);
  const std::uint64_t need = std::max(train * ranks, checking * ranks + reference);
  const std::uint64_t available = host_memory_available();
  all_or_throw({&world}, [&] {  // one verdict for every rank: the first short host's
    OPTIMUS_CHECK(need <= available, "not enough memory: ",
                  here.ranks == 1 ? std::string("the rank") : "the " + std::to_string(here.ranks) + " ranks",
                  " on this host need", here.ranks == 1 ? "s" : "", " about ",
                  gib(need), " (", gib(train), " each to train, by the planner's memory model; the first step's fp64 "
                  "check ", gib(checking), " each", here.has_rank_0 ? " and " + gib(reference) + " more on rank 0" : "",
                  ") and it has ", gib(available), " available: use more hosts, a smaller model or batch, "
                  "micro-batches, recomputation or offload");
  });
}

}  // namespace optimus::apps
