// Communication on the simulated device (part of test_sim): device communicators over the simulated NCCL with several
// in-process ranks — every collective on device and host buffers with exact counters, point-to-point exchanges, a
// stuck or failing peer — and the in-process staging area on a shared device.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <latch>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "../comm/collective_cases.hpp"
#include "device_world.hpp"
#include "test_world.hpp"
#include "optimus/comm/device_communicator.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/comm/device_staging.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/sim/collectives.hpp"
#include "optimus/sim/runtime.hpp"

namespace {

using optimus::Communicator;
using optimus::DeviceCommunicator;
using optimus::DType;
using optimus::ReduceOp;
using optimus::Shape;
using optimus::Tensor;
using optimus::test::on;
namespace sim = optimus::sim;

// fn(world, device, communicator) on `ranks` in-process ranks, each with a simulated device of its own and a device
// communicator over them; the world's watchdog set first where `world_timeout` is not 0.
void on_device_communicators(int ranks, const sim::Options& options,
                             const std::function<void(Communicator&, sim::Runtime&, DeviceCommunicator&)>& fn,
                             std::chrono::milliseconds world_timeout = std::chrono::milliseconds(0)) {
  optimus::test::run_in_process(ranks, [&](Communicator& world) {
    if (world_timeout.count() > 0) world.set_timeout(world_timeout);  // before the communicator: its transport's too
    sim::Options mine = options;
    mine.ordinal = world.rank();
    sim::Runtime device(mine);
    const auto comm = device_communicator(world, device);
    fn(world, device, *comm);
  });
}

}  // namespace

TEST_CASE("device communicators over the simulated NCCL: every operation on host buffers (staged), exact counters") {
  for (int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    on_device_communicators(ranks, sim::Options{.delays = {.max_microseconds = 100, .seed = 2}},
                            [](Communicator&, sim::Runtime&, DeviceCommunicator& comm) {
                              CHECK(comm.backend() == "sim-nccl");
                              CHECK(comm.takes_buffers_on(optimus::Device::sim));
                              optimus::test::check_collectives(comm);
                              optimus::test::check_counters(comm);
                              optimus::test::check_nonblocking(comm);
                            });
  }
}

TEST_CASE("device communicators move device buffers, stream-ordered after the compute stream") {
  on_device_communicators(3, sim::Options{.delays = {.max_microseconds = 300, .seed = 4}},
                          [](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    auto compute = device.create_stream();
    optimus::DeviceMemoryPool memory(device, *compute);
    comm.set_compute_stream(compute.get());
    const int r = world.rank(), p = world.size();
    const optimus::ops::Queue q{.stream = compute.get()};
    Tensor<float> x(Shape{5}, on(memory)), gathered(Shape{5 * p}, on(memory)), piece(Shape{2}, on(memory)),
        spread(Shape{2 * p}, on(memory));
    // Written by a kernel on the compute stream just before: the communicator must wait for it.
    optimus::ops::fill<float>(x.view(), static_cast<float>(r + 1), q);
    comm.all_reduce(x.data(), x.data(), 5, DType::f32, ReduceOp::sum);
    CHECK(optimus::download(x) == std::vector<float>(5, static_cast<float>(p * (p + 1) / 2)));
    optimus::ops::fill<float>(x.view(), static_cast<float>(r), q);
    comm.all_gather(x.data(), gathered.data(), 5, DType::f32);
    const std::vector<float> all = optimus::download(gathered);
    for (int k = 0; k < p; ++k) CHECK(all[static_cast<std::size_t>(5 * k)] == static_cast<float>(k));
    optimus::ops::fill<float>(spread.view(), 1.0f, q);
    comm.reduce_scatter(spread.data(), piece.data(), 2, DType::f32, ReduceOp::sum);
    CHECK(optimus::download(piece) == std::vector<float>(2, static_cast<float>(p)));
    optimus::ops::fill<float>(x.view(), r == 1 ? 42.0f : -1.0f, q);
    comm.broadcast(x.data(), 5, DType::f32, 1);
    CHECK(optimus::download(x) == std::vector<float>(5, 42.0f));
    optimus::ops::fill<float>(x.view(), 2.0f, q);
    comm.reduce(x.data(), x.data(), 5, DType::f32, ReduceOp::max, 0);
    if (r == 0) CHECK(optimus::download(x) == std::vector<float>(5, 2.0f));
    comm.barrier();
    // all_to_all: rank r's block k (two elements, 10 r + k) goes to rank k; the variable form sends rank k r + 1.
    std::vector<float> blocks;
    for (int k = 0; k < p; ++k) blocks.insert(blocks.end(), 2, static_cast<float>(10 * r + k));
    const Tensor<float> mine = optimus::upload(blocks.data(), Shape{2 * p}, on(memory));
    Tensor<float> swapped(Shape{2 * p}, on(memory));
    comm.all_to_all(mine.data(), swapped.data(), 2, DType::f32);
    const std::vector<float> got = optimus::download(swapped);
    for (int k = 0; k < p; ++k) CHECK(got[static_cast<std::size_t>(2 * k + 1)] == static_cast<float>(10 * k + r));
    std::vector<std::size_t> sends(static_cast<std::size_t>(p), static_cast<std::size_t>(r + 1)), receives;
    for (int k = 0; k < p; ++k) receives.push_back(static_cast<std::size_t>(k + 1));
    Tensor<float> ours(Shape{p * (r + 1)}, on(memory)), varied(Shape{p * (p + 1) / 2}, on(memory));
    optimus::ops::fill<float>(ours.view(), static_cast<float>(r), q);
    comm.all_to_all_v(ours.data(), sends, varied.data(), receives, DType::f32);
    const std::vector<float> from = optimus::download(varied);
    std::size_t at = 0;
    for (int k = 0; k < p; ++k) {
      for (int e = 0; e <= k; ++e) CHECK(from[at++] == static_cast<float>(k));
    }
  });
}

TEST_CASE("the simulated NCCL refuses host memory, as NCCL cannot read it") {
  optimus::test::run_in_process(1, [](Communicator& world) {
    sim::Runtime device(sim::Options{});
    auto collectives = sim::Collectives::create(world, device);
    auto stream = device.create_stream();
    std::vector<float> host(4);
    CHECK_THROWS_WITH_AS(collectives->run(optimus::Operation::all_reduce(host.data(), host.data(), 4, DType::f32,
                                                                         ReduceOp::sum),
                                          optimus::Sync::nonblocking, *stream),
                         doctest::Contains("is not device memory of sim device 0"), optimus::Error);
  });
}

TEST_CASE("an exchange — both ranks send, then receive — completes: sends and receives are posted as one group") {
  // A device send blocks its stream until the peer's receive runs. Posted one by one (as the NCCL communicator did),
  // both ranks' sends wait for receives queued behind them: a deadlock, which the simulated NCCL reproduces.
  on_device_communicators(2, sim::Options{}, [](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    auto compute = device.create_stream();
    optimus::DeviceMemoryPool memory(device, *compute);
    comm.set_compute_stream(compute.get());  // the buffers are zeroed and filled on it
    const int peer = 1 - world.rank();
    std::vector<float> mine(64, static_cast<float>(world.rank() + 10));
    Tensor<float> out = optimus::upload(mine.data(), Shape{64}, on(memory)), in(Shape{64}, on(memory));
    optimus::Request sent = comm.isend(out.data(), 64, DType::f32, peer, 0);
    optimus::Request received = comm.irecv(in.data(), 64, DType::f32, peer, 0);
    sent.wait();
    received.wait();
    CHECK(optimus::download(in) == std::vector<float>(64, static_cast<float>(peer + 10)));
    // The raw collectives without a group: the exchange deadlocks (found by the timeout below).
    comm.set_timeout(std::chrono::milliseconds(300));
    auto raw = sim::Collectives::create(world, device);
    auto stream = device.create_stream();
    compute->synchronize();
    raw->run(optimus::Operation::send_to(out.data(), 64, DType::f32, peer, 0), optimus::Sync::nonblocking, *stream);
    raw->run(optimus::Operation::recv_from(in.data(), 64, DType::f32, peer, 0), optimus::Sync::nonblocking, *stream);
    auto done = device.create_event();
    done->record(*stream);
    const auto start = std::chrono::steady_clock::now();
    while (!done->done() && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK_FALSE(done->done());  // still waiting: both sends wait for receives queued behind them
    world.barrier();            // both ranks saw the deadlock (a rank that returned would end the peer's wait)
    raw->abort();               // ends the waits
    stream->synchronize();
    CHECK_THROWS_WITH_AS(raw->check_async_errors(), doctest::Contains("aborted"), optimus::Error);
    world.barrier();
  });
}

// After a failure a rank's communication is over (JobState): these ranks meet through a latch, not the host world.
TEST_CASE("an operation a peer never joins times out, aborts the communicator, and later calls fail at once") {
  std::latch given_up(1);
  on_device_communicators(2, sim::Options{}, [&](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    comm.set_timeout(std::chrono::milliseconds(250));
    auto compute = device.create_stream();
    comm.set_compute_stream(compute.get());  // the buffers are zeroed on it
    optimus::DeviceMemoryPool memory(device, *compute);
    Tensor<float> x(Shape{8}, on(memory));
    if (world.rank() == 0) {  // rank 1 skips this all-reduce: rank 0 would wait forever
      CHECK_THROWS_WITH_AS(comm.all_reduce(x.data(), x.data(), 8, DType::f32, ReduceOp::sum),
                           doctest::Contains("did not complete within 0.25 s; a rank may have died"), optimus::Error);
      CHECK_THROWS_WITH_AS(comm.barrier(), doctest::Contains("refused: this rank's communication failed earlier"),
                           optimus::Error);
      CHECK_THROWS_WITH_AS(world.barrier(), doctest::Contains("refused"), optimus::Error);  // its world's too
      CHECK(world.job()->failed());
      given_up.count_down();
    } else {
      given_up.wait();  // rank 1 stays until rank 0 has given up
    }
  });
}

TEST_CASE("with the host world's watchdog on, a device collective's timeout names the rank that did not join") {
  // The simulated NCCL runs over a transport split from the world, which inherits its watchdog: its error, naming the
  // ranks that have not joined and those that made no call for half the timeout, is the one the device wait reports.
  std::latch given_up(2);
  on_device_communicators(3, sim::Options{}, [&](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    auto compute = device.create_stream();
    comm.set_compute_stream(compute.get());
    optimus::DeviceMemoryPool memory(device, *compute);
    Tensor<float> x(Shape{8}, on(memory));
    comm.all_reduce(x.data(), x.data(), 8, DType::f32, ReduceOp::sum);  // all join: no alarm
    if (world.rank() == 2) {  // stopped: it makes no call until the others have given up
      given_up.wait();
      return;
    }
    try {
      comm.all_reduce(x.data(), x.data(), 8, DType::f32, ReduceOp::sum);
      FAIL("the all-reduce completed without rank 2");
    } catch (const optimus::Error& e) {
      CHECK(std::regex_match(e.message(), std::regex("watchdog: all_reduce #[0-9]+ on the in-process communicator of "
                                                     "3 ranks \\(world ranks 0, 1, 2\\), at its rank [01] did not "
                                                     "complete within 1 s; not joined by rank 2 \\(world rank "
                                                     "2\\); world rank 2 has made no communication call for [0-9.]+ s "
                                                     "\\(stopped\\?\\)")));
    }
    given_up.count_down();
  }, std::chrono::seconds(1));
}

TEST_CASE("a timed-out group of receives is abandoned whole: the communicator closes instead of hanging") {
  // Two receives posted as one group, from a peer that never sends: the first wait times out and aborts; the
  // group's other receive must not be waited for (it would hang the stream, and the communicator's destruction).
  std::latch given_up(1);
  on_device_communicators(2, sim::Options{}, [&](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    comm.set_timeout(std::chrono::milliseconds(250));
    auto compute = device.create_stream();
    comm.set_compute_stream(compute.get());  // the buffers are zeroed on it
    optimus::DeviceMemoryPool memory(device, *compute);
    Tensor<float> a(Shape{8}, on(memory)), b(Shape{8}, on(memory));
    if (world.rank() == 0) {
      optimus::Request first = comm.irecv(a.data(), 8, DType::f32, 1, 0);
      optimus::Request second = comm.irecv(b.data(), 8, DType::f32, 1, 1);
      std::string why;
      try {
        first.wait();
      } catch (const optimus::Error& e) {
        why = e.message();
      }
      CHECK(why.find("did not complete within") != std::string::npos);
      CHECK_THROWS_WITH_AS(second.wait(), why.c_str(), optimus::Error);  // the first failure again, at once
      given_up.count_down();
    } else {
      given_up.wait();
    }
  });
}

TEST_CASE("a group the backend refuses to post aborts the communicator: its requests fail instead of hanging") {
  std::latch given_up(1);
  on_device_communicators(2, sim::Options{}, [&](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
    auto compute = device.create_stream();
    comm.set_compute_stream(compute.get());  // the buffers are zeroed on it
    optimus::DeviceMemoryPool memory(device, *compute);
    Tensor<float> a(Shape{8}, on(memory));
    if (world.rank() == 0) {
      optimus::Request good = comm.isend(a.data(), 8, DType::f32, 1, 0);
      void* freed = device.allocate(64);
      device.release(freed);  // no longer a live allocation: the simulated NCCL refuses it when the group is posted
      optimus::Request bad = comm.isend(freed, 8, DType::f32, 1, 1);
      CHECK_THROWS_WITH_AS(bad.wait(), doctest::Contains("not in a live allocation"), optimus::Error);
      CHECK_THROWS_WITH_AS(good.wait(), doctest::Contains("not in a live allocation"), optimus::Error);
      CHECK_THROWS_WITH_AS(comm.barrier(), doctest::Contains("refused: this rank's communication failed earlier (sim "
                                                             "send"),
                           optimus::Error);
      given_up.count_down();
    } else {
      given_up.wait();
    }
  });
}

TEST_CASE("a failing peer ends the others' pending device collectives with its error, not a hang") {
  CHECK_THROWS_WITH_AS(
      on_device_communicators(3, sim::Options{},
                              [](Communicator& world, sim::Runtime& device, DeviceCommunicator& comm) {
                                auto compute = device.create_stream();
                                comm.set_compute_stream(compute.get());
                                optimus::DeviceMemoryPool memory(device, *compute);
                                Tensor<float> x(Shape{8}, on(memory));
                                if (world.rank() == 2) OPTIMUS_FAIL("rank 2 failed before the all-reduce");
                                comm.all_reduce(x.data(), x.data(), 8, DType::f32, ReduceOp::sum);
                              }),
      doctest::Contains("rank 2 failed before the all-reduce"), optimus::Error);
}

namespace {

// A staging area that records whether the ranks' deliveries — copies out of staged contributions into their buffers —
// can run at the same time: each delivery waits (up to a few seconds) until every rank is inside one.
class ConcurrentDeliveries final : public optimus::InProcessStaging {
 public:
  explicit ConcurrentDeliveries(int ranks) : ranks_(ranks) {}
  optimus::Device device() const override { return optimus::Device::cpu; }
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override {
    auto p = std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
    std::lock_guard lock(mu_);
    staged_.insert(p.get());
    return p;
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    bool delivery = false;
    {
      std::lock_guard lock(mu_);
      delivery = staged_.count(static_cast<const std::byte*>(src)) > 0;
    }
    if (delivery) meet();
    std::memcpy(dst, src, bytes);
  }
  void reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) override {
    host_->reduce(acc, x, count, dtype, op);
  }
  bool all_met() const { return met_.load(); }

 private:
  void meet() {
    std::unique_lock lock(mu_);
    if (met_.load()) return;
    if (++inside_ == ranks_) {
      met_.store(true);
      cv_.notify_all();
      return;
    }
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return met_.load(); });
    --inside_;
  }
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<const std::byte*> staged_;
  int inside_ = 0;
  std::atomic<bool> met_{false};
  std::shared_ptr<optimus::InProcessStaging> host_ = optimus::host_staging();
};

}  // namespace

TEST_CASE("in-process deliveries run outside the group's lock: the ranks copy their results at the same time") {
  // A staged copy on a device waits for the rank's stream; under the group's lock it made every rank of the group
  // wait for every other's device in turn (no overlap on one GPU).
  auto staging = std::make_shared<ConcurrentDeliveries>(4);
  optimus::test::run_in_process(4, [&](Communicator& world) {
    optimus::set_in_process_staging(world, staging);
    std::vector<double> mine(3, world.rank()), all(12);
    world.all_gather(mine.data(), all.data(), 3, DType::f64);
    CHECK(all[9] == 3.0);
  });
  CHECK(staging->all_met());
}

TEST_CASE("the in-process staging area on a shared device: collectives on host and device buffers, nothing leaked") {
  sim::Runtime device(sim::Options{.delays = {.max_microseconds = 100, .seed = 9}});
  optimus::test::run_in_process(4, [&](Communicator& world) {
    auto stream = device.create_stream();
    optimus::DeviceMemoryPool memory(device, *stream);
    optimus::set_in_process_staging(world, std::make_shared<optimus::DeviceStaging>(memory));
    CHECK(world.takes_buffers_on(optimus::Device::sim));
    optimus::test::check_collectives(world);  // host buffers, through the device staging area
    Tensor<float> x(Shape{6}, on(memory));
    optimus::ops::fill<float>(x.view(), static_cast<float>(world.rank()), optimus::ops::Queue{.stream = stream.get()});
    world.all_reduce(x.data(), x.data(), 6, DType::f32, ReduceOp::max);
    CHECK(optimus::download(x) == std::vector<float>(6, 3.0f));
  });
  CHECK(device.bytes_in_use() == 0);  // every staged contribution and every tensor was released
}
