// Device collectives staged through host memory (optimus/comm/staged_collectives.hpp).
#include "optimus/comm/staged_collectives.hpp"

#include <string_view>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus {
namespace {

constexpr int kTag = 0;  // one tag: messages between two ranks match in the order they are posted, as on NCCL

// A reduction in the form a host grid would run it: blocking when the caller waits at once.
template <class Blocking, class Nonblocking>
void reduction(Sync sync, Blocking&& run_blocking, Nonblocking&& post) {
  if (sync == Sync::blocking) {
    run_blocking();
  } else {
    post().wait();
  }
}

}  // namespace

std::unique_ptr<StagedCollectives> StagedCollectives::create(Communicator& bootstrap, DeviceRuntime& device) {
  return std::unique_ptr<StagedCollectives>(new StagedCollectives(device, bootstrap.split(0, bootstrap.rank())));
}

StagedCollectives::StagedCollectives(DeviceRuntime& device, std::unique_ptr<Communicator> transport)
    : device_(&device), transport_(std::move(transport)) {}

void StagedCollectives::check_open(const char* op) const {
  OPTIMUS_CHECK(!aborted_, "staged collectives: ", op, " after the communicator was aborted");
  OPTIMUS_CHECK(!group_.open() || std::string_view(op) == "send" || std::string_view(op) == "recv",
                "staged collectives: ", op, " inside a group (only send and recv are grouped here)");
}

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

void StagedCollectives::broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                                  DeviceStream& stream) {
  check_open("broadcast");
  stream.synchronize();
  std::vector<std::byte> host = rank() == root ? download(send, count * size_of(dtype), stream)
                                               : std::vector<std::byte>(count * size_of(dtype));
  transport_->broadcast(host.data(), count, dtype, root);
  upload(recv, host, stream);
}

void StagedCollectives::reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root,
                               Sync sync, DeviceStream& stream) {
  check_open("reduce");
  stream.synchronize();
  const std::vector<std::byte> in = download(send, count * size_of(dtype), stream);
  std::vector<std::byte> out(rank() == root ? count * size_of(dtype) : 0);
  void* to = rank() == root ? out.data() : nullptr;
  reduction(sync, [&] { transport_->reduce(in.data(), to, count, dtype, op, root); },
            [&] { return transport_->ireduce(in.data(), to, count, dtype, op, root); });
  upload(recv, out, stream);
}

void StagedCollectives::all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                   Sync sync, DeviceStream& stream) {
  check_open("all_reduce");
  stream.synchronize();
  const std::vector<std::byte> in = download(send, count * size_of(dtype), stream);
  std::vector<std::byte> out(count * size_of(dtype));
  reduction(sync, [&] { transport_->all_reduce(in.data(), out.data(), count, dtype, op); },
            [&] { return transport_->iall_reduce(in.data(), out.data(), count, dtype, op); });
  upload(recv, out, stream);
}

void StagedCollectives::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                                   DeviceStream& stream) {
  check_open("all_gather");
  stream.synchronize();
  const std::vector<std::byte> in = download(send, count * size_of(dtype), stream);
  std::vector<std::byte> out(count * size_of(dtype) * static_cast<std::size_t>(size()));
  transport_->all_gather(in.data(), out.data(), count, dtype);
  upload(recv, out, stream);
}

void StagedCollectives::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                                       Sync sync, DeviceStream& stream) {
  check_open("reduce_scatter");
  stream.synchronize();
  const std::vector<std::byte> in = download(send, count * size_of(dtype) * static_cast<std::size_t>(size()), stream);
  std::vector<std::byte> out(count * size_of(dtype));
  reduction(sync, [&] { transport_->reduce_scatter(in.data(), out.data(), count, dtype, op); },
            [&] { return transport_->ireduce_scatter(in.data(), out.data(), count, dtype, op); });
  upload(recv, out, stream);
}

void StagedCollectives::send(const void* buf, std::size_t count, DType dtype, int peer, DeviceStream& stream) {
  check_open("send");
  P2p op{.device = const_cast<void*>(buf), .host = {}, .count = count, .dtype = dtype, .peer = peer, .sends = true};
  if (group_.open()) return group_.add(std::move(op), stream);
  run_group({std::move(op)}, stream);
}

void StagedCollectives::recv(void* buf, std::size_t count, DType dtype, int peer, DeviceStream& stream) {
  check_open("recv");
  P2p op{.device = buf, .host = {}, .count = count, .dtype = dtype, .peer = peer, .sends = false};
  if (group_.open()) return group_.add(std::move(op), stream);
  run_group({std::move(op)}, stream);
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
