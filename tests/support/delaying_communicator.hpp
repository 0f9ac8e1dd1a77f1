// A test decorator: a communicator that sleeps for a random 0..max_us microseconds (on about half of the calls,
// decided by a per-rank seed) before passing each operation to the communicator it wraps. Sub-communicators
// from split() are wrapped too, so a Grid built on it delays every collective of every rank differently.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "forwarding_communicator.hpp"

namespace optimus::test {

class DelayingCommunicator final : public ForwardingCommunicator {
 public:
  DelayingCommunicator(Communicator& inner, unsigned seed, int max_us)
      : DelayingCommunicator(&inner, nullptr, seed, max_us) {}

  std::string backend() const override { return inner().backend() + "+delays"; }

 protected:
  void before_post() override {
    if (rng_() % 2 == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % static_cast<unsigned>(max_us_ + 1)));
  }
  std::unique_ptr<Communicator> decorate(std::unique_ptr<Communicator> child) override {
    Communicator* raw = child.get();
    return std::unique_ptr<Communicator>(
        new DelayingCommunicator(raw, std::move(child), static_cast<unsigned>(rng_()), max_us_));
  }

 private:
  DelayingCommunicator(Communicator* inner, std::unique_ptr<Communicator> owned, unsigned seed, int max_us)
      : ForwardingCommunicator(inner, std::move(owned)), rng_(seed), max_us_(max_us) {}

  std::mt19937 rng_;
  int max_us_;
};

}  // namespace optimus::test
