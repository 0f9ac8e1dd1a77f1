// The simulated device: an accelerator made of the CPU that keeps a GPU's rules, so that every device path of Optimus
// — memory pools, pinned staging, kernels, GEMM engine, device communicators, grids placed on a device — runs in tests
// and CI on machines without a GPU. It implements DeviceRuntime (optimus/core/device_runtime.hpp) like the CUDA
// runtime does, and checks what a GPU would punish:
//
//   Memory host code cannot touch. A device address is the address of real host storage with a tag in its top bits
//   (bit 55 and the device's ordinal in bits 50-54): outside every user address space (non-canonical on x86-64, the
//   kernel's half on AArch64), so that a memcpy, an Eigen map or a CPU kernel given device memory faults at once
//   (SIGSEGV) instead of working by accident. Only the simulated kernels and copies
//   translate it — and check that the whole range lies in one live allocation. Fresh and released blocks are poisoned
//   (0xFF bytes: NaN in f32, f64 and bf16), so a read of uninitialised or freed memory shows up as NaN.
//
//   Streams and events like CUDA's. Work (kernels, copies, collectives) is queued on a stream and run by the stream's
//   own worker thread, in order; streams are ordered among themselves only by events. Every stream is non-blocking:
//   nothing orders it with the legacy default stream (legacy_stream(), what cudaMemcpy uses). A copy from pageable
//   host memory takes its source at once and may complete late; a copy to pageable memory completes before it
//   returns; page-locked (pinned) memory is read and written when the copy runs.
//
//   Delays and races. With Options::delays the worker sleeps a random time (up to max_microseconds) before each piece
//   of work, so a missing event or synchronisation gives a wrong result or a detected race instead of luck. Work
//   declares the device bytes it reads and writes; two pieces running at once on different streams where one writes
//   bytes the other touches is a race: the device then fails (like a GPU fault, it is sticky: every later
//   synchronisation throws optimus::Error naming both pieces of work).
//
//   Copy bandwidth. Options::copy_bandwidth makes every copy between host and device take at least bytes / bandwidth
//   on its stream, as a copy engine of that speed would (device-to-device copies are not throttled).
//
//   Capacity and traffic. Options::capacity limits the device memory (unlimited by default): beyond it raw
//   allocations fail and a DeviceAllocator reports the request and what is free, as on a GPU. traffic() counts the
//   bytes copied host to device, device to host and device to device, exactly.
//
// Thread-safe: the q*q ranks of an in-process grid may share one device, as they share one GPU. One process may hold
// several devices (distinct ordinals), as a node holds several GPUs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "optimus/core/device_runtime.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::sim {

struct Options {
  int ordinal = 0;  // 0..31: part of every device address, so that two devices' memory is never confused
  std::size_t capacity = std::numeric_limits<std::size_t>::max();  // bytes of device memory
  struct Delays {
    int max_microseconds = 0;  // 0: no delays
    std::uint64_t seed = 1;
  } delays = {};
  bool poison = true;        // fill fresh and released blocks with 0xFF
  bool detect_races = true;  // check the device bytes of work running at once on different streams
  // Bytes per second of each copy between host and device: a copy holds its stream for bytes / copy_bandwidth (a copy
  // engine of that speed per stream), so that overlapping transfers with compute is measured, not assumed. Infinite:
  // as fast as memcpy.
  double copy_bandwidth = std::numeric_limits<double>::infinity();
  // Non-empty: the identity (DeviceRuntime::identity) of one device that the processes which name it share, as
  // processes share one GPU — their device communicators then stage through the host, as on that GPU.
  std::string shared_as = {};
};

// Bytes moved by copies (exact).
struct Traffic {
  std::uint64_t host_to_device = 0;
  std::uint64_t device_to_host = 0;
  std::uint64_t device_to_device = 0;
};

// A range of device memory that a piece of work reads or writes (device addresses).
struct Access {
  const void* begin = nullptr;
  std::size_t bytes = 0;
  bool writes = false;
};
template <class T>
Access reads(const TensorView<T>& v);
template <class T>
Access writes(const TensorView<T>& v);

class Runtime;

class Stream final : public DeviceStream {
 public:
  explicit Stream(Runtime& device);
  ~Stream() override;

  Device device() const override { return Device::sim; }
  DeviceRuntime& runtime() const override;
  void synchronize() override;
  void* native_handle() const override { return nullptr; }  // the simulated device runs host work
  int id() const { return id_; }

  // Queues `work`, which touches `accesses`, to run on this stream's worker after the work queued before it.
  void launch(const char* name, std::vector<Access> accesses, std::function<void()> work);
  // Queues bookkeeping that runs even after the device failed (event records and waits): never delayed.
  void launch_bookkeeping(std::function<void()> work);
  // Whether the calling thread is this stream's worker (running its work).
  bool runs_here() const;

 private:
  struct Task;
  struct Queue;
  void enqueue(Task task);
  void run(Task& task);
  Runtime* device_;
  int id_;
  std::shared_ptr<Queue> queue_;
};

class Event final : public DeviceEvent {
 public:
  explicit Event(Runtime& device);
  void record(DeviceStream& stream) override;
  void wait_on(DeviceStream& stream) const override;
  bool done() const override;
  void synchronize() const override;

 private:
  struct State;
  Runtime* device_;
  std::shared_ptr<State> state_;  // shared with queued records and waits: an event may die before they run
};

class Runtime final : public DeviceRuntime {
 public:
  explicit Runtime(const Options& options);
  ~Runtime() override;

  Device device() const override { return Device::sim; }
  int ordinal() const override { return options_.ordinal; }
  std::string name() const override;
  std::string identity() const override { return options_.shared_as.empty() ? "" : "sim:" + options_.shared_as; }
  void make_current() override {}

  void* allocate(std::size_t bytes) noexcept override;
  void release(void* p) noexcept override;
  std::string describe_free() const override;
  void* allocate_pinned(std::size_t bytes) override;
  void release_pinned(void* p) noexcept override;
  MemoryType memory_type(const void* p) const override;

  std::unique_ptr<DeviceStream> create_stream() override;
  std::unique_ptr<DeviceEvent> create_event() override;
  void copy_async(void* dst, const void* src, std::size_t bytes, DeviceStream& stream) override;
  void fill_async(void* dst, std::uint8_t value, std::size_t bytes, DeviceStream& stream) override;
  void poison_async(void* p, std::size_t bytes, DeviceStream& stream) override;
  std::unique_ptr<GemmEngine> create_gemm_engine(DeviceAllocator& allocator) override;  // sim::LtGemm (lt_gemm.hpp)
  bool runs_host_work() const override { return true; }
  void launch_on_host(DeviceStream& stream, const char* name, std::vector<DeviceRange> ranges,
                      std::function<void(const std::vector<void*>& host)> work) override;

  // cudaMemcpy: the copy on the legacy default stream, then the host waits for that stream (only).
  void copy(void* dst, const void* src, std::size_t bytes);
  Stream& legacy_stream();
  // The stream `stream` is, when it is one of this device's streams; otherwise optimus::Error naming `what`.
  Stream& own(DeviceStream& stream, const char* what);

  // For the simulated kernels only: the host storage behind device range [p, p + bytes), after checking that it lies in
  // one live allocation of this device (optimus::Error naming `what` otherwise). Null for an empty range.
  void* translate(const void* p, std::size_t bytes, const char* what) const;
  template <class T>
  TensorView<T> host_view(const TensorView<T>& v, const char* what) const;

  Traffic traffic() const;
  // A record of the device's work, for a timeline: each piece of work (kernels, copies, collectives; not event
  // bookkeeping) that ran on a stream while tracing was on, with its start and end in microseconds since tracing began.
  struct Span {
    int stream;
    const char* name;  // "copy host to device", "adamw_update", ...
    double start_us, end_us;
  };
  // Starts (clearing what was recorded) or stops recording.
  void set_tracing(bool on);
  std::vector<Span> trace() const;
  // The trace as a Chrome trace (chrome://tracing, Perfetto): one row per stream, named by `stream_names` where it has
  // the stream's id (e.g. "rank 0 compute"), "stream N" otherwise; copies in their own category.
  void write_chrome_trace(const std::string& path, const std::map<int, std::string>& stream_names) const;
  std::size_t bytes_in_use() const;
  // The most device memory allocated at once so far (what a capacity must hold).
  std::size_t peak_bytes_in_use() const;
  const Options& options() const { return options_; }
  // The first failure of device work (a race, a bad copy), rethrown by every later synchronisation; null if none.
  std::exception_ptr failure() const;

 private:
  friend class Stream;
  friend class Event;
  struct Running;
  // Records a span of work on `stream` that ran over [start, end) (while tracing).
  void record_span(int stream, const char* name, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end);
  void fail(std::exception_ptr error) noexcept;
  void throw_if_failed() const;
  void synchronize_all() noexcept;
  void add_stream(Stream* s);
  void remove_stream(Stream* s);
  // Race detection: registers `accesses` of a piece of work starting on `stream`, after checking them against the work
  // running on other streams; the returned token unregisters them.
  std::shared_ptr<void> start(int stream, const char* name, const std::vector<Access>& accesses);

  Options options_;
  std::uint64_t tag_;  // the top bits of this device's addresses
  mutable std::shared_mutex memory_mu_;
  std::map<std::uintptr_t, std::size_t> blocks_;  // live allocations: real address -> bytes
  std::map<std::uintptr_t, std::size_t> pinned_;  // page-locked host blocks
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
  std::atomic<std::uint64_t> h2d_{0}, d2h_{0}, d2d_{0};
  std::atomic<bool> tracing_{false};
  mutable std::mutex trace_mu_;
  std::chrono::steady_clock::time_point trace_origin_;
  std::vector<Span> spans_;
  std::atomic<int> next_stream_{0};
  mutable std::mutex streams_mu_;
  std::set<Stream*> streams_;
  std::mutex legacy_mu_;
  std::unique_ptr<Stream> legacy_;
  mutable std::mutex failure_mu_;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};
  std::mutex running_mu_;
  std::vector<std::shared_ptr<Running>> running_;
};

template <class T>
Access reads(const TensorView<T>& v) {
  return {.begin = v.data(), .bytes = span_bytes(v), .writes = false};
}
template <class T>
Access writes(const TensorView<T>& v) {
  Access a = reads(v);
  a.writes = true;
  return a;
}

template <class T>
TensorView<T> Runtime::host_view(const TensorView<T>& v, const char* what) const {
  return TensorView<T>(static_cast<T*>(translate(v.data(), span_bytes(v), what)), v.shape(), v.strides(), Device::cpu);
}

}  // namespace optimus::sim
