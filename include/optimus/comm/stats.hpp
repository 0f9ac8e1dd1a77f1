// Exact traffic counters of a communicator (docs/design.md, "Communicators").
//
// Per rank and per kind of call: the calls made and the payload bytes delivered to and from this
// rank, by one convention (n = the buffer's bytes, p = the communicator's size, nothing when p == 1):
//   broadcast       non-roots receive n; the root sends n
//   reduce          the root receives (p-1)*n; every non-root sends n
//   all-reduce      every rank sends and receives floor(2*(p-1)*n/p)   (ring: reduce-scatter + all-gather)
//   all-gather      every rank sends and receives (p-1)*n, n = its own contribution
//   reduce-scatter  every rank sends and receives (p-1)*n, n = its own result block
//   all-to-all      every rank sends what it sends the others and receives what they send it (its own block is not
//                   counted): (p-1)*n each way for the fixed form, n = one block
//   send / recv     the message
// These are the volumes the code asks the network to move (the nccl-tests bus-bandwidth convention),
// so a redundant or oversized collective shows up in them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace optimus {

enum class CallKind { broadcast, reduce, all_reduce, all_gather, reduce_scatter, send, recv, barrier, all_to_all };
inline constexpr std::size_t kCallKinds = 9;

std::string_view name_of(CallKind kind);

struct CallStats {
  std::uint64_t calls = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

struct CommStats {
  std::uint64_t calls = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::array<CallStats, kCallKinds> by_kind{};

  const CallStats& operator[](CallKind kind) const { return by_kind[static_cast<std::size_t>(kind)]; }

  void add(CallKind kind, std::uint64_t sent, std::uint64_t received) {
    CallStats& k = by_kind[static_cast<std::size_t>(kind)];
    ++k.calls;
    k.bytes_sent += sent;
    k.bytes_received += received;
    ++calls;
    bytes_sent += sent;
    bytes_received += received;
  }
};

}  // namespace optimus
