// The simulated device's streams (one worker thread each, work in order, random delays) and events.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>
#include <thread>

#include "optimus/core/error.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::sim {

struct Stream::Task {
  const char* name = "";
  std::vector<Access> accesses;
  std::function<void()> work;
  bool bookkeeping = false;
};

struct Stream::Queue {
  std::mutex mu;
  std::condition_variable arrived;  // a task was queued, or the stream stops
  std::condition_variable drained;  // pending reached 0
  std::deque<Task> tasks;
  std::size_t pending = 0;  // queued and running
  bool stop = false;
  std::mt19937_64 delays;
  std::thread worker;
};

Stream::Stream(Runtime& device) : device_(&device), id_(device.next_stream_++), queue_(std::make_shared<Queue>()) {
  queue_->delays.seed(device.options().delays.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(id_));
  queue_->worker = std::thread([this] {
    Queue& q = *queue_;
    for (;;) {
      Task task;
      {
        std::unique_lock lock(q.mu);
        q.arrived.wait(lock, [&] { return q.stop || !q.tasks.empty(); });
        if (q.tasks.empty()) return;  // stopping, and nothing left
        task = std::move(q.tasks.front());
        q.tasks.pop_front();
      }
      run(task);
      task = Task{};  // what the work captured is released before the stream counts it done
      std::lock_guard lock(q.mu);
      if (--q.pending == 0) q.drained.notify_all();
    }
  });
  device.add_stream(this);
}

// Drains the queue, leaves the device's list of streams (so that no synchronize_all looks at the worker while it is
// joined), then stops the worker.
Stream::~Stream() {
  {
    std::unique_lock lock(queue_->mu);
    queue_->drained.wait(lock, [&] { return queue_->pending == 0; });
  }
  device_->remove_stream(this);
  {
    std::lock_guard lock(queue_->mu);
    queue_->stop = true;
  }
  queue_->arrived.notify_all();
  queue_->worker.join();
}

DeviceRuntime& Stream::runtime() const { return *device_; }

void Stream::run(Task& task) {
  if (task.bookkeeping) {
    task.work();
    return;
  }
  if (device_->failed_.load()) return;  // a failed device runs nothing more, as a GPU after a fault
  try {
    const std::shared_ptr<void> running = device_->start(id_, task.name, task.accesses);
    const int max_us = device_->options().delays.max_microseconds;
    if (max_us > 0) {
      std::uniform_int_distribution<int> us(0, max_us);
      std::this_thread::sleep_for(std::chrono::microseconds(us(queue_->delays)));
    }
    const auto start = std::chrono::steady_clock::now();
    task.work();
    device_->record_span(id_, task.name, start, std::chrono::steady_clock::now());
  } catch (...) {
    device_->fail(std::current_exception());
  }
}

void Stream::enqueue(Task task) {
  std::lock_guard lock(queue_->mu);
  queue_->tasks.push_back(std::move(task));
  ++queue_->pending;
  queue_->arrived.notify_one();
}

void Stream::launch(const char* name, std::vector<Access> accesses, std::function<void()> work) {
  enqueue({.name = name, .accesses = std::move(accesses), .work = std::move(work), .bookkeeping = false});
}

void Stream::launch_bookkeeping(std::function<void()> work) {
  enqueue({.name = "bookkeeping", .accesses = {}, .work = std::move(work), .bookkeeping = true});
}

void Stream::synchronize() {
  OPTIMUS_CHECK(std::this_thread::get_id() != queue_->worker.get_id(),
                "sim stream ", id_, ": synchronize() from the stream's own work would wait for itself");
  {
    std::unique_lock lock(queue_->mu);
    queue_->drained.wait(lock, [&] { return queue_->pending == 0; });
  }
  device_->throw_if_failed();
}

bool Stream::runs_here() const { return std::this_thread::get_id() == queue_->worker.get_id(); }

struct Event::State {
  std::mutex mu;
  std::condition_variable reached;
  std::uint64_t recorded = 0;   // records queued so far
  std::uint64_t completed = 0;  // the latest record reached
};

Event::Event(Runtime& device) : device_(&device), state_(std::make_shared<State>()) {}

void Event::record(DeviceStream& stream) {
  Stream& s = device_->own(stream, "Event::record");
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(state_->mu);
    generation = ++state_->recorded;
  }
  s.launch_bookkeeping([state = state_, generation] {
    std::lock_guard lock(state->mu);
    state->completed = std::max(state->completed, generation);
    state->reached.notify_all();
  });
}

void Event::wait_on(DeviceStream& stream) const {
  Stream& s = device_->own(stream, "Event::wait_on");
  std::uint64_t target = 0;
  {
    std::lock_guard lock(state_->mu);
    target = state_->recorded;
  }
  if (target == 0) return;  // never recorded: nothing to wait for
  s.launch_bookkeeping([state = state_, target] {
    std::unique_lock lock(state->mu);
    state->reached.wait(lock, [&] { return state->completed >= target; });
  });
}

bool Event::done() const {
  device_->throw_if_failed();
  std::lock_guard lock(state_->mu);
  return state_->completed >= state_->recorded;
}

void Event::synchronize() const {
  {
    std::unique_lock lock(state_->mu);
    const std::uint64_t target = state_->recorded;
    state_->reached.wait(lock, [&] { return state_->completed >= target; });
  }
  device_->throw_if_failed();
}

}  // namespace optimus::sim
