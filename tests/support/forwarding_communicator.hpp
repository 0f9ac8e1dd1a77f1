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

  Request post_broadcast(void* buf, std::size_t count, DType dtype, int root, Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->broadcast(buf, count, dtype, root), Request{});
    return wrap(inner_->ibroadcast(buf, count, dtype, root));
  }
  Request post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root,
                      Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->reduce(send, recv, count, dtype, op, root), Request{});
    return wrap(inner_->ireduce(send, recv, count, dtype, op, root));
  }
  Request post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                          Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->all_reduce(send, recv, count, dtype, op), Request{});
    return wrap(inner_->iall_reduce(send, recv, count, dtype, op));
  }
  Request post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->all_gather(send, recv, count, dtype), Request{});
    return wrap(inner_->iall_gather(send, recv, count, dtype));
  }
  Request post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                              Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->reduce_scatter(send, recv, count, dtype, op), Request{});
    return wrap(inner_->ireduce_scatter(send, recv, count, dtype, op));
  }
  Request post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag, Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->send(buf, count, dtype, dest, tag), Request{});
    return wrap(inner_->isend(buf, count, dtype, dest, tag));
  }
  Request post_recv(void* buf, std::size_t count, DType dtype, int source, int tag, Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->recv(buf, count, dtype, source, tag), Request{});
    return wrap(inner_->irecv(buf, count, dtype, source, tag));
  }
  Request post_barrier(Sync sync) override {
    before_post();
    if (sync == Sync::blocking) return (inner_->barrier(), Request{});
    return wrap(inner_->ibarrier());
  }
  std::unique_ptr<Communicator> do_split(int color, int key) override { return decorate(inner_->split(color, key)); }

 private:
  Communicator* inner_;
  std::unique_ptr<Communicator> owned_;
};

}  // namespace optimus::test
