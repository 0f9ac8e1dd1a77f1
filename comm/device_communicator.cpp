// The device communicator (optimus/comm/device_communicator.hpp): host-buffer staging, ordering after the compute
// stream, grouped point-to-point, asynchronous errors and timeouts, over NCCL's or the simulated device's collectives —
// or, where ranks share a device, collectives staged through the host (staged_collectives.hpp).
#include "optimus/comm/device_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <iostream>
#include <thread>
#include <utility>
#include <vector>

#include "optimus/core/device_memory_pool.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/poll_backoff.hpp"
#include "optimus/comm/staged_collectives.hpp"

namespace optimus {

// Point-to-point operations not yet posted: they are posted together, as one group, when one of their requests is
// waited on or tested, or when another operation is posted.
struct P2pGroup {
  std::vector<std::function<void()>> operations;
  std::shared_ptr<DeviceEvent> done;  // recorded after the group, once posted
};

struct DeviceCommunicator::Core {
  std::shared_ptr<JobState> job;  // the bootstrap's
  DeviceRuntime* device = nullptr;
  std::unique_ptr<DeviceCollectives> collectives;  // declared before the stream: destroyed after it has drained
  std::unique_ptr<DeviceStream> stream;            // the communication stream
  std::unique_ptr<DeviceEvent> computed;           // recorded on `compute` before each operation
  DeviceStream* compute = nullptr;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::vector<int> world_ranks;  // the bootstrap's (create()); empty after a split
  bool progress_calls = false;   // the bootstrap's needs_progress_calls() (Communicator::needs_progress_calls)
  std::atomic<bool> aborted{false};
  void* barrier_word = nullptr;  // one device float for barrier()
  void* staging = nullptr;       // host-buffer operations run through it
  std::size_t staging_bytes = 0;
  std::unique_ptr<DeviceAllocator> p2p_buffers;  // device copies of host buffers of pending sends and receives
  std::shared_ptr<P2pGroup> open_group = std::make_shared<P2pGroup>();

  Core(std::shared_ptr<JobState> j, DeviceRuntime& d, std::unique_ptr<DeviceCollectives> c)
      : job(std::move(j)), device(&d), collectives(std::move(c)) {
    device->make_current();
    stream = device->create_stream();
    computed = device->create_event();
    p2p_buffers = std::make_unique<DeviceAllocator>(d);
    barrier_word = device->allocate(sizeof(float));
    OPTIMUS_CHECK(barrier_word != nullptr, device->name(), " is out of memory for a communicator's barrier word");
  }
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;
  ~Core() {
    if (job->failed()) abort(nullptr);  // its pending operations may never complete: not waited for
    if (!aborted.load()) {
      try {
        stream->synchronize();
      } catch (const std::exception& e) {
        std::cerr << "optimus: a device communicator's stream failed before destruction: " << e.what() << '\n';
      }
    }
    stream.reset();  // drains what is left (aborted operations return at once)
    p2p_buffers.reset();
    device->release(barrier_word);
    device->release(staging);
  }

  void check_usable() const {
    OPTIMUS_CHECK(!aborted.load(), collectives->backend(),
                  " communicator was aborted after an earlier failure; create a new one");
  }
  // After a failure (`why`; null where the job has failed already) that leaves operations that can never complete:
  // they are abandoned, and so is the job (JobState).
  void abort(std::exception_ptr why) noexcept {
    job->fail(std::move(why));
    if (!aborted.exchange(true)) collectives->abort();
  }
  // The communication stream waits for the compute stream's work so far.
  void order_after_compute() {
    if (compute == nullptr) return;
    computed->record(*compute);
    computed->wait_on(*stream);
  }
  // Posts the open point-to-point group, if it holds anything. If posting fails (a buffer the backend refuses), the
  // group is closed — NCCL defers every later call after an unclosed ncclGroupStart — and the communicator aborted:
  // the group's operations can never complete, so its requests and later calls fail at once instead of hanging.
  void flush() {
    if (open_group->operations.empty()) return;
    const std::shared_ptr<P2pGroup> group = std::exchange(open_group, std::make_shared<P2pGroup>());
    try {
      device->make_current();
      order_after_compute();
      collectives->group_start();
      try {
        for (const auto& operation : group->operations) operation();
      } catch (...) {
        try {
          collectives->group_end();
        } catch (...) {  // the first error is the one to report
        }
        throw;
      }
      collectives->group_end();
    } catch (...) {
      abort(std::current_exception());
      throw;
    }
    group->done = device->create_event();
    group->done->record(*stream);
  }
  // A device buffer of at least `bytes` (grown as needed, kept for later host-buffer operations).
  void* staging_buffer(std::size_t bytes) {
    if (bytes <= staging_bytes) return staging;
    stream->synchronize();
    device->release(staging);
    staging = device->allocate(bytes);
    staging_bytes = staging != nullptr ? bytes : 0;
    OPTIMUS_CHECK(staging != nullptr, device->describe_free(), ": no room for ", bytes,
                  " bytes of staging for a host-buffer collective");
    return staging;
  }
};

namespace {

// Completion of queued work: an event on the communication stream (or, for point-to-point, its group's, posted when
// first needed), polled together with the collectives' asynchronous errors, the job's failure and the timeout.
class DeviceRequest final : public RequestImpl {
 public:
  // `finish` runs once, when the operation is done (a receive into a host buffer copies it out); `expired` throws the
  // watchdog's error.
  DeviceRequest(std::shared_ptr<DeviceCommunicator::Core> core, std::shared_ptr<DeviceEvent> done,
                std::shared_ptr<P2pGroup> group, std::function<void()> finish, std::function<void()> expired)
      : RequestImpl(core->job), core_(std::move(core)), done_(std::move(done)), group_(std::move(group)),
        finish_(std::move(finish)), expired_(std::move(expired)) {}

  // Polls: briefly by yielding (a GPU collective often ends within microseconds), then sleeping ever longer, up to
  // 200 µs, so that ranks oversubscribing cores leave them to the ranks that have work. Where the collectives run over
  // a host transport with a watchdog (the simulated device's, staged ones), that watchdog names the ranks that did not
  // join: this wait gives it a fifth of the timeout more to report first.
  void wait() override {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = core_->collectives->has_watchdog() ? core_->timeout + core_->timeout / 5 : core_->timeout;
    PollBackoff backoff(64, std::chrono::microseconds(200));
    while (!test()) {
      if (job().failed()) {  // this rank failed for good on another thread (a simulated device's stream) or earlier
        core_->collectives->check_async_errors();  // this communicator's own error first, where it has one
        core_->abort(nullptr);
        job().throw_failure();
      }
      if (std::chrono::steady_clock::now() - start > deadline) expire();
      backoff.pause();
    }
  }
  bool test() override {
    core_->check_usable();
    if (group_ && !done_) {
      if (!group_->done) core_->flush();  // still open: post it with the operations queued after it
      done_ = group_->done;
    }
    try {
      core_->collectives->check_async_errors();
      if (!done_->done()) return false;  // throws if the device failed
    } catch (...) {
      core_->abort(std::current_exception());
      throw;
    }
    if (finish_) std::exchange(finish_, {})();
    return true;
  }
  void expire() override {
    try {
      expired_();
    } catch (...) {
      core_->abort(std::current_exception());
      throw;
    }
    OPTIMUS_FAIL("DeviceRequest::expire: the watchdog's error was not thrown");
  }

 private:
  std::shared_ptr<DeviceCommunicator::Core> core_;
  std::shared_ptr<DeviceEvent> done_;
  std::shared_ptr<P2pGroup> group_;
  std::function<void()> finish_;
  std::function<void()> expired_;
};

// Whether a buffer is one the collectives can use as it is (null: nothing to move).
bool on_device(const DeviceRuntime& device, const void* p) {
  return p == nullptr || device.memory_type(p) == MemoryType::device;
}

// Whether two ranks of `bootstrap` are on one device (DeviceRuntime::identity): collective, the same answer on every
// rank. Identities travel as 64-bit hashes; an empty one (0) is never shared.
bool ranks_share_a_device(Communicator& bootstrap, const DeviceRuntime& device) {
  const std::string identity = device.identity();
  const std::uint64_t mine = identity.empty() ? 0 : std::max<std::uint64_t>(1, std::hash<std::string>{}(identity));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(bootstrap.size()));
  bootstrap.all_gather(&mine, all.data(), sizeof mine, DType::u8);  // as bytes: there is no 64-bit integer DType
  std::erase(all, std::uint64_t{0});
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) != all.end();
}

std::unique_ptr<DeviceCollectives> collectives_for(Communicator& bootstrap, DeviceRuntime& device,
                                                   const NativeCollectives& native) {
  OPTIMUS_CHECK(device.device() != Device::cpu, "DeviceCommunicator: ", device.name(), " is not an accelerator");
  if (ranks_share_a_device(bootstrap, device)) {
    return StagedCollectives::create(bootstrap, device);  // NCCL refuses two ranks on one GPU
  }
  return native(bootstrap, device);
}

}  // namespace

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(Communicator& bootstrap, DeviceRuntime& device,
                                                               const NativeCollectives& native) {
  auto core = std::make_shared<Core>(bootstrap.job(), device, collectives_for(bootstrap, device, native));
  core->world_ranks = bootstrap.world_ranks();
  core->progress_calls = bootstrap.needs_progress_calls();
  const int rank = core->collectives->rank(), size = core->collectives->size();
  return std::unique_ptr<DeviceCommunicator>(new DeviceCommunicator(std::move(core), rank, size));
}

DeviceCommunicator::DeviceCommunicator(std::shared_ptr<Core> core, int rank, int size)
    : Communicator(rank, size, core->job), core_(std::move(core)) {}

std::function<void()> DeviceCommunicator::watchdog() const {
  // The request may outlive this communicator (its destructor posts the last point-to-point operations): what the
  // error names is taken now, not read from `this` later.
  return [core = core_, call = posting(), size = size(), rank = rank()] {
    const Error error(detail::concat("watchdog: ",
                                     describe(call, core->collectives->backend(), size, core->world_ranks, rank),
                                     " did not complete within ",
                                     std::chrono::duration<double>(core->timeout).count(),
                                     " s; a rank may have died or stopped calling it (which one is unknown here); the "
                                     "communicator was aborted"),
                      __FILE__, __LINE__);
    core->abort(std::make_exception_ptr(error));
    throw error;
  };
}

DeviceCommunicator::~DeviceCommunicator() {
  try {
    // Point-to-point operations nobody waited for still complete, unless the job is failing.
    if (!core_->aborted.load() && !core_->job->failed()) core_->flush();
  } catch (const std::exception& e) {
    std::cerr << "optimus: posting a device communicator's last operations failed: " << e.what() << '\n';
  }
}

std::string DeviceCommunicator::backend() const { return core_->collectives->backend(); }

bool DeviceCommunicator::takes_buffers_on(Device device) const {
  return device == Device::cpu || device == core_->device->device();
}

bool DeviceCommunicator::needs_progress_calls() const { return core_->progress_calls; }

void DeviceCommunicator::set_compute_stream(DeviceStream* compute) {
  OPTIMUS_CHECK(compute == nullptr || &compute->runtime() == core_->device, "set_compute_stream: a stream of ",
                compute == nullptr ? "" : compute->runtime().name(), ", but the communicator is on ",
                core_->device->name());
  core_->compute = compute;
}

void DeviceCommunicator::timeout_changed() { core_->timeout = timeout().count() > 0 ? timeout() : kDefaultTimeout; }

std::vector<int> DeviceCommunicator::world_ranks() const { return core_->world_ranks; }

DeviceStream& DeviceCommunicator::stream() const { return *core_->stream; }

template <class Op>
Request DeviceCommunicator::run(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes,
                                Sync sync, Op&& op) {
  Core& c = *core_;
  c.check_usable();
  c.flush();  // point-to-point operations posted before this one come first
  c.device->make_current();
  c.order_after_compute();
  auto finish = [&](Sync how) {
    auto done = std::shared_ptr<DeviceEvent>(c.device->create_event());
    done->record(*c.stream);
    Request r(std::make_unique<DeviceRequest>(core_, std::move(done), nullptr, std::function<void()>{}, watchdog()));
    if (how == Sync::blocking) r.wait();
    return r;
  };
  if (on_device(*c.device, send) && on_device(*c.device, recv)) {
    op(send, recv);
    return finish(sync);
  }
  const bool in_place = send == recv;
  char* base =
      static_cast<char*>(c.staging_buffer(in_place ? std::max(send_bytes, recv_bytes) : send_bytes + recv_bytes));
  void* staged_send = send == nullptr ? nullptr : base;
  void* staged_recv = recv == nullptr ? nullptr : in_place ? base : base + send_bytes;
  if (send != nullptr && send_bytes > 0) c.device->copy_async(staged_send, send, send_bytes, *c.stream);
  op(staged_send, staged_recv);
  if (recv != nullptr && recv_bytes > 0) c.device->copy_async(recv, staged_recv, recv_bytes, *c.stream);
  return finish(Sync::blocking);  // host buffers hold the result when the call returns
}

// A send (`send`) or receive (`recv`) joins the open group, posted later with the point-to-point operations around it.
// A host buffer goes through a device copy of its own: a send's is filled now (a pageable source is taken at once), a
// receive's is copied out when the operation is done.
template <class Op>
Request DeviceCommunicator::point_to_point(const void* send, void* recv, std::size_t bytes, Sync sync, Op&& op) {
  Core& c = *core_;
  c.check_usable();
  const void* buffer = send != nullptr ? send : recv;
  std::function<void()> finish;
  if (!on_device(*c.device, buffer) && bytes > 0) {
    DeviceAllocator* buffers = c.p2p_buffers.get();
    void* staged = buffers->allocate(bytes);
    if (send != nullptr) c.device->copy_async(staged, send, bytes, *c.stream);
    finish = [&c, buffers, staged, recv, bytes] {
      if (recv != nullptr) {
        c.device->copy_async(recv, staged, bytes, *c.stream);
        c.stream->synchronize();  // complete on return to pageable memory, not to page-locked memory
      }
      buffers->release(staged);
    };
    buffer = staged;
  }
  const std::shared_ptr<P2pGroup> group = c.open_group;
  group->operations.push_back([op, buffer] { op(buffer); });
  Request r(std::make_unique<DeviceRequest>(core_, nullptr, group, std::move(finish), watchdog()));
  if (sync == Sync::blocking) r.wait();
  return r;
}

// A send or receive joins the open group; every other operation is queued at once, a barrier as an all_reduce of a word.
// The device's collectives take the host communicator's in-place broadcast as a broadcast from buf into buf.
Request DeviceCommunicator::post(const Operation& o, Sync sync) {
  Core* c = core_.get();
  if (o.point_to_point()) {
    return point_to_point(o.send, o.recv, o.count * size_of(o.dtype), sync, [c, o](const void* b) {
      c->collectives->run(o.kind == CallKind::send ? o.on(b, nullptr) : o.on(nullptr, const_cast<void*>(b)),
                          Sync::nonblocking, *c->stream);
    });
  }
  const Operation queued = o.kind == CallKind::barrier ? Operation::all_reduce(c->barrier_word, c->barrier_word, 1,
                                                                               DType::f32, ReduceOp::sum)
                                                       : o;
  void* recv = queued.writes(rank()) ? queued.recv : nullptr;  // a reduce's is the root's alone
  return run(queued.send, queued.send_bytes(size(), rank()), recv, queued.recv_bytes(size(), rank()), sync,
             [&](const void* s, void* r) { c->collectives->run(queued.on(s, r), sync, *c->stream); });
}

std::unique_ptr<Communicator> DeviceCommunicator::do_split(int color, int key) {
  Core& c = *core_;
  c.check_usable();
  c.flush();
  c.stream->synchronize();  // nothing queued while the collectives split
  auto child = std::make_shared<Core>(c.job, *c.device, c.collectives->split(color, key));
  child->compute = c.compute;
  child->timeout = c.timeout;
  child->progress_calls = c.progress_calls;
  const int rank = child->collectives->rank(), size = child->collectives->size();
  return std::unique_ptr<Communicator>(new DeviceCommunicator(std::move(child), rank, size));
}

}  // namespace optimus
