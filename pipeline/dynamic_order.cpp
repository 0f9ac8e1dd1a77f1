// The rules of message-driven execution (dynamic_order.hpp).
#include "optimus/pipeline/dynamic_order.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "optimus/core/error.hpp"

namespace optimus::pipeline {

Order parse_order(std::string_view name) {
  if (name == "static") return Order::static_order;
  if (name == "dynamic") return Order::dynamic;
  OPTIMUS_FAIL("pipeline execution '", name, "' is not one of: static, dynamic");
}

std::string_view name_of(Order order) { return order == Order::dynamic ? "dynamic" : "static"; }

double jitter_draw(std::uint64_t step, int stage, std::size_t index) {
  // splitmix64 of the three, the top 53 bits as a fraction
  std::uint64_t z = step * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(stage) * 0xBF58476D1CE4E5B9ULL +
                    static_cast<std::uint64_t>(index) * 0x94D049BB133111EBULL + 0x2545F4914F6CDD1DULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

std::size_t DynamicOrder::class_of(const Op& op) const {
  switch (op.work) {
    case Work::forward: return 0;
    case Work::backward:
    case Work::backward_input: return 1;
    case Work::backward_weight: return 2;
  }
  return 0;
}

DynamicOrder::DynamicOrder(const Schedule& schedule, int stage) : schedule_(&schedule), stage_(stage) {
  OPTIMUS_CHECK(stage >= 0 && stage < schedule.stages && static_cast<int>(schedule.ops.size()) == schedule.stages,
                "pipeline dynamic order: stage ", stage, " of a schedule of ", schedule.stages, " stages");
  ops_ = &schedule.ops[static_cast<std::size_t>(stage)];
  const std::size_t n = ops_->size(), v = static_cast<std::size_t>(schedule.chunks);
  run_.assign(n, false);
  remaining_ = n;
  first_of_.assign(3 * v, n);
  own_.assign(n, n);
  first_backward_ = 0;
  while (first_backward_ < n && (*ops_)[first_backward_].work == Work::forward) ++first_backward_;
  std::map<std::tuple<Work, int, int>, std::size_t> index;  // (work, k, c) -> i
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = (*ops_)[i];
    index[{op.work, op.micro_batch, op.chunk}] = i;
    std::size_t& first = first_of_[class_of(op) * v + static_cast<std::size_t>(op.chunk)];
    if (first == n) first = i;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = (*ops_)[i];
    if (op.work == Work::forward) continue;
    const Work needs = op.work == Work::backward_weight ? Work::backward_input : Work::forward;
    const auto it = index.find({needs, op.micro_batch, op.chunk});
    OPTIMUS_CHECK(it != index.end(), "pipeline dynamic order: stage ", stage, " runs ", describe(schedule, op),
                  " without ", describe(schedule, Op{.work = needs, .micro_batch = op.micro_batch, .chunk = op.chunk}));
    own_[i] = it->second;
  }
}

bool DynamicOrder::allows(std::size_t i) const {
  const std::size_t n = ops_->size();
  if (i >= n || run_[i]) return false;
  const Op& op = (*ops_)[i];
  if (first_of_[class_of(op) * static_cast<std::size_t>(schedule_->chunks) + static_cast<std::size_t>(op.chunk)] != i) {
    return false;  // rule 1
  }
  if (own_[i] != n && !run_[own_[i]]) return false;  // rule 2
  return op.work != Work::forward || i < first_backward_;  // rule 3
}

std::vector<std::size_t> DynamicOrder::allowed() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < ops_->size(); ++i) {
    if (allows(i)) out.push_back(i);
  }
  return out;
}

void DynamicOrder::ran(std::size_t i) {
  OPTIMUS_CHECK(allows(i), "pipeline dynamic order: stage ", stage_, " may not run operation ", i,
                i < ops_->size() ? " (" + describe(*schedule_, (*ops_)[i]) + ")" : std::string(" (no such operation)"),
                " now");
  run_[i] = true;
  --remaining_;
  const Op& op = (*ops_)[i];
  const std::size_t v = static_cast<std::size_t>(schedule_->chunks), cls = class_of(op);
  std::size_t next = i + 1;
  while (next < ops_->size() &&
         (class_of((*ops_)[next]) != cls || (*ops_)[next].chunk != op.chunk)) {
    ++next;
  }
  first_of_[cls * v + static_cast<std::size_t>(op.chunk)] = next;
  while (first_backward_ < ops_->size() && (run_[first_backward_] || (*ops_)[first_backward_].work == Work::forward)) {
    ++first_backward_;
  }
}

std::vector<std::size_t> DynamicOrder::heads() const {
  std::vector<std::size_t> out;
  for (const std::size_t i : first_of_) {
    if (i < ops_->size()) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t DynamicOrder::first_not_run() const {
  std::size_t i = 0;
  while (i < run_.size() && run_[i]) ++i;  // (the lists are short: 2m v, or 3m)
  return i;
}

}  // namespace optimus::pipeline
