// One communication operation as a value (optimus/comm/operation.hpp).
#include "optimus/comm/operation.hpp"

namespace optimus {

Operation Operation::broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  return {.kind = CallKind::broadcast, .send = send, .recv = recv, .count = count, .dtype = dtype, .peer = root};
}

Operation Operation::reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root) {
  return {.kind = CallKind::reduce, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op, .peer = root};
}

Operation Operation::all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  return {.kind = CallKind::all_reduce, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
}

Operation Operation::all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  return {.kind = CallKind::all_gather, .send = send, .recv = recv, .count = count, .dtype = dtype};
}

Operation Operation::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  return {.kind = CallKind::reduce_scatter, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
}

Operation Operation::send_to(const void* buf, std::size_t count, DType dtype, int dest, int tag) {
  return {.kind = CallKind::send, .send = buf, .count = count, .dtype = dtype, .peer = dest, .tag = tag};
}

Operation Operation::recv_from(void* buf, std::size_t count, DType dtype, int source, int tag) {
  return {.kind = CallKind::recv, .recv = buf, .count = count, .dtype = dtype, .peer = source, .tag = tag};
}

Operation Operation::barrier() { return {.kind = CallKind::barrier}; }

namespace {
bool moves_data(CallKind kind) { return kind != CallKind::barrier && kind != CallKind::all_to_all; }
}  // namespace

bool Operation::reads(int rank) const {
  if (kind == CallKind::broadcast) return rank == peer;
  return moves_data(kind) && kind != CallKind::recv;
}

bool Operation::writes(int rank) const {
  if (kind == CallKind::reduce) return rank == peer;
  return moves_data(kind) && kind != CallKind::send;
}

std::size_t Operation::send_bytes(int size, int rank) const {
  const std::size_t n = count * size_of(dtype);
  if (!reads(rank)) return 0;
  return kind == CallKind::reduce_scatter ? n * static_cast<std::size_t>(size) : n;
}

std::size_t Operation::recv_bytes(int size, int rank) const {
  const std::size_t n = count * size_of(dtype);
  if (!writes(rank)) return 0;
  return kind == CallKind::all_gather ? n * static_cast<std::size_t>(size) : n;
}

bool Operation::reduces() const {
  return kind == CallKind::reduce || kind == CallKind::all_reduce || kind == CallKind::reduce_scatter;
}

bool Operation::point_to_point() const { return kind == CallKind::send || kind == CallKind::recv; }

Operation Operation::on(const void* new_send, void* new_recv) const {
  Operation moved = *this;
  moved.send = new_send;
  moved.recv = new_recv;
  return moved;
}

}  // namespace optimus
