// The simulated device's NCCL (optimus/sim/collectives.hpp): each operation queued on its stream runs the transport
// (a host communicator) on the host storage behind the device buffers, polling so that abort() can end it.
#include "optimus/sim/collectives.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"

namespace optimus::sim {
namespace {

constexpr int kDataTag = 0, kAckTag = 1;  // the transport's tags: the messages, and the rendezvous' replies

// Runs the transport's operation to completion, polling (an in-process or MPI wait could not be interrupted) so that
// an abort ends it: the operation is then abandoned. Past the transport's timeout its watchdog's error, which names the
// ranks that have not joined, is the operation's (asynchronous) error; once the rank's job has failed, test() throws.
void complete(Collectives::State& state, const Communicator& transport, Request request) {
  const auto started = std::chrono::steady_clock::now();
  const std::chrono::milliseconds timeout = transport.timeout();
  auto pause = std::chrono::microseconds(1);
  while (!request.test()) {
    if (state.aborted.load()) {
      request.abandon();
      OPTIMUS_FAIL("sim collectives: aborted while an operation was waiting for its peers");
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - started > timeout) request.expire();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

Access access(const void* p, std::size_t bytes, bool writes) { return {.begin = p, .bytes = bytes, .writes = writes}; }

// The stream work's name (a stream keeps the pointer).
const char* work_name(CallKind kind) {
  switch (kind) {
    case CallKind::broadcast: return "sim broadcast";
    case CallKind::reduce: return "sim reduce";
    case CallKind::all_reduce: return "sim all_reduce";
    case CallKind::all_gather: return "sim all_gather";
    case CallKind::reduce_scatter: return "sim reduce_scatter";
    case CallKind::send: return "sim send";
    case CallKind::recv: return "sim recv";
    default: return "sim collective";
  }
}

}  // namespace

std::unique_ptr<Collectives> Collectives::create(Communicator& bootstrap, Runtime& device) {
  std::unique_ptr<Communicator> transport = bootstrap.split(0, bootstrap.rank());
  OPTIMUS_CHECK(transport->allows_any_thread(), "sim collectives over ", bootstrap.backend(),
                ": the simulated device's streams call the transport from their own threads, which needs "
                "MPI_THREAD_MULTIPLE (this MPI was initialized with less)");
  if (transport->backend() == "in-process") set_in_process_staging(*transport, host_staging());  // host storage
  return std::unique_ptr<Collectives>(new Collectives(device, std::move(transport)));
}

Collectives::Collectives(Runtime& device, std::unique_ptr<Communicator> transport)
    : device_(&device), transport_(std::move(transport)), blocking_reductions_(transport_->backend() == "mpi") {}

void Collectives::queue(DeviceStream& stream, const char* name, std::vector<Access> accesses,
                        std::function<void()> work) {
  OPTIMUS_CHECK(!group_.open(), "sim collectives: ", name, " inside a group (only send and recv are grouped here)");
  OPTIMUS_CHECK(!state_->aborted.load(), "sim collectives: ", name, " after the communicator was aborted");
  Stream& s = device_->own(stream, name);
  s.launch(name, std::move(accesses), [state = state_, work = std::move(work)] {
    {
      std::lock_guard lock(state->mu);
      if (state->aborted.load() || state->error) return;  // an aborted or failed communicator moves nothing more
    }
    try {
      work();
    } catch (...) {
      std::lock_guard lock(state->mu);
      if (!state->error) state->error = std::current_exception();
    }
  });
}

// The transport runs the operation on the host storage behind the buffers: a broadcast in place (the root's values
// copied to its receive buffer first); a reduction blocking where the transport sums differently then and the caller
// waits at once (as a host grid calls it); every other operation non-blocking, abortable.
void Collectives::run(const Operation& o, Sync sync, DeviceStream& stream) {
  const char* name = work_name(o.kind);
  const std::size_t in = o.send_bytes(size(), rank()), out = o.recv_bytes(size(), rank());
  const void* from =
      o.reads(rank()) ? device_->translate(o.send, in, (std::string(name) + ", send buffer").c_str()) : nullptr;
  void* to =
      o.writes(rank()) ? device_->translate(o.recv, out, (std::string(name) + ", receive buffer").c_str()) : nullptr;
  std::vector<Access> accesses;
  if (o.reads(rank())) accesses.push_back(access(o.send, in, false));
  if (o.writes(rank())) accesses.push_back(access(o.recv, out, true));
  if (o.point_to_point()) {
    const bool sends = o.kind == CallKind::send;
    const P2p op{.host = sends ? const_cast<void*>(from) : to, .bytes = sends ? in : out, .peer = o.peer,
                 .sends = sends};
    if (!group_.open()) return queue_p2p(stream, {op}, std::move(accesses));
    return group_.add({.op = op, .access = accesses.front()}, stream);
  }
  const bool blocking = blocking_reductions_ && sync == Sync::blocking && o.reduces();
  const bool broadcast = o.kind == CallKind::broadcast;
  queue(stream, name, std::move(accesses),
        [t = transport_, st = state_, host = broadcast ? o.on(to, to) : o.on(from, to), from, to, in, broadcast,
         blocking] {
          if (broadcast && from != nullptr && from != to) std::memcpy(to, from, in);
          if (blocking) {
            t->start(host, Sync::blocking).wait();
          } else {
            complete(*st, *t, t->start(host, Sync::nonblocking));
          }
        });
}

void Collectives::group_start() { group_.start(); }

void Collectives::group_end() {
  auto [grouped, stream] = group_.end();
  std::vector<P2p> operations;
  std::vector<Access> accesses;
  for (Grouped& g : grouped) {
    operations.push_back(g.op);
    accesses.push_back(g.access);
  }
  if (!operations.empty()) queue_p2p(*stream, std::move(operations), std::move(accesses));
}

// The operations' data are posted at once (the operations of a group progress together); then each receive, once it
// has its data, acknowledges it, and each send completes when its receive has acknowledged: NCCL's rendezvous, so an
// ungrouped send waits for the peer's receive to run.
// If an abort ends the wait, every operation still outstanding is abandoned (none is waited for: that could hang the
// stream) and the acknowledgement bytes are kept for as long as the collectives, as the transport may still use them.
void Collectives::queue_p2p(DeviceStream& stream, std::vector<P2p> operations, std::vector<Access> accesses) {
  queue(stream, "sim send/recv", std::move(accesses), [t = transport_, st = state_, ops = std::move(operations)] {
    auto acks_bytes = std::make_unique<std::uint8_t[]>(ops.size());  // 1 sent by a receive; a send's reply
    std::vector<Request> data, acks;
    try {
      for (const P2p& op : ops) {
        data.push_back(op.sends ? t->isend(op.host, op.bytes, DType::u8, op.peer, kDataTag)
                                : t->irecv(op.host, op.bytes, DType::u8, op.peer, kDataTag));
      }
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].sends) continue;
        complete(*st, *t, std::move(data[i]));
        acks_bytes[i] = 1;
        acks.push_back(t->isend(&acks_bytes[i], 1, DType::u8, ops[i].peer, kAckTag));
      }
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (!ops[i].sends) continue;
        complete(*st, *t, std::move(data[i]));
        complete(*st, *t, t->irecv(&acks_bytes[i], 1, DType::u8, ops[i].peer, kAckTag));
      }
      for (Request& a : acks) complete(*st, *t, std::move(a));
    } catch (...) {
      for (Request& r : data) r.abandon();
      for (Request& r : acks) r.abandon();
      std::lock_guard lock(st->mu);
      st->abandoned.push_back(std::move(acks_bytes));
      throw;
    }
  });
}

void Collectives::check_async_errors() {
  std::lock_guard lock(state_->mu);
  if (state_->error) std::rethrow_exception(state_->error);
}

void Collectives::abort() noexcept { state_->aborted.store(true); }

std::unique_ptr<DeviceCollectives> Collectives::split(int color, int key) {
  return std::unique_ptr<Collectives>(new Collectives(*device_, transport_->split(color, key)));
}

}  // namespace optimus::sim
