// A base for test decorators: a communicator that passes every operation to the one it wraps, calling before_post()
// first and handing the request of each non-blocking operation to wrap(). Sub-communicators from split() are
// decorated by decorate(), so a Grid built on a decorator decorates every collective of every rank.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

class ForwardingCommunicator : public Communicator {
 public:
  bool takes_buffers_on(Device device) const override { return inner_->takes_buffers_on(device); }
  bool needs_progress_calls() const override { return inner_->needs_progress_calls(); }
  bool matches_tags() const override { return inner_->matches_tags(); }
  std::vector<int> world_ranks() const override { return inner_->world_ranks(); }

 protected:
  // inner: the communicator wrapped; owned: the same when this decorator owns it (a split's child), else null.
  ForwardingCommunicator(Communicator* inner, std::unique_ptr<Communicator> owned)
      : Communicator(inner->rank(), inner->size(), inner->job()), inner_(inner), owned_(std::move(owned)) {}

  Communicator& inner() const { return *inner_; }
  virtual void before_post() {}
  virtual Request wrap(Request request) { return request; }
  // The decorator of a child split from the wrapped communicator.
  virtual std::unique_ptr<Communicator> decorate(std::unique_ptr<Communicator> child) = 0;

  Request post(const Operation& operation, Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->start(operation, Sync::blocking).wait(), Request{});
    return wrap(inner_->start(operation, Sync::nonblocking));
  }
  std::unique_ptr<Communicator> do_split(int color, int key) override { return decorate(inner_->split(color, key)); }

 private:
  Communicator* inner_;
  std::unique_ptr<Communicator> owned_;
};

}  // namespace optimus::test
