// The backend-independent half of Communicator: argument checks, the traffic counters, and all_to_all over the
// backends' sends and receives.
#include "optimus/comm/communicator.hpp"

#include <cstddef>
#include <cstdint>
#include <iostream>

#include "optimus/core/error.hpp"
#include "optimus/core/poll_backoff.hpp"

namespace optimus {

std::string_view name_of(CallKind kind) {
  switch (kind) {
    case CallKind::broadcast: return "broadcast";
    case CallKind::reduce: return "reduce";
    case CallKind::all_reduce: return "all_reduce";
    case CallKind::all_gather: return "all_gather";
    case CallKind::reduce_scatter: return "reduce_scatter";
    case CallKind::send: return "send";
    case CallKind::recv: return "recv";
    case CallKind::barrier: return "barrier";
    case CallKind::all_to_all: return "all_to_all";
  }
  return "?";
}

void JobState::fail(std::exception_ptr error) noexcept {
  if (!error) return;
  {
    std::lock_guard lock(mu_);
    if (!first_) first_ = std::move(error);
  }
  failed_.store(true, std::memory_order_release);
}

std::string JobState::failure() const {
  std::exception_ptr first;
  {
    std::lock_guard lock(mu_);
    first = first_;
  }
  return first ? detail::message_of(first) : "";
}

void JobState::throw_failure() const {
  std::exception_ptr first;
  {
    std::lock_guard lock(mu_);
    first = first_;
  }
  OPTIMUS_CHECK(first != nullptr, "JobState::throw_failure: the job has not failed");
  std::rethrow_exception(first);
}

RequestImpl::RequestImpl(std::shared_ptr<JobState> job) : job_(std::move(job)) {
  OPTIMUS_CHECK(job_ != nullptr, "a request needs its communicator's job state");
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Request finished(std::move(*this));  // waits for what this handle held
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Request::~Request() {
  if (!impl_ || impl_->job().failed()) return;  // (abandoned: the job's first error is what gets reported)
  try {
    impl_->wait();
  } catch (const std::exception& e) {
    if (impl_->job().failed()) return;  // this wait failed for good: the error being unwound is the one to report
    std::cerr << "optimus: a pending request failed while being destroyed: " << e.what() << '\n';
  }
}

void Request::wait() {
  if (!impl_) return;
  std::unique_ptr<RequestImpl> impl = std::move(impl_);
  if (impl->job().failed()) impl->job().throw_failure();
  impl->wait();
}

bool Request::test() {
  if (!impl_) return true;
  if (impl_->job().failed()) {
    const std::unique_ptr<RequestImpl> impl = std::move(impl_);
    impl->job().throw_failure();
  }
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

void Request::expire() {
  OPTIMUS_CHECK(impl_ != nullptr, "Request::expire: the request is not pending");
  const std::unique_ptr<RequestImpl> impl = std::move(impl_);
  impl->expire();
  OPTIMUS_FAIL("Request::expire: the backend did not throw the watchdog's error");  // (a backend's fault)
}

std::size_t wait_any(std::span<Request* const> requests, std::chrono::milliseconds timeout) {
  OPTIMUS_CHECK(!requests.empty(), "wait_any: no requests to wait for");
  for (std::size_t i = 0; i < requests.size(); ++i) {
    OPTIMUS_CHECK(requests[i] != nullptr, "wait_any: request ", i, " of ", requests.size(), " is null");
  }
  const auto started = std::chrono::steady_clock::now();
  PollBackoff idle(1000, std::chrono::microseconds(100));  // as an MPI wait with the watchdog on polls
  for (;;) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i]->test()) return i;
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - started > timeout) {
      for (Request* r : requests) {
        if (r->pending()) r->expire();
      }
    }
    idle.pause();
  }
}

BroadcastView& BroadcastView::operator=(BroadcastView&& other) noexcept {
  if (this != &other) {
    BroadcastView finished(std::move(*this));  // waits for, releases and reclaims what this view held
    request_ = std::move(other.request_);
    lease_ = std::move(other.lease_);
    root_ = other.root_;
  }
  return *this;
}

BroadcastView::~BroadcastView() {
  { Request pending = std::move(request_); }  // waits (and logs, never throws, if that fails)
  release();
  if (lease_ != nullptr) {
    Request returned = std::move(lease_->returned);  // the same
  }
}

const void* BroadcastView::data() const {
  OPTIMUS_CHECK(lease_ != nullptr && (root_ || !request_.pending()),
                "BroadcastView::data: the view is empty, or the broadcast has not completed at this receiver (wait "
                "first)");
  return lease_->data;
}

void BroadcastView::release() noexcept {
  if (lease_ == nullptr || !lease_->release) return;
  std::function<void()> release = std::move(lease_->release);
  lease_->release = nullptr;
  release();
}

void BroadcastView::reclaim() {
  if (lease_ != nullptr) lease_->returned.wait();
}

Communicator::Communicator(int rank, int size, std::shared_ptr<JobState> job)
    : rank_(rank), size_(size), job_(std::move(job)) {
  OPTIMUS_CHECK(size >= 1 && rank >= 0 && rank < size, "invalid communicator rank ", rank, " of size ", size);
  OPTIMUS_CHECK(job_ != nullptr, "a communicator needs a job state (a new one for a world)");
}

void Communicator::check_peer(int peer, const char* what) const {
  OPTIMUS_CHECK(peer >= 0 && peer < size_, what, " rank ", peer, " is outside a communicator of size ", size_);
}

void Communicator::check_reducible(DType dtype, const char* what) const {
  OPTIMUS_CHECK(dtype != DType::bf16, what, " on bf16 is not supported: bf16 is a storage type; reduce in f32");
  OPTIMUS_CHECK(dtype != DType::u8, what, " on u8 is not supported: u8 are bytes, moved but not reduced");
}

namespace {
std::uint64_t bytes_of(std::size_t count, DType dtype) { return static_cast<std::uint64_t>(count) * size_of(dtype); }
}  // namespace

// The traffic follows stats.hpp's convention.
void Communicator::check_and_count(const Operation& o) {
  const std::uint64_t n = bytes_of(o.count, o.dtype), others = static_cast<std::uint64_t>(size_ - 1);
  std::uint64_t sent = 0, received = 0;
  switch (o.kind) {
    case CallKind::broadcast:
      check_peer(o.peer, "broadcast root");
      if (size_ > 1) (rank_ == o.peer ? sent : received) = n;
      break;
    case CallKind::reduce:
      check_peer(o.peer, "reduce root");
      check_reducible(o.dtype, "reduce");
      if (rank_ == o.peer) {
        received = others * n;
      } else {
        sent = n;
      }
      break;
    case CallKind::all_reduce:
      check_reducible(o.dtype, "all_reduce");
      sent = received = 2 * others * n / static_cast<std::uint64_t>(size_);
      break;
    case CallKind::all_gather: sent = received = others * n; break;
    case CallKind::reduce_scatter:
      check_reducible(o.dtype, "reduce_scatter");
      sent = received = others * n;
      break;
    case CallKind::send:
    case CallKind::recv: {
      const bool sends = o.kind == CallKind::send;
      check_peer(o.peer, sends ? "send destination" : "recv source");
      OPTIMUS_CHECK(o.tag >= 0 && o.tag <= kMaxTag, sends ? "send" : "recv", " tag must be from 0 to ", kMaxTag,
                    ", got ", o.tag);
      (sends ? sent : received) = n;
      break;
    }
    case CallKind::barrier: break;
    case CallKind::all_to_all: OPTIMUS_FAIL("all_to_all is started by iall_to_all or iall_to_all_v, not start()");
  }
  label(o.kind);
  stats_.add(o.kind, sent, received);
}

Request Communicator::start(const Operation& operation, Sync sync) {
  check_and_count(operation);
  return post(operation, sync);
}

BroadcastView Communicator::ibroadcast_view(void* buf, std::size_t count, DType dtype, int root) {
  check_and_count(Operation::broadcast(buf, buf, count, dtype, root));
  auto lease = std::make_shared<BroadcastView::Lease>();
  Request request = post_broadcast_view(buf, count, dtype, root, lease);
  return BroadcastView(std::move(request), std::move(lease), rank_ == root);
}

Request Communicator::post_broadcast_view(void* buf, std::size_t count, DType dtype, int root,
                                          const std::shared_ptr<BroadcastView::Lease>& lease) {
  lease->data = buf;
  return post(Operation::broadcast(buf, buf, count, dtype, root), Sync::nonblocking);
}

namespace {

// One request for the point-to-point transfers of one collective (all_to_all): complete when all of them are.
class TransferGroup final : public RequestImpl {
 public:
  TransferGroup(std::shared_ptr<JobState> job, std::vector<Request> parts)
      : RequestImpl(std::move(job)), parts_(std::move(parts)) {}

  void wait() override {
    for (Request& r : parts_) r.wait();
  }
  bool test() override {
    bool done = true;
    for (Request& r : parts_) done = r.test() && done;  // each polled (an MPI rank's progress)
    return done;
  }
  void expire() override {
    for (Request& r : parts_) {
      if (r.pending()) r.expire();  // its watchdog names the collective and the peer it waits for
    }
    OPTIMUS_FAIL("watchdog: an all_to_all expired as its last transfer completed");
  }

 private:
  std::vector<Request> parts_;
};

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, std::uint64_t a_bytes, const void* b, std::uint64_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

// Every receive is posted before any send (MPI then buffers no unexpected message), and rank me + i's block is the
// i-th sent, so that the ranks do not all send to rank 0 first. Empty blocks are not sent: the counts agree (the
// contract), so neither side posts one. Over a device communicator the consecutive sends and receives are one group.
Request Communicator::start_all_to_all(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                       std::span<const std::size_t> recv_counts, DType dtype) {
  const auto p = static_cast<std::size_t>(size_), me = static_cast<std::size_t>(rank_);
  OPTIMUS_CHECK(send_counts.size() == p && recv_counts.size() == p, "all_to_all: ", send_counts.size(),
                " send counts and ", recv_counts.size(), " receive counts on a communicator of size ", size_,
                " (one of each per rank)");
  OPTIMUS_CHECK(send_counts[me] == recv_counts[me], "all_to_all: rank ", rank_, " sends itself ", send_counts[me],
                " elements but receives ", recv_counts[me], " from itself");
  std::uint64_t send_bytes = 0, recv_bytes = 0, self = bytes_of(send_counts[me], dtype);
  for (std::size_t r = 0; r < p; ++r) {
    send_bytes += bytes_of(send_counts[r], dtype);
    recv_bytes += bytes_of(recv_counts[r], dtype);
  }
  OPTIMUS_CHECK(send != nullptr || send_bytes == 0, "all_to_all: a null send buffer for ", send_bytes, " bytes");
  OPTIMUS_CHECK(recv != nullptr || recv_bytes == 0, "all_to_all: a null receive buffer for ", recv_bytes, " bytes");
  OPTIMUS_CHECK(!overlap(send, send_bytes, recv, recv_bytes), "all_to_all: the send buffer (", send_bytes,
                " bytes) and the receive buffer (", recv_bytes, " bytes) overlap");
  label(CallKind::all_to_all);
  stats_.add(CallKind::all_to_all, send_bytes - self, recv_bytes - self);
  std::vector<std::size_t> send_at(p + 1, 0), recv_at(p + 1, 0);  // each block's first element
  for (std::size_t r = 0; r < p; ++r) {
    send_at[r + 1] = send_at[r] + send_counts[r];
    recv_at[r + 1] = recv_at[r] + recv_counts[r];
  }
  const std::size_t width = size_of(dtype);
  std::vector<Request> parts;
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t r = (me + p - i) % p;
    if (recv_counts[r] == 0) continue;
    parts.push_back(post(Operation::recv_from(static_cast<std::byte*>(recv) + recv_at[r] * width, recv_counts[r],
                                              dtype, static_cast<int>(r), kMaxTag + 1),
                         Sync::nonblocking));
  }
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t r = (me + i) % p;
    if (send_counts[r] == 0) continue;
    parts.push_back(post(Operation::send_to(static_cast<const std::byte*>(send) + send_at[r] * width, send_counts[r],
                                            dtype, static_cast<int>(r), kMaxTag + 1),
                         Sync::nonblocking));
  }
  return Request(std::make_unique<TransferGroup>(job_, std::move(parts)));
}

Request Communicator::ibroadcast(void* buf, std::size_t count, DType dtype, int root) {
  return start(Operation::broadcast(buf, buf, count, dtype, root), Sync::nonblocking);
}
Request Communicator::ireduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root) {
  return start(Operation::reduce(send, recv, count, dtype, op, root), Sync::nonblocking);
}
Request Communicator::iall_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  return start(Operation::all_reduce(send, recv, count, dtype, op), Sync::nonblocking);
}
Request Communicator::iall_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  return start(Operation::all_gather(send, recv, count, dtype), Sync::nonblocking);
}
Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  return start(Operation::reduce_scatter(send, recv, count, dtype, op), Sync::nonblocking);
}
Request Communicator::isend(const void* buf, std::size_t count, DType dtype, int dest, int tag) {
  return start(Operation::send_to(buf, count, dtype, dest, tag), Sync::nonblocking);
}
Request Communicator::irecv(void* buf, std::size_t count, DType dtype, int source, int tag) {
  return start(Operation::recv_from(buf, count, dtype, source, tag), Sync::nonblocking);
}
Request Communicator::ibarrier() { return start(Operation::barrier(), Sync::nonblocking); }
Request Communicator::iall_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(size_), count);
  return start_all_to_all(send, counts, recv, counts, dtype);
}
Request Communicator::iall_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                    std::span<const std::size_t> recv_counts, DType dtype) {
  return start_all_to_all(send, send_counts, recv, recv_counts, dtype);
}

void Communicator::broadcast(void* buf, std::size_t count, DType dtype, int root) {
  start(Operation::broadcast(buf, buf, count, dtype, root), Sync::blocking).wait();
}
void Communicator::reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root) {
  start(Operation::reduce(send, recv, count, dtype, op, root), Sync::blocking).wait();
}
void Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  start(Operation::all_reduce(send, recv, count, dtype, op), Sync::blocking).wait();
}
void Communicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  start(Operation::all_gather(send, recv, count, dtype), Sync::blocking).wait();
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  start(Operation::reduce_scatter(send, recv, count, dtype, op), Sync::blocking).wait();
}
void Communicator::send(const void* buf, std::size_t count, DType dtype, int dest, int tag) {
  start(Operation::send_to(buf, count, dtype, dest, tag), Sync::blocking).wait();
}
void Communicator::recv(void* buf, std::size_t count, DType dtype, int source, int tag) {
  start(Operation::recv_from(buf, count, dtype, source, tag), Sync::blocking).wait();
}
void Communicator::barrier() { start(Operation::barrier(), Sync::blocking).wait(); }
void Communicator::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  iall_to_all(send, recv, count, dtype).wait();
}
void Communicator::all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                std::span<const std::size_t> recv_counts, DType dtype) {
  start_all_to_all(send, send_counts, recv, recv_counts, dtype).wait();
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  OPTIMUS_CHECK(color >= 0, "split color must be non-negative, got ", color);
  refuse_after_failure("split");
  std::unique_ptr<Communicator> child = do_split(color, key);
  OPTIMUS_CHECK(child->job_ == job_, "Communicator::split: the ", backend(), " backend's child has its own job state");
  if (timeout_.count() > 0) child->set_timeout(timeout_);  // collective over the child, as the split was
  return child;
}

void Communicator::refuse_after_failure(std::string_view what) const {
  if (!job_->failed()) return;
  OPTIMUS_FAIL(what, " on the ", backend(), " communicator refused: this rank's communication failed earlier (",
               job_->failure(), ")");
}

void Communicator::label(CallKind kind) {
  refuse_after_failure(name_of(kind));
  const bool message = kind == CallKind::send || kind == CallKind::recv;
  posting_ = CallLabel{.kind = kind, .number = message ? ++messages_ : ++collectives_};
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  OPTIMUS_CHECK(timeout.count() >= 0, "set_timeout: the timeout must not be negative, got ", timeout.count(), " ms");
  timeout_ = timeout;
  timeout_changed();
}

namespace {

std::string list_text(const std::vector<int>& values) {
  if (values.empty()) return "unknown";
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// "rank 2 (world rank 6)", "ranks 0, 2 (world ranks 4, 6)"; where the communicator knows hosts, "rank 2 (world rank 6
// on node3)", "ranks 0, 1, 2 (world ranks 4, 5 on node2, 6 on node3)".
std::string ranks_text(const std::vector<int>& ranks, const Communicator& comm) {
  const std::vector<int> world = comm.world_ranks();
  std::vector<int> theirs;
  for (int r : ranks) theirs.push_back(r >= 0 && r < static_cast<int>(world.size()) ? world[static_cast<std::size_t>(r)] : -1);
  const char* noun = ranks.size() == 1 ? "rank " : "ranks ";
  std::string located;  // the world ranks, each run of ranks on one host followed by the host's name
  for (std::size_t k = 0; k < theirs.size(); ++k) {
    const std::string host = comm.host_of(theirs[k]);
    located += (k == 0 ? "" : ", ") + std::to_string(theirs[k]);
    if (!host.empty() && (k + 1 == theirs.size() || comm.host_of(theirs[k + 1]) != host)) located += " on " + host;
  }
  return noun + list_text(ranks) + " (world " + noun + (theirs.empty() ? "unknown" : located) + ")";
}

}  // namespace

std::string Communicator::describe(const CallLabel& call) const {
  return describe(call, backend(), size(), world_ranks(), rank());
}

std::string Communicator::describe(const CallLabel& call, std::string_view backend, int size,
                                   const std::vector<int>& world_ranks, int rank) {
  const bool message = call.kind == CallKind::send || call.kind == CallKind::recv;
  return detail::concat(name_of(call.kind), message ? " (message " : " #", call.number, message ? ")" : "", " on the ",
                        backend, " communicator of ", size, " ranks (world ranks ", list_text(world_ranks),
                        "), at its rank ", rank);
}

void Communicator::watchdog_expired(const CallLabel& call, const std::optional<std::vector<int>>& missing,
                                    const std::string& more) const {
  const double seconds = std::chrono::duration<double>(timeout_).count();
  const Error error(missing && !missing->empty()
                        ? detail::concat("watchdog: ", describe(call), " did not complete within ", seconds,
                                         " s; not joined by ", ranks_text(*missing, *this), more)
                        : detail::concat("watchdog: ", describe(call), " did not complete within ", seconds, " s",
                                         !more.empty() ? more
                                         : missing     ? "; every rank has joined it"
                                                       : "; which ranks have not joined it is unknown here"),
                    __FILE__, __LINE__);
  job_->fail(std::make_exception_ptr(error));
  throw error;
}

void Communicator::peers_gone(const CallLabel& call, const std::vector<int>& missing) const {
  const Error error(detail::concat(describe(call), " can never complete: ", ranks_text(missing, *this),
                                   missing.size() == 1 ? " has" : " have", " returned without joining it"),
                    __FILE__, __LINE__);
  job_->fail(std::make_exception_ptr(error));
  throw error;
}

std::string Communicator::withdrawn_message(const CallLabel& call, int lender) const {
  return detail::concat(describe(call), " can never complete: ", ranks_text({lender}, *this),
                        " withdrew the buffer it lent to it before this rank read it (its own wait failed or was "
                        "abandoned)");
}

}  // namespace optimus
