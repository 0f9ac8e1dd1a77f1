// One communication operation as a value: what a backend is asked to move (docs/design.md, "Communicators").
//
// Communicator::start checks and counts an Operation once, then hands it to its backend's one transport function
// (Communicator::post); a device's collectives (device_collectives.hpp) take the same value on device buffers. So a
// backend supplies how bytes move, and nothing is written per operation twice: the simulated device's collectives and
// those staged through the host run the host transport's operation with the buffers swapped (Operation::on).
#pragma once

#include <cstddef>

#include "optimus/comm/stats.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/reduce_op.hpp"

namespace optimus {

struct Operation {
  // One of broadcast, reduce, all_reduce, all_gather, reduce_scatter, send, recv, barrier (all_to_all is written over
  // sends and receives: Communicator::iall_to_all_v).
  CallKind kind = CallKind::barrier;
  // What this rank reads: a broadcast's values (the root's), a reduction's or gather's contribution, a message sent.
  const void* send = nullptr;
  // Where this rank's result goes: a broadcast's values (equal to send for a host communicator's broadcast, which is in
  // place), a reduction's result (a reduce's root only), the gathered blocks, a message received.
  void* recv = nullptr;
  // Elements: the buffer's (broadcast, reduce, all_reduce, send, recv), one rank's block (all_gather: its contribution;
  // reduce_scatter: its result).
  std::size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;  // the reductions'
  int peer = -1;                // the root (broadcast, reduce), the destination (send), the source (recv); else -1
  int tag = 0;                  // send and recv

  static Operation broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root);
  static Operation reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op, int root);
  static Operation all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  static Operation all_gather(const void* send, void* recv, std::size_t count, DType dtype);
  static Operation reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  static Operation send_to(const void* buf, std::size_t count, DType dtype, int dest, int tag);
  static Operation recv_from(void* buf, std::size_t count, DType dtype, int source, int tag);
  static Operation barrier();

  // Whether rank `rank` reads send, and writes recv, at all: a broadcast's send and a reduce's recv are the root's
  // alone; a barrier moves nothing, a send receives nothing, a receive sends nothing.
  bool reads(int rank) const;
  bool writes(int rank) const;
  // The bytes rank `rank` of `size` ranks reads at send and writes at recv (0 where it does not).
  std::size_t send_bytes(int size, int rank) const;
  std::size_t recv_bytes(int size, int rank) const;
  // Whether it reduces (reduce, all_reduce, reduce_scatter): the operations whose summation order a backend's blocking
  // and non-blocking forms may change.
  bool reduces() const;
  // Whether it is a send or a receive (grouped on a device, matched by tag on a host).
  bool point_to_point() const;
  // The same operation on other buffers: a staging copy, the host storage behind device buffers.
  Operation on(const void* new_send, void* new_recv) const;
};

}  // namespace optimus
