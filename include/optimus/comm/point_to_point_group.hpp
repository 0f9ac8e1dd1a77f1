// The sends and receives a device collectives' user gathers between group_start and group_end (NCCL's
// ncclGroupStart/End), on one stream: the bookkeeping the collectives that run on the host (staged ones,
// comm/staged_collectives.hpp; the simulated device's, sim/collectives.hpp) share. `Op` is the implementation's own
// record of an operation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "optimus/core/device_runtime.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

template <class Op>
class PointToPointGroup {
 public:
  // `who` names the collectives in messages ("staged collectives").
  explicit PointToPointGroup(std::string who) : who_(std::move(who)) {}

  bool open() const { return open_; }
  void start() {
    OPTIMUS_CHECK(!open_, who_, ": group_start inside a group");
    open_ = true;
  }
  // An operation of the open group, queued on `stream` as the group's others are.
  void add(Op op, DeviceStream& stream) {
    OPTIMUS_CHECK(stream_ == nullptr || stream_ == &stream, who_, ": a group's operations must share one stream");
    stream_ = &stream;
    ops_.push_back(std::move(op));
  }
  // Closes the group: its operations, and their stream (null where there are none).
  std::pair<std::vector<Op>, DeviceStream*> end() {
    OPTIMUS_CHECK(open_, who_, ": group_end without group_start");
    open_ = false;
    return {std::exchange(ops_, {}), std::exchange(stream_, nullptr)};
  }

 private:
  std::string who_;
  bool open_ = false;
  std::vector<Op> ops_;
  DeviceStream* stream_ = nullptr;
};

}  // namespace optimus
