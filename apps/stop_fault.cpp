// train_gpt's stop hook (stop_fault.hpp).
#include "stop_fault.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "optimus/core/error.hpp"

namespace optimus::apps {

std::optional<StopFault> stop_fault_from_environment() {
  const char* text = std::getenv("OPTIMUS_TEST_STOP");
  if (text == nullptr || *text == '\0') return std::nullopt;
  StopFault fault;
  int used = 0;
  const std::string value = text;
  const bool parsed = std::sscanf(text, "%d:%d%n", &fault.rank, &fault.step, &used) == 2;
  const std::string rest = parsed ? value.substr(static_cast<std::size_t>(used)) : "";
  fault.fail = rest == ":fail";
  fault.at_start = rest == ":start";
  OPTIMUS_CHECK(parsed && (rest.empty() || fault.at_start || fault.fail) && fault.rank >= 0 && fault.step >= 1,
                "OPTIMUS_TEST_STOP is '", text,
                "', not RANK:STEP, RANK:STEP:start or RANK:STEP:fail (a world rank >= 0, a step >= 1)");
  return fault;
}

void stop_if_asked(const std::optional<StopFault>& fault, int world_rank, int step, bool at_start, bool in_process) {
  if (!fault || fault->rank != world_rank || fault->step != step || fault->at_start != at_start) return;
  OPTIMUS_CHECK(!fault->fail, "OPTIMUS_TEST_STOP: rank ", world_rank, " failed in step ", step,
                " (a test's fault)");
  if (!in_process) {
    std::raise(SIGSTOP);  // until the job is killed (or SIGCONT)
    return;
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // a thread cannot be stopped alone: it blocks
}

}  // namespace optimus::apps
