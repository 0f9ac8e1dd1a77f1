// Device collectives staged through host memory (optimus/comm/staged_collectives.hpp).
#include "optimus/comm/staged_collectives.hpp"

#include <string_view>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus {
namespace {

constexpr int kTag = 0;  // one tag: messages between two ranks match in the order they are posted, as on NCCL

}  // namespace

std::unique_ptr<StagedCollectives> StagedCollectives::create(Communicator& bootstrap, DeviceRuntime& device) {
  return std::unique_ptr<StagedCollectives>(new StagedCollectives(device, bootstrap.split(0, bootstrap.rank())));
}

StagedCollectives::StagedCollectives(DeviceRuntime& device, std::unique_ptr<Communicator> transport)
    : device_(&device), transport_(std::move(transport)) {}

std::vector<std::byte> StagedCollectives::download(const void* p, std::size_t bytes, DeviceStream& stream) {
  std::vector<std::byte> host(bytes);
  if (bytes > 0 && p != nullptr) {
    device_->copy_async(host.data(), p, bytes, stream);
    stream.synchronize();
  }
  return host;
}

void StagedCollectives::upload(void* p, const std::vector<std::byte>& host, DeviceStream& stream) {
  if (host.empty() || p == nullptr) return;
  device_->copy_async(p, host.data(), host.size(), stream);
  stream.synchronize();  // the host buffer dies on return
}

// The host transport runs the operation on host copies: a broadcast in place (the root's values, zeros elsewhere); a
// reduction in the form a host grid would run it (blocking when the caller waits at once), the rest blocking.
void StagedCollectives::run(const Operation& o, Sync sync, DeviceStream& stream) {
  OPTIMUS_CHECK(!aborted_, "staged collectives: ", name_of(o.kind), " after the communicator was aborted");
  if (o.point_to_point()) {
    const bool sends = o.kind == CallKind::send;
    P2p op{.device = sends ? const_cast<void*>(o.send) : o.recv, .host = {}, .count = o.count, .dtype = o.dtype,
           .peer = o.peer, .sends = sends};
    if (group_.open()) return group_.add(std::move(op), stream);
    return run_group({std::move(op)}, stream);
  }
  OPTIMUS_CHECK(!group_.open(), "staged collectives: ", name_of(o.kind),
                " inside a group (only send and recv are grouped here)");
  stream.synchronize();
  const bool broadcast = o.kind == CallKind::broadcast;
  std::vector<std::byte> in = download(o.send, o.send_bytes(size(), rank()), stream);
  if (broadcast) in.resize(o.recv_bytes(size(), rank()));  // the values arrive in place
  std::vector<std::byte> out(broadcast ? 0 : o.recv_bytes(size(), rank()));
  std::vector<std::byte>& result = broadcast ? in : out;
  transport_->start(o.on(in.data(), o.writes(rank()) ? result.data() : nullptr), o.reduces() ? sync : Sync::blocking)
      .wait();
  upload(o.recv, result, stream);
}

void StagedCollectives::group_start() { group_.start(); }

void StagedCollectives::group_end() {
  auto [operations, stream] = group_.end();
  if (!operations.empty()) run_group(std::move(operations), *stream);
}

// The sends' data are read after the stream's work, every operation is posted, then all are waited for and the
// receives' data written back: the operations of a group progress together.
void StagedCollectives::run_group(std::vector<P2p> operations, DeviceStream& stream) {
  stream.synchronize();
  std::vector<Request> requests;
  requests.reserve(operations.size());
  for (P2p& p : operations) {
    const std::size_t bytes = p.count * size_of(p.dtype);
    if (p.sends) {
      p.host = download(p.device, bytes, stream);
      requests.push_back(transport_->isend(p.host.data(), p.count, p.dtype, p.peer, kTag));
    } else {
      p.host.resize(bytes);
      requests.push_back(transport_->irecv(p.host.data(), p.count, p.dtype, p.peer, kTag));
    }
  }
  try {
    for (Request& r : requests) r.wait();
  } catch (...) {
    for (Request& r : requests) r.abandon();  // waiting for the others could hang; the collectives are done for
    aborted_ = true;
    throw;
  }
  for (const P2p& p : operations) {
    if (!p.sends) upload(p.device, p.host, stream);
  }
}

std::unique_ptr<DeviceCollectives> StagedCollectives::split(int color, int key) {
  return std::unique_ptr<StagedCollectives>(new StagedCollectives(*device_, transport_->split(color, key)));
}

}  // namespace optimus
