// Running out of memory ends the job with an error naming the request, never a hang. OpenBLAS allocates a buffer of
// about 128 MiB at its first product and, when malloc fails there, retries forever; Grid::create takes that buffer
// first (cpu::prepare_gemm) and agrees on the outcome over the world.
//
//   memory_limit buffer|exhaust [--limited-rank R]
//   memory_limit threads
//   memory_limit vector
//
// Rank R (every rank when not given) limits its address space (RLIMIT_AS) to what it maps now plus a margin, so the
// test does not depend on how much the loaded libraries map:
//   buffer:  a 64 MiB margin, too little for OpenBLAS's buffer: Grid::create throws on every rank, naming the bytes.
//   exhaust: a 768 MiB margin: Grid::create succeeds; then 16 MiB tensors are allocated until one fails, and with
//            all of them still held a 256 x 256 x 256 product runs (OpenBLAS kept its buffer) and is checked; the
//            program then reports the failed allocation, with the product's outcome.
//   threads: one process of 8 in-process ranks (a 2 x 2 grid, dp 2), each multiplying on its own thread with a buffer of
//            its own, under a margin with room for 4 buffers: Grid::create throws on every rank, naming the 8.
//   vector:  a 64 MiB margin, then a std::vector of 256 MiB: the programs' operator new (programs/operator_new.cpp,
//            linked here as in train_gpt) throws optimus::OutOfMemory, and the line names the 268435456 bytes.
// The CTests (tests/CMakeLists.txt) expect a non-zero exit and one error line; a hang fails them by their timeout.
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "optimus/comm/process.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"

namespace {

// The bytes this process maps now (VmSize in /proc/self/status).
std::uint64_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::uint64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  OPTIMUS_FAIL("memory_limit: no VmSize in /proc/self/status");
}

void limit_address_space(std::uint64_t margin) {
  const rlimit limit{.rlim_cur = mapped_bytes() + margin, .rlim_max = RLIM_INFINITY};
  OPTIMUS_CHECK(setrlimit(RLIMIT_AS, &limit) == 0, "memory_limit: setrlimit failed");
}

// Allocates 16 MiB tensors until one fails; returns that failure's message (the tensors stay in `held`).
std::string exhaust(std::vector<optimus::Tensor<float>>& held) {
  for (int i = 0; i < 1 << 16; ++i) {
    try {
      held.emplace_back(optimus::Shape{2048, 2048}, optimus::MemoryTag{}, optimus::Init::none);
    } catch (const optimus::Error& e) {
      return e.what();
    }
  }
  OPTIMUS_FAIL("memory_limit: 1 TiB was allocated under the limit");
}

// C = A A with A all ones: every element of C must be n.
std::string product_outcome() {
  constexpr int n = 256;
  optimus::Tensor<double> a(optimus::Shape{n, n}, optimus::MemoryTag{}, optimus::Init::none);
  optimus::Tensor<double> c(optimus::Shape{n, n}, optimus::MemoryTag{}, optimus::Init::none);
  for (std::int64_t i = 0; i < a.numel(); ++i) a.data()[i] = 1.0;
  std::vector<optimus::Tensor<float>> held;
  const std::string failure = exhaust(held);
  optimus::cpu::gemm<double>(optimus::Trans::no, optimus::Trans::no, 1.0, std::as_const(a).view(),
                             std::as_const(a).view(), 0.0, c.view());
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < c.numel(); ++i) wrong += c.data()[i] != n ? 1 : 0;
  return failure + " (with " + std::to_string(held.size()) + " tensors of 16 MiB held, a " + std::to_string(n) +
         "^3 product then ran: " + std::to_string(wrong) + " wrong elements)";
}

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    optimus::Communicator& world = ctx.world();
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "threads") {
      limit_address_space((std::uint64_t{4} * 129 + 128) << 20);  // four buffers and the threads' stacks
      optimus::run_in_process(8, [](optimus::Communicator& w) { optimus::Grid::create(w, 2); });
      return 0;
    }
    if (args.size() == 1 && args[0] == "vector") {
      limit_address_space(std::uint64_t{64} << 20);
      const std::vector<unsigned char> bytes(std::size_t{256} << 20, 1);
      OPTIMUS_FAIL("memory_limit: 256 MiB were allocated under a limit of 64 MiB more (byte ", int{bytes.back()}, ")");
    }
    OPTIMUS_CHECK((args.size() == 1 || (args.size() == 3 && args[1] == "--limited-rank")) &&
                      (args[0] == "buffer" || args[0] == "exhaust"),
                  "usage: memory_limit buffer|exhaust [--limited-rank R] | threads | vector");
    const int limited = args.size() == 3 ? std::stoi(args[2]) : -1;
    const bool exhausting = args[0] == "exhaust";
    if (limited < 0 || limited == world.rank()) {
      limit_address_space(exhausting ? std::uint64_t{768} << 20 : std::uint64_t{64} << 20);
    }
    const optimus::Grid grid = optimus::Grid::create(world, 1);
    if (exhausting) OPTIMUS_FAIL(product_outcome());
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("memory_limit", e);
  }
}
