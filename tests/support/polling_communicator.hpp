// A test decorator: a communicator that says whether it needs progress calls as it is told
// (Communicator::needs_progress_calls: an in-process world can then stand for MPI) and counts the polls
// (Request::test) of its non-blocking operations' requests, over it and every communicator split from it.
#pragma once

#include <atomic>
#include <memory>

#include "forwarding_communicator.hpp"

namespace optimus::test {

class PollingCommunicator final : public ForwardingCommunicator {
 public:
  PollingCommunicator(Communicator& inner, bool needs_progress_calls)
      : PollingCommunicator(&inner, nullptr, needs_progress_calls, std::make_shared<std::atomic<long>>(0)) {}

  std::string backend() const override { return inner().backend() + "+polls"; }
  bool needs_progress_calls() const override { return needs_progress_calls_; }
  // Request::test calls on requests of this communicator and those split from it.
  long polls() const { return polls_->load(); }

 protected:
  Request wrap(Request request) override {
    return Request(std::make_unique<Counted>(std::move(request), polls_, job()));
  }
  std::unique_ptr<Communicator> decorate(std::unique_ptr<Communicator> child) override {
    Communicator* raw = child.get();
    return std::unique_ptr<Communicator>(new PollingCommunicator(raw, std::move(child), needs_progress_calls_, polls_));
  }

 private:
  class Counted final : public RequestImpl {
   public:
    Counted(Request inner, std::shared_ptr<std::atomic<long>> polls, std::shared_ptr<JobState> job)
        : RequestImpl(std::move(job)), inner_(std::move(inner)), polls_(std::move(polls)) {}
    void wait() override { inner_.wait(); }
    bool test() override {
      ++*polls_;
      return inner_.test();
    }
    void expire() override { inner_.expire(); }

   private:
    Request inner_;
    std::shared_ptr<std::atomic<long>> polls_;
  };

  PollingCommunicator(Communicator* inner, std::unique_ptr<Communicator> owned, bool needs_progress_calls,
                      std::shared_ptr<std::atomic<long>> polls)
      : ForwardingCommunicator(inner, std::move(owned)), needs_progress_calls_(needs_progress_calls),
        polls_(std::move(polls)) {}

  bool needs_progress_calls_;
  std::shared_ptr<std::atomic<long>> polls_;
};

}  // namespace optimus::test
