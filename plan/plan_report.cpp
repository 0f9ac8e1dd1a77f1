// optimus-plan's table and JSON (plan_report.hpp).
#include "optimus/plan/plan_report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace optimus::plan {
namespace {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string gib(std::uint64_t bytes) { return fmt("%.3f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024)); }
std::string mib(std::uint64_t bytes) { return fmt("%.1f", static_cast<double>(bytes) / (1024.0 * 1024)); }

nlohmann::json kinds(const KindBytes& b) {
  return {{"parameters", b.parameters},
          {"gradients", b.gradients},
          {"optimizer", b.optimizer},
          {"activations", b.activations},
          {"workspace_estimate", b.workspace}};
}

}  // namespace

std::vector<std::string> assumptions(const Request& r) {
  const Workload& w = r.workload;
  const Cluster& c = r.cluster;
  std::vector<std::string> out;
  std::ostringstream os;
  os << "# optimus-plan: GPT of " << family_name(w.config.block) << " blocks h=" << w.config.hidden
     << " heads=" << w.config.heads << " kv_heads=" << w.config.kv_heads() << " layers=" << w.config.layers
     << " ffn=" << w.config.ffn << " vocab=" << w.config.vocab << " (" << w.config.parameter_count()
     << " parameters), global batch " << w.global_batch << " x seq "
     << w.seq << ", " << w.element_bytes << "-byte values, activations saved in " << w.saved_bytes << " bytes";
  out.push_back(os.str());
  os.str("");
  os << "# cluster: " << c.gpus << " GPUs, " << c.gpus_per_node << " per node, " << gib(c.device_memory)
     << " GiB device memory and " << gib(c.host_memory) << " GiB host memory per rank; " << c.source;
  out.push_back(os.str());
  os.str("");
  os.precision(4);
  os << "# rates per rank: GEMM " << c.gemm_flops / 1e12 << " TFLOP/s, element-wise " << c.element_rate / 1e9
     << " G elements/s (transcendental) and " << c.stream_rate / 1e9 << " (streaming), AdamW " << c.optimizer_rate / 1e9
     << " G parameters/s, intra-node " << c.intra.bandwidth / 1e9 << " GB/s + " << c.intra.latency * 1e6
     << " us per message, inter-node " << c.inter.bandwidth / 1e9 << " GB/s + " << c.inter.latency * 1e6
     << " us, host link " << c.host_link / 1e9 << " GB/s; " << c.cores << " ranks compute at once";
  out.push_back(os.str());
  out.push_back(
      "# memory: memory_model.hpp (the trackers' formulas; workspace an estimate); time: time_model.hpp "
      "(GEMM flops / rate + element-wise work / rate + alpha-beta traffic, " +
      fmt("%.0f", 100 * c.overlap) +
      "% of 2D's SUMMA traffic hidden, 1D's backward all-reduces behind their weight-gradient GEMMs; "
      "pipelines by the schedule simulator; replicas' all-reduce and AdamW after the pipeline" +
      (c.call_seconds > 0 ? "; with ranks sharing cores, " + fmt("%.2f", 1e6 * c.call_seconds) +
                                " us per collective call and participant, the calls counted by running each layout's "
                                "step once"
                          : std::string()) +
      ")");
  out.push_back(
      "# recomputation per block: Galvatron's dynamic programme under the memory left; offload tried only "
      "where the layout needs memory; 'runs' names what Optimus lacks to run a plan, '-' when it runs it");
  out.push_back(
      "# columns: step_ms predicted; dev_MiB = params/grads/optimizer/activations/workspace on the device "
      "(stage with the most); host_MiB the same on the host; intra_MB/inter_MB received per rank per step");
  return out;
}

std::vector<std::string> table(const Result& result, std::size_t rows) {
  std::vector<std::string> out;
  char line[512];
  std::snprintf(line, sizeof line, "%-4s %-62s %9s %6s %-40s %-32s %9s %9s  %-s", "#", "plan", "step_ms", "bubble",
                "dev_MiB p/g/o/a/w", "host_MiB p/g/o/a", "intra_MB", "inter_MB", "why / runs");
  out.push_back(line);
  for (std::size_t i = 0; i < std::min(rows, result.plans.size()); ++i) {
    const Plan& p = result.plans[i];
    const KindBytes& d = p.memory.device;
    const KindBytes& h = p.memory.host;
    const std::string dev = mib(d.parameters) + "/" + mib(d.gradients) + "/" + mib(d.optimizer) + "/" +
                            mib(d.activations) + "/" + mib(d.workspace);
    const std::string host =
        mib(h.parameters) + "/" + mib(h.gradients) + "/" + mib(h.optimizer) + "/" + mib(h.activations);
    std::snprintf(line, sizeof line, "%-4zu %-62s %9.3f %6.3f %-40s %-32s %9.1f %9.1f  %s%s%s", i + 1,
                  describe(p.layout).c_str(), 1e3 * p.time.seconds, p.time.bubble, dev.c_str(), host.c_str(),
                  static_cast<double>(p.time.traffic.intra) / 1e6, static_cast<double>(p.time.traffic.inter) / 1e6,
                  p.why.c_str(), p.runnable.empty() ? "" : "; not runnable yet: ", p.runnable.c_str());
    out.push_back(line);
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(3, result.rejected.size()); ++i) {
    out.push_back("# rejected: " + describe(result.rejected[i].layout) + ": " + result.rejected[i].why);
  }
  if (result.rejected.size() > 3) {
    out.push_back("# ... and " + std::to_string(result.rejected.size() - 3) + " more rejected (every one in the JSON)");
  }
  return out;
}

std::string to_json(const Request& r, const Result& result) {
  nlohmann::ordered_json j;
  const Workload& w = r.workload;
  j["workload"] = {{"hidden", w.config.hidden},        {"heads", w.config.heads},
                   {"layers", w.config.layers},        {"ffn", w.config.ffn},
                   {"vocab", w.config.vocab},          {"max_seq", w.config.max_seq},
                   {"global_batch", w.global_batch},   {"seq", w.seq},
                   {"element_bytes", w.element_bytes}, {"saved_bytes", w.saved_bytes}};
  const Cluster& c = r.cluster;
  j["cluster"] = {{"gpus", c.gpus},
                  {"gpus_per_node", c.gpus_per_node},
                  {"device_memory", c.device_memory},
                  {"host_memory", c.host_memory},
                  {"has_device", c.has_device},
                  {"intra_bandwidth", c.intra.bandwidth},
                  {"intra_latency", c.intra.latency},
                  {"inter_bandwidth", c.inter.bandwidth},
                  {"inter_latency", c.inter.latency},
                  {"gemm_flops", c.gemm_flops},
                  {"element_rate", c.element_rate},
                  {"stream_rate", c.stream_rate},
                  {"optimizer_rate", c.optimizer_rate},
                  {"host_link", c.host_link},
                  {"overlap", c.overlap},
                  {"cores", c.cores},
                  {"source", c.source}};
  j["enumerated"] = result.enumerated;
  j["pruned_states"] = result.pruned_states;
  j["pruned_memory"] = result.pruned_memory;
  j["pruned_offload"] = result.pruned_offload;
  j["not_runnable"] = result.not_runnable;
  if (!result.infeasible.empty()) j["infeasible"] = result.infeasible;
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (const Plan& p : result.plans) {
    const Layout& l = p.layout;
    nlohmann::ordered_json recompute = nlohmann::ordered_json::array();
    for (Recompute x : l.recompute) recompute.push_back(name_of(x));
    plans.push_back({{"layout", describe(l)},
                     {"tensor", name_of(l.tensor)},
                     {"tp", l.tp},
                     {"q", l.q()},
                     {"dp", l.dp},
                     {"pp", l.pp},
                     {"schedule", std::string(pipeline::name_of(l.schedule))},
                     {"chunks", l.chunks},
                     {"micro_batches", l.micro_batches},
                     {"offload", name_of(l.offload)},
                     {"recompute", recompute},
                     {"step_seconds", p.time.seconds},
                     {"critical_seconds", p.time.critical},
                     {"work_seconds", p.time.work},
                     {"calls_seconds", p.time.calls},
                     {"pipeline_seconds", p.time.pipeline},
                     {"bubble", p.time.bubble},
                     {"tensor_comm_seconds", p.time.tensor_comm},
                     {"data_parallel_seconds", p.time.data_parallel},
                     {"optimizer_seconds", p.time.optimizer},
                     {"offload_seconds", p.time.offload},
                     {"recompute_seconds", p.recompute_seconds},
                     {"device_bytes", kinds(p.memory.device)},
                     {"host_bytes", kinds(p.memory.host)},
                     {"peak_stage", p.memory.stage},
                     {"intra_bytes", p.time.traffic.intra},
                     {"inter_bytes", p.time.traffic.inter},
                     {"host_copy_bytes", p.time.traffic.host},
                     {"runnable", p.runnable.empty()},
                     {"missing", p.runnable},
                     {"why", p.why}});
  }
  j["plans"] = plans;
  nlohmann::ordered_json rejected = nlohmann::ordered_json::array();
  for (const Rejected& x : result.rejected) rejected.push_back({{"layout", describe(x.layout)}, {"why", x.why}});
  j["rejected"] = rejected;
  return j.dump(2) + "\n";
}

}  // namespace optimus::plan
