// How a thread polls for something another thread or rank will finish (a request, a message) without taking a core
// from the threads that compute: it polls again at once for the first few polls (what it waits for often ends within
// microseconds), then sleeps between polls, twice as long each time up to `longest`. Ranks and a device's streams may
// share cores, so a waiting rank that only yielded would keep a core busy.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace optimus {

class PollBackoff {
 public:
  // `spins` polls with only a yield between them, then sleeps of 1 us, 2 us, ... up to `longest`.
  PollBackoff(int spins, std::chrono::microseconds longest) : spins_(spins), longest_(longest) {}

  // Between two polls that found nothing.
  void pause() {
    if (polls_++ < spins_) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, longest_);
  }
  // After a poll that found something: the next wait starts over.
  void reset() {
    polls_ = 0;
    sleep_ = std::chrono::microseconds(1);
  }

 private:
  int spins_;
  std::chrono::microseconds longest_;
  int polls_ = 0;
  std::chrono::microseconds sleep_{1};
};

}  // namespace optimus
