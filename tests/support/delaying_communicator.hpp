// A test decorator: a communicator that sleeps for a random 0..max_us microseconds (on about half of the calls,
// decided by a per-rank seed) before passing each operation to the communicator it wraps. Sub-communicators
// from split() are wrapped too, so a Grid built on it delays every collective of every rank differently.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

class DelayingCommunicator final : public Communicator {
 public:
  DelayingCommunicator(Communicator& inner, unsigned seed, int max_us)
      : DelayingCommunicator(&inner, nullptr, seed, max_us) {}

  std::string backend() const override { return inner_->backend() + "+delays"; }
  bool takes_buffers_on(Device device) const override { return inner_->takes_buffers_on(device); }
  std::vector<int> world_ranks() const override { return inner_->world_ranks(); }

 protected:
  Request post_broadcast(void* buf, std::size_t count, DType dtype, int root, Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->broadcast(buf, count, dtype, root), Request{})
                                  : inner_->ibroadcast(buf, count, dtype, root);
  }
  Request post_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root,
                      Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->reduce(send, recv, count, dtype, op, root), Request{})
                                  : inner_->ireduce(send, recv, count, dtype, op, root);
  }
  Request post_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                          Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->all_reduce(send, recv, count, dtype, op), Request{})
                                  : inner_->iall_reduce(send, recv, count, dtype, op);
  }
  Request post_all_gather(const void* send, void* recv, std::size_t count, DType dtype, Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->all_gather(send, recv, count, dtype), Request{})
                                  : inner_->iall_gather(send, recv, count, dtype);
  }
  Request post_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                              Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->reduce_scatter(send, recv, count, dtype, op), Request{})
                                  : inner_->ireduce_scatter(send, recv, count, dtype, op);
  }
  Request post_send(const void* buf, std::size_t count, DType dtype, int dest, int tag, Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->send(buf, count, dtype, dest, tag), Request{})
                                  : inner_->isend(buf, count, dtype, dest, tag);
  }
  Request post_recv(void* buf, std::size_t count, DType dtype, int source, int tag, Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->recv(buf, count, dtype, source, tag), Request{})
                                  : inner_->irecv(buf, count, dtype, source, tag);
  }
  Request post_barrier(Sync sync) override {
    delay();
    return sync == Sync::blocking ? (inner_->barrier(), Request{}) : inner_->ibarrier();
  }
  std::unique_ptr<Communicator> do_split(int color, int key) override {
    std::unique_ptr<Communicator> child = inner_->split(color, key);
    Communicator* raw = child.get();
    return std::unique_ptr<Communicator>(
        new DelayingCommunicator(raw, std::move(child), static_cast<unsigned>(rng_()), max_us_));
  }

 private:
  DelayingCommunicator(Communicator* inner, std::unique_ptr<Communicator> owned, unsigned seed, int max_us)
      : Communicator(inner->rank(), inner->size()), inner_(inner), owned_(std::move(owned)), rng_(seed), max_us_(max_us) {}

  void delay() {
    if (rng_() % 2 == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % static_cast<unsigned>(max_us_ + 1)));
  }

  Communicator* inner_;
  std::unique_ptr<Communicator> owned_;
  std::mt19937 rng_;
  int max_us_;
};

}  // namespace optimus::test
