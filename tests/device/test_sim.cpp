// The simulated device, in-process: its own rules (memory host code cannot touch, streams and events, delays and
// races, copies, capacity, counters, its cuBLASLt's checks), then every device case (device_cases.hpp) at q = 1, 2, 3 —
// ranks sharing one device, and ranks with a device each over the simulated NCCL — and the findings the simulated
// device was built to catch, each with the test that fails without its fix.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "../grid/overlap_cases.hpp"
#include "../layers/layer_cases.hpp"
#include "device_cases.hpp"
#include "device_world.hpp"
#include "test_world.hpp"
#include "optimus/comm/device_communicator.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/gemm_engine.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/layers/dist_vector.hpp"
#include "optimus/sim/collectives.hpp"
#include "optimus/sim/lt_gemm.hpp"
#include "optimus/reference/matmul.hpp"
#include "optimus/sim/runtime.hpp"

namespace {

using optimus::Communicator;
using optimus::Device;
using optimus::Grid;
using optimus::RankDevice;
using optimus::Shape;
using optimus::Tensor;
using optimus::TensorView;
using optimus::test::on;
namespace ops = optimus::ops;
namespace sim = optimus::sim;

const optimus::test::DeviceTarget kSim{.kind = Device::sim, .sim = {}};
// Every piece of work delayed by up to 300 microseconds: ordering mistakes show.
const optimus::test::DeviceTarget kSimDelayed{.kind = Device::sim,
                                              .sim = {.delays = {.max_microseconds = 300, .seed = 7}}};

// Whether `fn` (host code touching device memory) faults: run in a fork, which must die of SIGSEGV or SIGBUS (or,
// under AddressSanitizer, exit 1 after its report of that fault) — not return, throw or abort. The child dies by the
// default action of the signal, quietly (no test framework or MPI report of the crash).
bool faults(const std::function<void()>& fn) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    try {
      fn();
    } catch (...) {
      _exit(3);  // an error is not a fault
    }
    _exit(0);  // reached only if the access went through
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS;
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

}  // namespace

TEST_CASE("host code that reads or writes simulated device memory faults at once") {
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  Tensor<float> t(Shape{4, 4}, on(memory));
  REQUIRE(t.device() == Device::sim);
  float* p = t.data();
  std::vector<float> host(16, 1.0f);
  CHECK(faults([&] { std::memcpy(host.data(), p, 16 * sizeof(float)); }));  // a memcpy reading it
  CHECK(faults([&] { std::memcpy(p, host.data(), 16 * sizeof(float)); }));  // and writing it
  // A CPU kernel handed the device pointer as if it were host memory (a view that lost its device).
  CHECK(faults([&] { optimus::cpu::fill<float>(TensorView<float>(p, Shape{4, 4}, Device::cpu), 2.0f); }));
  CHECK(faults([&] { std::printf("%f\n", static_cast<double>(*static_cast<volatile float*>(p))); }));
  // The guard is what faults: the same accesses to host memory go through.
  CHECK_FALSE(faults([&] { std::memcpy(host.data(), host.data() + 8, 8 * sizeof(float)); }));
  // Copies through the device read and write it.
  memory.copy(p, host.data(), 16 * sizeof(float));
  CHECK(optimus::download(t) == host);
}

TEST_CASE("fresh and released device blocks are poisoned (NaN), released ones in the stream's order") {
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  Tensor<float> fresh(Shape{64}, on(memory), optimus::Init::none);
  for (float v : optimus::download(fresh)) CHECK(std::isnan(v));
  const float* block = fresh.data();
  std::vector<float> ones(64, 1.0f);
  memory.copy(fresh.data(), ones.data(), 64 * sizeof(float));
  fresh.reset();  // back to the pool's cache, poisoned
  Tensor<float> again(Shape{64}, on(memory), optimus::Init::none);
  CHECK(again.data() == block);  // the same block, handed out again
  for (float v : optimus::download(again)) CHECK(std::isnan(v));
  Tensor<float> zeroed(Shape{64}, on(memory));  // Init::zero
  for (float v : optimus::download(zeroed)) CHECK(v == 0.0f);
}

TEST_CASE("device work is checked when it is queued: ranges outside live allocations are refused") {
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  Tensor<float> t(Shape{8}, on(memory));
  const ops::Queue q{.stream = stream.get()};
  // A view reaching past the end of its block (the pool's block is 512 bytes: 129 floats are past it).
  const TensorView<float> too_long(t.data(), Shape{1, 129}, Device::sim);
  CHECK_THROWS_WITH_AS(ops::fill<float>(too_long, 1.0f, q), doctest::Contains("run past the end of their allocation"),
                       optimus::Error);
  std::vector<float> host(8);
  CHECK_THROWS_WITH_AS(ops::fill<float>(TensorView<float>(host.data(), Shape{8}, Device::sim), 1.0f, q),
                       doctest::Contains("is not device memory of sim device 0"), optimus::Error);
  // Another device's memory.
  sim::Runtime other(sim::Options{.ordinal = 1});
  auto other_stream = other.create_stream();
  optimus::DeviceMemoryPool other_memory(other, *other_stream);
  Tensor<float> elsewhere(Shape{8}, on(other_memory));
  CHECK_THROWS_WITH_AS(ops::fill<float>(elsewhere.view(), 1.0f, q),
                       doctest::Contains("is memory of sim device 1, not of sim device 0"), optimus::Error);
}

namespace {

// x = 1 on stream `first`, then y = 2 x on stream `second`, ordered by an event or not. Returns whether y came out
// right and the device did not fail.
bool producer_consumer(bool with_event) {
  sim::Runtime device(sim::Options{.delays = {.max_microseconds = 2000, .seed = 3}});
  auto first = device.create_stream(), second = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *first);
  Tensor<float> x(Shape{256}, on(memory), optimus::Init::none), y(Shape{256}, on(memory));
  first->synchronize();
  ops::fill<float>(x.view(), 1.0f, ops::Queue{.stream = first.get()});
  if (with_event) {
    auto produced = device.create_event();
    produced->record(*first);
    produced->wait_on(*second);
  }
  ops::axpby<float>(2.0f, std::as_const(x).view(), 0.0f, y.view(), ops::Queue{.stream = second.get()});
  try {
    second->synchronize();
    first->synchronize();
    std::vector<float> got(256);
    device.copy_async(got.data(), y.data(), got.size() * sizeof(float), *second);
    for (float v : got) {
      if (v != 2.0f) return false;
    }
    return true;
  } catch (const optimus::Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(std::string(e.what()).find("race") != std::string::npos);
    return false;
  }
}

}  // namespace

TEST_CASE("streams order only through events: a missing event gives a wrong result or a detected race") {
  int failed_without = 0, failed_with = 0;
  for (int trial = 0; trial < 12; ++trial) {
    failed_without += producer_consumer(false) ? 0 : 1;
    failed_with += producer_consumer(true) ? 0 : 1;
  }
  CHECK(failed_with == 0);
  CHECK(failed_without > 0);  // the delays expose the missing event
  MESSAGE("without the event, ", failed_without, " of 12 trials went wrong");
}

TEST_CASE("once device work has failed, polling an event throws the failure instead of reporting it done") {
  // As cudaEventQuery returns the sticky error: a poller (a communicator's request) must not take the skipped work
  // behind a failure for finished work.
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  auto& s = static_cast<sim::Stream&>(*stream);
  s.launch("failing kernel", {}, [] { OPTIMUS_FAIL("injected kernel failure"); });
  auto after = device.create_event();
  after->record(*stream);
  const auto poll = [&] {
    const auto start = std::chrono::steady_clock::now();
    while (!after->done()) {
      REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
      std::this_thread::yield();
    }
  };
  CHECK_THROWS_WITH_AS(poll(), doctest::Contains("injected kernel failure"), optimus::Error);
  CHECK_THROWS_WITH_AS(stream->synchronize(), doctest::Contains("injected kernel failure"), optimus::Error);
}

TEST_CASE("the legacy default stream does not order with non-blocking streams (a cudaMemcpy download races)") {
  // The download tests/cuda used to do: a kernel on the rank's (non-blocking) stream, then cudaMemcpy, which runs on
  // the legacy stream. Under delays it reads before the kernel wrote; a download on the kernel's stream does not.
  int legacy_wrong = 0, ordered_wrong = 0;
  for (int trial = 0; trial < 12; ++trial) {
    sim::Runtime device(sim::Options{.delays = {.max_microseconds = 2000, .seed = static_cast<std::uint64_t>(trial)}});
    auto stream = device.create_stream();
    optimus::DeviceMemoryPool memory(device, *stream);
    Tensor<float> x(Shape{64}, on(memory), optimus::Init::none);
    stream->synchronize();
    std::vector<float> legacy(64), ordered(64);
    ops::fill<float>(x.view(), 3.0f, ops::Queue{.stream = stream.get()});
    try {
      device.copy(legacy.data(), x.data(), 64 * sizeof(float));  // cudaMemcpy: legacy stream only
    } catch (const optimus::Error&) {
      ++legacy_wrong;  // a detected race
      continue;
    }
    device.copy_async(ordered.data(), x.data(), 64 * sizeof(float), *stream);  // the stream that wrote it
    legacy_wrong += legacy != std::vector<float>(64, 3.0f) ? 1 : 0;
    ordered_wrong += ordered != std::vector<float>(64, 3.0f) ? 1 : 0;
  }
  CHECK(ordered_wrong == 0);
  CHECK(legacy_wrong > 0);
}

TEST_CASE("copies keep CUDA's completion rules: pageable sources are taken at once, pageable results are complete") {
  sim::Runtime device(sim::Options{.delays = {.max_microseconds = 500, .seed = 11}});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  Tensor<int> t(Shape{32}, on(memory));
  std::vector<int> host(32, 7);
  device.copy_async(t.data(), host.data(), 32 * sizeof(int), *stream);  // may complete after it returns...
  std::fill(host.begin(), host.end(), -1);                              // ...but the source was taken already
  std::vector<int> back(32, 0);
  device.copy_async(back.data(), t.data(), 32 * sizeof(int), *stream);  // to pageable memory: complete on return
  CHECK(back == std::vector<int>(32, 7));
  // Page-locked memory is read when the copy runs: the host must not change it before.
  auto* pinned = static_cast<int*>(device.allocate_pinned(32 * sizeof(int)));
  CHECK(device.memory_type(pinned) == optimus::MemoryType::pinned);
  CHECK(device.memory_type(host.data()) == optimus::MemoryType::pageable);
  CHECK(device.memory_type(t.data()) == optimus::MemoryType::device);
  for (int e = 0; e < 32; ++e) pinned[e] = e;
  device.copy_async(t.data(), pinned, 32 * sizeof(int), *stream);
  stream->synchronize();
  device.release_pinned(pinned);
  CHECK(optimus::download(t)[31] == 31);
}

TEST_CASE("pageable host copies go through two pinned buffers, chunk by chunk, allocated once") {
  for (Device kind : {Device::sim}) {
    CAPTURE(static_cast<int>(kind));
    sim::Runtime device(sim::Options{.delays = {.max_microseconds = 200, .seed = 5}});
    auto stream = device.create_stream();
    optimus::DeviceMemoryPool memory(device, *stream);
    optimus::PinnedStaging staging(device, 1000);  // small chunks: 3500 bytes take four, both buffers in turn
    std::vector<unsigned char> host(3500), back(3500, 0);
    for (std::size_t e = 0; e < host.size(); ++e) host[e] = static_cast<unsigned char>(e * 7 + 3);
    Tensor<std::uint8_t> a(Shape{3500}, on(memory)), b(Shape{3500}, on(memory));
    const sim::Traffic before = device.traffic();
    for (int round = 0; round < 3; ++round) {
      staging.copy(a.data(), host.data(), host.size(), *stream);  // up, staged
      staging.copy(b.data(), a.data(), host.size(), *stream);     // device to device, direct
      std::fill(back.begin(), back.end(), 0);
      staging.copy(back.data(), b.data(), back.size(), *stream);  // down, staged
      CHECK(back == host);
    }
    CHECK(staging.pinned_allocations() == 2);
    const sim::Traffic after = device.traffic();
    CHECK(after.host_to_device - before.host_to_device == 3 * 3500);
    CHECK(after.device_to_host - before.device_to_host == 3 * 3500);
    CHECK(after.device_to_device - before.device_to_device == 3 * 3500);
  }
}

TEST_CASE("exact copy counters: a matrix placed on, gathered from and cloned on a device") {
  sim::Runtime device(sim::Options{});
  optimus::test::run_in_process(1, [&](Communicator& world) {
    RankDevice rank(device, ops::GemmMath::f32);
    Grid grid = rank.grid(world, 1);
    const sim::Traffic start = device.traffic();
    const auto m = optimus::DistMatrix<float>::from_global(grid, optimus::reference::random_matrix(12, 10, 1));
    const sim::Traffic placed = device.traffic();
    CHECK(placed.host_to_device - start.host_to_device == 12 * 10 * 4);
    CHECK(placed.device_to_host == start.device_to_host);
    const auto full = m.to_global();
    CHECK(device.traffic().device_to_host - placed.device_to_host == 12 * 10 * 4);
    const auto copy = m.clone();
    CHECK(device.traffic().device_to_device - placed.device_to_device == 12 * 10 * 4);
    CHECK(copy.to_global() == full);
  });
}

TEST_CASE("a device's capacity: out of memory names the request and what is free, as on a GPU") {
  sim::Runtime device(sim::Options{.capacity = 64 << 10});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  Tensor<float> half(Shape{8 << 10}, on(memory));  // 32 KiB
  CHECK(device.bytes_in_use() == 32 << 10);
  CHECK_THROWS_WITH_AS(Tensor<float>(Shape{12 << 10}, on(memory)),
                       doctest::Contains("sim device 0 out of memory: requested 49152 bytes"), optimus::Error);
  CHECK_THROWS_WITH_AS(Tensor<float>(Shape{12 << 10}, on(memory)),
                       doctest::Contains("sim device 0 has 32768 bytes free of 65536"), optimus::Error);
  Tensor<float> rest(Shape{8 << 10}, on(memory));  // what is free still works
  CHECK(device.bytes_in_use() == 64 << 10);
}

TEST_CASE("a copy engine of a given bandwidth holds each host<->device copy's stream for bytes / bandwidth; the trace") {
  CHECK_THROWS_WITH_AS(sim::Runtime(sim::Options{.copy_bandwidth = 0}),
                       doctest::Contains("copy bandwidth of 0 bytes per second: must be positive"), optimus::Error);
  const double bandwidth = 1e9;  // bytes per second
  sim::Runtime device(sim::Options{.copy_bandwidth = bandwidth});
  auto up = device.create_stream();
  auto down = device.create_stream();
  const std::size_t bytes = std::size_t{2} << 20;
  void* d = device.allocate(bytes);
  void* e = device.allocate(bytes);
  void* pinned = device.allocate_pinned(bytes);
  std::memset(pinned, 7, bytes);
  device.set_tracing(true);
  device.copy_async(d, pinned, bytes, *up);    // host to device, throttled
  device.copy_async(e, d, bytes, *up);         // device to device: not throttled
  auto copied = device.create_event();
  copied->record(*up);
  copied->wait_on(*down);
  device.copy_async(pinned, e, bytes, *down);  // device to host
  up->synchronize();
  down->synchronize();
  device.set_tracing(false);
  const std::vector<sim::Runtime::Span> spans = device.trace();
  const double floor_us = static_cast<double>(bytes) / bandwidth * 1e6;
  int h2d = 0, d2h = 0;
  for (const sim::Runtime::Span& s : spans) {
    CAPTURE(s.name);
    CHECK(s.end_us >= s.start_us);
    if (std::string(s.name) == "copy host to device") {
      ++h2d;
      CHECK(s.stream == static_cast<sim::Stream&>(*up).id());
      CHECK(s.end_us - s.start_us >= floor_us);  // a sleep never ends early: bytes / bandwidth at the least
    }
    if (std::string(s.name) == "copy device to host") {
      ++d2h;
      CHECK(s.stream == static_cast<sim::Stream&>(*down).id());
      CHECK(s.end_us - s.start_us >= floor_us);
    }
  }
  CHECK(h2d == 1);
  CHECK(d2h == 1);
  CHECK(static_cast<unsigned char*>(pinned)[bytes - 1] == 7);  // the round trip kept the bytes
  // The Chrome trace: a row per stream, named as given, the copies in their own category.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "optimus_sim_trace.json";
  device.write_chrome_trace(path.string(), {{static_cast<sim::Stream&>(*up).id(), "up"}});
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"name\": \"up\"") != std::string::npos);
  CHECK(text.find("\"stream " + std::to_string(static_cast<sim::Stream&>(*down).id()) + "\"") != std::string::npos);
  CHECK(text.find("\"cat\": \"copy\"") != std::string::npos);
  std::filesystem::remove(path);
  device.release(d);
  device.release(e);
  device.release_pinned(pinned);
}

TEST_CASE("the simulated cuBLASLt checks what cuBLASLt checks") {
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  sim::LtGemm engine(memory.allocator());
  Tensor<float> a(Shape{64}, on(memory)), b(Shape{64}, on(memory)), c(Shape{64}, on(memory));
  const optimus::GemmCall good{.m = 4, .n = 3, .k = 2, .a = a.data(), .lda = 2, .b = b.data(), .ldb = 3,
                               .c = c.data(), .ldc = 3};
  CHECK(engine.run(good, *stream));
  optimus::GemmCall bad = good;
  bad.ldb = 2;  // B [2, 3] with rows 2 apart
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("has leading dimension 2 < its 3 rows"),
                       optimus::Error);
  bad = good;
  bad.c = a.data() + 120;  // C [4, 3] runs past its block (a 512-byte block: 128 floats)
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("run past the end of their allocation"),
                       optimus::Error);
  bad = good;
  bad.batch = {.count = 2, .stride_a = 0, .stride_b = 0, .stride_c = 4};  // outputs 4 apart: they overlap
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("output matrices"), optimus::Error);
  std::vector<float> host(64);
  bad = good;
  bad.a = host.data();
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("is not device memory of sim device 0"),
                       optimus::Error);
  bad = good;
  bad.m = 0;
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("an empty product"), optimus::Error);
  bad = good;
  bad.batch = {.count = std::int64_t{1} << 31, .stride_a = 0, .stride_b = 0, .stride_c = 12};
  CHECK_THROWS_WITH_AS(engine.run(bad, *stream), doctest::Contains("a batch of 2147483648 matrices is more than"),
                       optimus::Error);
  // Epilogues cuBLASLt cannot take are declined (the caller applies them), not run: a bf16 output, a GELU input
  // whose leading dimension is not a multiple of 8.
  float* bias = c.data() + 16;
  optimus::GemmCall with_bias = good;
  with_bias.epilogue = {.kind = optimus::GemmCall::Epilogue::Kind::bias, .bias = bias};
  CHECK(engine.run(with_bias, *stream));
  optimus::GemmCall bf16_output = with_bias;
  bf16_output.precision = optimus::GemmPrecision::bf16;
  CHECK_FALSE(engine.run(bf16_output, *stream));
  optimus::GemmCall gelu = good;
  gelu.epilogue = {.kind = optimus::GemmCall::Epilogue::Kind::bias_gelu, .bias = bias, .pre = c.data() + 32, .ld_pre = 3};
  CHECK_FALSE(engine.run(gelu, *stream));
  stream->synchronize();
}

TEST_CASE("cuBLASLt is promised the alignment the buffers have; a plan per alignment, prepared once") {
  // Attention passes Q, K and V at element offsets of a [s, 3w] block: promising cuBLASLt its default of 256 bytes
  // for them was wrong. The simulated cuBLASLt refuses a pointer less aligned than its plan promised.
  sim::Runtime device(sim::Options{});
  auto stream = device.create_stream();
  optimus::DeviceMemoryPool memory(device, *stream);
  sim::LtGemm engine(memory.allocator());
  Tensor<float> block(Shape{256}, on(memory)), c(Shape{64}, on(memory));
  optimus::GemmCall call{.m = 3, .n = 3, .k = 4, .a = block.data(), .lda = 12, .b = block.data() + 4, .ldb = 12,
                         .c = c.data(), .ldc = 3};
  call.trans_b = optimus::Trans::yes;  // Q K^T: K's rows are 4 floats into each row of the block
  const optimus::lt::Matmul matmul = optimus::lt::describe(call, 0);
  CHECK(matmul.align_a == 16);   // cuBLASLt's A is K: 16 bytes in, rows 48 bytes apart
  CHECK(matmul.align_b == 16);   // Q: the block's start, rows 48 bytes apart
  CHECK(matmul.align_c == 4);    // C's rows are 12 bytes apart
  CHECK(engine.run(call, *stream));
  CHECK(engine.plans_prepared() == 1);
  call.b = block.data() + 8;  // V's place: 32 bytes in, the same alignment class (16)
  CHECK(engine.run(call, *stream));
  CHECK(engine.plans_prepared() == 1);  // the same plan
  call.b = block.data() + 1;  // 4 bytes in: another promise, another plan
  CHECK(engine.run(call, *stream));
  CHECK(engine.plans_prepared() == 2);
  for (int repeat = 0; repeat < 3; ++repeat) CHECK(engine.run(call, *stream));
  CHECK(engine.plans_prepared() == 2);  // descriptors and heuristics are not rebuilt per call
  stream->synchronize();
}

TEST_CASE("kernels on the simulated device give the CPU's results bit for bit (and on a delayed device)") {
  for (const auto* target : {&kSim, &kSimDelayed}) {
    const auto device = target->open(0);
    optimus::test::run_in_process(1, [&](Communicator&) {
      RankDevice rank(*device, ops::GemmMath::f32);
      optimus::test::check_kernels(rank);
    });
  }
}

TEST_CASE("DistVector's pieces live on the grid's device (its view used to say cpu)") {
  sim::Runtime device(sim::Options{});
  optimus::test::run_in_process(4, [&](Communicator& world) {
    RankDevice rank(device, ops::GemmMath::f32);
    Grid grid = rank.grid(world, 2);
    optimus::DistVector<float> v(grid, 16, optimus::MemoryKind::parameters, "bias");
    CHECK(v.local().device() == Device::sim);
    CHECK(std::as_const(v).local().device() == Device::sim);
  });
}

namespace {
void device_grid_on_shared_device(int q) {
  CAPTURE(q);
  optimus::test::on_shared_device(kSim, q, 1, ops::GemmMath::f32,
                                  [](Communicator&, RankDevice&, Grid& grid) { optimus::test::check_device_grid(grid); });
}
}  // namespace

TEST_CASE("device grids: every case at q = 1, 2 on one shared device, f32 and bf16") {
  device_grid_on_shared_device(1);
  device_grid_on_shared_device(2);
}

// Its own CTest (test_sim_q3, labelled long): nine ranks on one device, the sanitizers' longest case.
TEST_CASE("device grids: every case at q = 3 on one shared device, f32 and bf16") { device_grid_on_shared_device(3); }

TEST_CASE("device grids with a device per rank over the simulated NCCL: every case at q = 1, 2 (delayed device)") {
  for (int q = 1; q <= 2; ++q) {
    CAPTURE(q);
    optimus::test::on_own_devices(kSimDelayed, q, 1, ops::GemmMath::f32,
                                  [](Communicator&, RankDevice&, Grid& grid) { optimus::test::check_device_grid(grid); });
  }
}

TEST_CASE("a training step on the simulated device equals the host's bit for bit (q = 1, 2, 3; dp = 2)") {
  for (int q = 1; q <= 3; ++q) {
    CAPTURE(q);
    optimus::test::on_shared_device(kSim, q, 1, ops::GemmMath::f32, [&](Communicator& world, RankDevice&, Grid& grid) {
      Grid host = Grid::create(world, q);  // the world stages on the device now; this grid's matrices stay on the host
      optimus::test::check_step_like_host(grid, host, true);
      optimus::test::check_products_like_host(grid, host, true);
    });
  }
  optimus::test::on_own_devices(kSim, 2, 2, ops::GemmMath::f32, [&](Communicator& world, RankDevice&, Grid& grid) {
    Grid host = Grid::create(world, 2);
    optimus::test::check_step_like_host(grid, host, true);
    optimus::test::check_data_parallel_overlap_on(grid);
    optimus::test::check_f32_training_on(grid);  // dp = 2 replicas against the reference on the whole batch
  });
}

TEST_CASE("recomputation and micro-batches on the simulated device (q = 2, shared device; dp = 2 on own devices)") {
  optimus::test::on_shared_device(kSim, 2, 1, ops::GemmMath::f32, [](Communicator&, RankDevice&, Grid& grid) {
    optimus::test::check_recompute_and_micro_batches_on(grid);
  });
  optimus::test::on_own_devices(kSim, 2, 2, ops::GemmMath::f32, [](Communicator&, RankDevice&, Grid& grid) {
    optimus::test::check_recompute_and_micro_batches_on(grid);
  });
}

TEST_CASE("the 1D baseline's GPT and checkpoints on the simulated device (4 ranks, one shared device)") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("optimus_sim_checkpoints_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  optimus::test::on_shared_device(kSim, 2, 1, ops::GemmMath::f32, [&](Communicator& world, RankDevice& rank, Grid& grid) {
    optimus::test::check_models_and_checkpoints_on(world, rank, grid, dir);
  });
  std::filesystem::remove_all(dir);
}

TEST_CASE("steady state: no raw allocation and no new GEMM plan after the first step (shared and own devices)") {
  optimus::test::on_shared_device(kSim, 2, 1, ops::GemmMath::bf16, [](Communicator&, RankDevice& rank, Grid& grid) {
    optimus::test::check_steady_state(rank, grid);
  });
  optimus::test::on_own_devices(kSim, 2, 1, ops::GemmMath::f32, [](Communicator&, RankDevice& rank, Grid& grid) {
    optimus::test::check_steady_state(rank, grid);
  });
}

TEST_CASE("mixed devices, a queue without a stream, f64 and a grid that stages on the host are refused") {
  optimus::test::on_shared_device(kSim, 2, 1, ops::GemmMath::f32,
                                  [](Communicator& world, RankDevice& rank, Grid& grid) {
                                    optimus::test::check_device_errors(world, rank, grid);
                                  });
  optimus::test::on_own_devices(kSim, 2, 1, ops::GemmMath::f32, [](Communicator& world, RankDevice& rank, Grid& grid) {
    optimus::test::check_device_errors(world, rank, grid);
  });
}

TEST_CASE("a grid on devices that are too small fails with the device's out-of-memory error on every rank") {
  const optimus::test::DeviceTarget tiny{.kind = Device::sim, .sim = {.capacity = 3 << 20}};
  optimus::test::on_own_devices(tiny, 2, 1, ops::GemmMath::f32, [](Communicator& world, RankDevice&, Grid& grid) {
    const std::string device = "sim device " + std::to_string(world.rank());
    CHECK_THROWS_WITH_AS(optimus::DistMatrix<float>(grid, 2048, 2048),  // 4 MiB per rank
                         doctest::Contains((device + " out of memory: requested 4194304 bytes").c_str()),
                         optimus::Error);
    CHECK_THROWS_WITH_AS(optimus::DistMatrix<float>(grid, 2048, 2048),
                         doctest::Contains(" bytes free of 3145728"), optimus::Error);
  });
}
