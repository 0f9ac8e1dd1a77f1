// Collective checks shared by the MPI and in-process suites. Values are small integers stored in doubles,
// so sums are exact and results can be compared with ==.
#include "collective_cases.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "optimus/core/error.hpp"

namespace optimus::test {
namespace {
double value(int rank, std::size_t e) { return 100.0 * rank + static_cast<double>(e); }
}  // namespace

void check_collectives(Communicator& comm) {
  const int p = comm.size();
  const int me = comm.rank();
  const std::size_t n = 5;
  for (int root = 0; root < p; ++root) {
    std::vector<double> buf(n);
    for (std::size_t e = 0; e < n; ++e) buf[e] = me == root ? value(root, e) : -1.0;
    comm.broadcast(buf.data(), n, DType::f64, root);
    for (std::size_t e = 0; e < n; ++e) CHECK(buf[e] == value(root, e));

    // The same through a view: the root's values wherever the backend puts them. In-process with host staging, a
    // receiver reads the root's own buffer, in place; elsewhere its own buffer, written.
    std::vector<double> lent(n), mine(n, -1.0);
    for (std::size_t e = 0; e < n; ++e) lent[e] = value(root, e) + 0.5;
    void* const receive = me == root ? lent.data() : mine.data();
    BroadcastView view = comm.ibroadcast_view(receive, n, DType::f64, root);
    view.wait();
    const auto* seen = static_cast<const double*>(view.data());
    for (std::size_t e = 0; e < n; ++e) CHECK(seen[e] == value(root, e) + 0.5);
    const bool host_staging = !comm.takes_buffers_on(Device::sim) && !comm.takes_buffers_on(Device::cuda);
    const bool in_place = comm.backend() == "in-process" && host_staging && p > 1;
    CHECK((seen == receive) == (me == root || !in_place));
    CHECK((mine[0] == -1.0) == (me == root || in_place));  // the receive buffer is written only when copied into
    view.release();

    std::vector<double> send(n), recv(n, -1.0);
    for (std::size_t e = 0; e < n; ++e) send[e] = value(me, e);
    comm.reduce(send.data(), recv.data(), n, DType::f64, ReduceOp::sum, root);
    if (me == root) {
      for (std::size_t e = 0; e < n; ++e) CHECK(recv[e] == 100.0 * p * (p - 1) / 2 + static_cast<double>(p * e));
    }
  }

  std::vector<float> x(n);
  for (std::size_t e = 0; e < n; ++e) x[e] = static_cast<float>(value(me, e));
  std::vector<float> mx(n), mn(n);
  comm.all_reduce(x.data(), mx.data(), n, DType::f32, ReduceOp::max);
  comm.all_reduce(x.data(), mn.data(), n, DType::f32, ReduceOp::min);
  comm.all_reduce(x.data(), x.data(), n, DType::f32, ReduceOp::sum);  // in place
  for (std::size_t e = 0; e < n; ++e) {
    CHECK(mx[e] == static_cast<float>(value(p - 1, e)));
    CHECK(mn[e] == static_cast<float>(value(0, e)));
    CHECK(x[e] == static_cast<float>(100.0 * p * (p - 1) / 2 + static_cast<double>(p * e)));
  }
  CHECK(comm.all_reduce(1.0 + me, ReduceOp::sum) == p * (p + 1) / 2.0);

  std::vector<double> mine(n), all(n * static_cast<std::size_t>(p));
  for (std::size_t e = 0; e < n; ++e) mine[e] = value(me, e);
  comm.all_gather(mine.data(), all.data(), n, DType::f64);
  for (int r = 0; r < p; ++r)
    for (std::size_t e = 0; e < n; ++e) CHECK(all[static_cast<std::size_t>(r) * n + e] == value(r, e));

  // reduce_scatter: rank r contributes value(r, e) at every element e of p*n; receives block `me` summed.
  std::vector<double> full(n * static_cast<std::size_t>(p)), block(n);
  for (std::size_t e = 0; e < full.size(); ++e) full[e] = value(me, e);
  comm.reduce_scatter(full.data(), block.data(), n, DType::f64, ReduceOp::sum);
  for (std::size_t e = 0; e < n; ++e) {
    CHECK(block[e] == 100.0 * p * (p - 1) / 2 + static_cast<double>(p) * static_cast<double>(me * n + e));
  }

  // A ring of messages, posted non-blocking in both directions.
  std::vector<double> out(n), in(n, -1.0);
  for (std::size_t e = 0; e < n; ++e) out[e] = value(me, e);
  Request r_recv = comm.irecv(in.data(), n, DType::f64, (me + p - 1) % p, 7);
  Request r_send = comm.isend(out.data(), n, DType::f64, (me + 1) % p, 7);
  r_send.wait();
  r_recv.wait();
  for (std::size_t e = 0; e < n; ++e) CHECK(in[e] == value((me + p - 1) % p, e));
  comm.barrier();

  // bf16 moves as bits.
  std::vector<bf16> h(3, bf16(me == 0 ? 1.5f : 0.0f));
  comm.broadcast(h.data(), h.size(), DType::bf16, 0);
  for (bf16 v : h) CHECK(static_cast<float>(v) == 1.5f);

  check_all_to_all(comm);
}

void check_all_to_all(Communicator& comm) {
  const int p = comm.size();
  const int me = comm.rank();
  const auto ranks = static_cast<std::size_t>(p);
  // Fixed: block r of rank me's n * p elements goes to rank r; block r received is rank r's block me.
  const std::size_t n = 3;
  std::vector<double> out(n * ranks), in(n * ranks, -1.0);
  for (std::size_t e = 0; e < out.size(); ++e) out[e] = value(me, e);
  comm.all_to_all(out.data(), in.data(), n, DType::f64);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t e = 0; e < n; ++e) CHECK(in[r * n + e] == value(static_cast<int>(r), me * n + e));
  }

  // Variable, non-blocking: rank a sends rank b (a + b) % 3 elements (none, one or two), 1000 a + 10 b + e.
  auto count = [](int a, int b) { return static_cast<std::size_t>((a + b) % 3); };
  std::vector<std::size_t> send_counts(ranks), recv_counts(ranks);
  std::vector<float> sent, received_expected;
  for (int r = 0; r < p; ++r) {
    send_counts[static_cast<std::size_t>(r)] = count(me, r);
    recv_counts[static_cast<std::size_t>(r)] = count(r, me);
    for (std::size_t e = 0; e < count(me, r); ++e) sent.push_back(static_cast<float>(1000 * me + 10 * r + e));
    for (std::size_t e = 0; e < count(r, me); ++e) {
      received_expected.push_back(static_cast<float>(1000 * r + 10 * me + e));
    }
  }
  std::vector<float> received(received_expected.size() + 1, -1.0f);  // one past: never written
  Request all = comm.iall_to_all_v(sent.data(), send_counts, received.data(), recv_counts, DType::f32);
  all.wait();
  CHECK(std::equal(received_expected.begin(), received_expected.end(), received.begin()));
  CHECK(received.back() == -1.0f);

  // Checked on each rank alike, before anything is posted: the counts' number, the rank's own block, the tags left.
  const std::vector<std::size_t> short_counts(ranks + 1, 1), own(ranks, 1);
  const std::string counts_refused =
      detail::concat(ranks + 1, " send counts and ", ranks, " receive counts on a communicator of size ", p);
  CHECK_THROWS_WITH_AS(comm.all_to_all_v(out.data(), short_counts, in.data(), own, DType::f64),
                       doctest::Contains(counts_refused.c_str()), Error);
  std::vector<std::size_t> more = own;
  more[static_cast<std::size_t>(me)] = 2;
  const std::string own_refused = detail::concat("rank ", me, " sends itself 1 elements but receives 2");
  CHECK_THROWS_WITH_AS(comm.all_to_all_v(out.data(), own, in.data(), more, DType::f64),
                       doctest::Contains(own_refused.c_str()), Error);
  CHECK_THROWS_WITH_AS(comm.all_to_all(out.data(), out.data(), 1, DType::f64), doctest::Contains("overlap"),
                       Error);
  CHECK_THROWS_WITH_AS(comm.isend(out.data(), 1, DType::f64, 0, Communicator::kMaxTag + 1),
                       doctest::Contains("send tag must be from 0 to 32766, got 32767"), Error);
  comm.barrier();  // the refusals posted nothing: the ranks still agree on what comes next
}

void check_counters(Communicator& comm) {
  const auto p = static_cast<std::uint64_t>(comm.size());
  const int me = comm.rank();
  const std::size_t n = 6;  // elements
  const std::uint64_t b = n * 8;
  std::vector<double> buf(n * p, 1.0), out(n * p);
  comm.reset_stats();
  comm.broadcast(buf.data(), n, DType::f64, 0);
  comm.reduce(buf.data(), out.data(), n, DType::f64, ReduceOp::sum, 0);
  comm.all_reduce(buf.data(), out.data(), n, DType::f64, ReduceOp::sum);
  comm.all_gather(buf.data(), out.data(), n, DType::f64);
  comm.reduce_scatter(buf.data(), out.data(), n, DType::f64, ReduceOp::sum);
  comm.all_to_all(buf.data(), out.data(), n, DType::f64);
  comm.barrier();
  const CommStats& s = comm.stats();
  const bool root = me == 0;
  const std::uint64_t many = p > 1 ? 1 : 0;
  CHECK(s[CallKind::broadcast].bytes_received == (root ? 0 : b));
  CHECK(s[CallKind::broadcast].bytes_sent == (root ? b * many : 0));
  CHECK(s[CallKind::reduce].bytes_received == (root ? (p - 1) * b : 0));
  CHECK(s[CallKind::reduce].bytes_sent == (root ? 0 : b));
  CHECK(s[CallKind::all_reduce].bytes_received == 2 * (p - 1) * b / p);
  CHECK(s[CallKind::all_gather].bytes_received == (p - 1) * b);
  CHECK(s[CallKind::reduce_scatter].bytes_received == (p - 1) * b);
  CHECK(s[CallKind::all_to_all].bytes_received == (p - 1) * b);  // its own block is not counted
  CHECK(s[CallKind::all_to_all].bytes_sent == (p - 1) * b);
  CHECK(s[CallKind::all_to_all].calls == 1);
  CHECK(s[CallKind::send].calls == 0);  // its transfers are the all_to_all's, not messages
  CHECK(s[CallKind::barrier].calls == 1);
  CHECK(s.calls == 7);
  CHECK(s.bytes_received == s[CallKind::broadcast].bytes_received + s[CallKind::reduce].bytes_received +
                                s[CallKind::all_reduce].bytes_received + s[CallKind::all_gather].bytes_received +
                                s[CallKind::reduce_scatter].bytes_received + s[CallKind::all_to_all].bytes_received);
  // A view is counted as the broadcast it is.
  std::vector<double> v(3, 1.0);
  const int last = comm.size() - 1;
  BroadcastView view = comm.ibroadcast_view(v.data(), v.size(), DType::f64, last);
  view.wait();
  view.release();
  const std::uint64_t vb = 3 * sizeof(double);
  const bool view_root = comm.rank() == last;
  CHECK(comm.stats()[CallKind::broadcast].calls == 2);
  CHECK(comm.stats()[CallKind::broadcast].bytes_received == (root ? 0 : b) + (view_root ? 0 : vb));
  CHECK(comm.stats()[CallKind::broadcast].bytes_sent == (root ? b * many : 0) + (view_root ? vb * many : 0));
  comm.reset_stats();
  CHECK(comm.stats().calls == 0);
}

void check_nonblocking(Communicator& comm) {
  const int p = comm.size();
  const int me = comm.rank();
  // Two communicators over the same ranks; operations are waited on in opposite orders on even and odd ranks.
  std::unique_ptr<Communicator> other = comm.split(0, me);
  std::vector<double> a(4, me == 0 ? 3.0 : 0.0);
  std::vector<double> s(4, 1.0);
  Request ra = comm.ibroadcast(a.data(), a.size(), DType::f64, 0);
  Request rs = other->iall_reduce(s.data(), s.data(), s.size(), DType::f64, ReduceOp::sum);
  if (me % 2 == 0) {
    ra.wait();
    rs.wait();
  } else {
    rs.wait();
    ra.wait();
  }
  for (double v : a) CHECK(v == 3.0);
  for (double v : s) CHECK(v == p);
  // test() polls to completion.
  double x = me;
  Request r = comm.iall_reduce(&x, &x, 1, DType::f64, ReduceOp::max);
  while (!r.test()) {
  }
  CHECK(x == p - 1);
  CHECK_FALSE(r.pending());
}

void check_split_and_errors(Communicator& comm) {
  const int p = comm.size();
  const int me = comm.rank();
  // Colors by parity; keys reverse the order.
  std::unique_ptr<Communicator> half = comm.split(me % 2, -me);
  const int members = (p - me % 2 + 1) / 2;
  CHECK(half->size() == members);
  CHECK(half->rank() == members - 1 - me / 2);
  const double sum = half->all_reduce(static_cast<double>(me), ReduceOp::sum);
  double expected = 0;
  for (int r = me % 2; r < p; r += 2) expected += r;
  CHECK(sum == expected);

  CHECK_THROWS_WITH_AS(comm.broadcast(nullptr, 0, DType::f64, p), doctest::Contains("outside a communicator of size"),
                       Error);
  std::vector<bf16> h(2);
  CHECK_THROWS_WITH_AS(comm.all_reduce(h.data(), h.data(), 2, DType::bf16, ReduceOp::sum),
                       doctest::Contains("bf16 is a storage type"), Error);
  CHECK_THROWS_AS(comm.split(-1, 0), Error);
}

}  // namespace optimus::test
