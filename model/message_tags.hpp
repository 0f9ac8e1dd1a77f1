// Internal to the GPT (model/gpt.hpp): the tags of a training step's messages between stages.
#pragma once

#include "optimus/comm/communicator.hpp"
#include "optimus/core/error.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline {

// One tag per message of a step: the receiving virtual stage u, the micro-batch k and the direction; after them, the
// end of step's exchange of wte's gradient parts, and an exchanged end's partial sums (Gpt::begin_step).
inline int tag_of(const Schedule& s, int u, int k, bool gradient) {
  return (u * s.micro_batches + k) * 2 + (gradient ? 1 : 0);
}
inline int wte_tag(const Schedule& s) { return 2 * s.virtual_stages() * s.micro_batches; }
inline int sums_tag(const Schedule& s) { return wte_tag(s) + 1; }

// Throws (naming `who`) unless every tag of s is one a communicator takes (Communicator::kMaxTag: MPI's promise).
inline void check_message_tags(const char* who, const Schedule& s) {
  OPTIMUS_CHECK(sums_tag(s) <= Communicator::kMaxTag, who, ": ", s.micro_batches, " micro-batches on ",
                s.virtual_stages(), " virtual stages need more message tags than MPI promises (",
                Communicator::kMaxTag, ")");
}

}  // namespace optimus::pipeline
