// An accelerator's runtime as Optimus's device-generic code sees it: raw device memory, page-locked host memory,
// streams, events and stream-ordered copies — the part of the CUDA runtime that Optimus uses. Two implementations:
// the CUDA runtime of one GPU (optimus/cuda/runtime.hpp) and the simulated device (optimus/sim/runtime.hpp), so that
// the code above it (memory pools and pinned staging: device_memory_pool.hpp; the communicators' device paths;
// optimus/device/rank_device.hpp) is one piece of code that CI runs on the simulated device.
//
// The rules are CUDA's, and the simulated device enforces them:
//   * device memory is not host memory: host code reads and writes it only through copies;
//   * work queued on a stream runs asynchronously, in the stream's order; streams are ordered among themselves only
//     by events (record on one, wait on another); every stream made here is non-blocking, so it does not order with
//     the legacy default stream either;
//   * a copy from pageable host memory may complete after it returns (the source is consumed at once); a copy to
//     pageable host memory completes before it returns; copies to or from page-locked memory are asynchronous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optimus/core/device.hpp"

namespace optimus {

class DeviceRuntime;
class DeviceAllocator;  // optimus/core/device_memory_pool.hpp
class GemmEngine;       // optimus/core/gemm_engine.hpp

// An in-order queue of device work. Destroying it waits for its work (and logs, never throws, an error).
class DeviceStream {
 public:
  DeviceStream() = default;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  virtual ~DeviceStream() = default;

  virtual Device device() const = 0;
  // The device the stream belongs to.
  virtual DeviceRuntime& runtime() const = 0;
  // The host waits until everything queued so far has run; throws optimus::Error if device work failed.
  virtual void synchronize() = 0;
  // The backend's own handle (a cudaStream_t), for kernel launches; null where the device runs host work.
  virtual void* native_handle() const = 0;
};

// A range of device memory that a piece of work reads or writes (device addresses).
struct DeviceRange {
  const void* begin = nullptr;
  std::size_t bytes = 0;
  bool writes = false;
};

// A marker in a stream's work, for ordering another stream after it or waiting on the host.
class DeviceEvent {
 public:
  DeviceEvent() = default;
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  virtual ~DeviceEvent() = default;

  // Marks the point in `stream` reached by the work queued so far.
  virtual void record(DeviceStream& stream) = 0;
  // Work queued on `stream` from now on starts after the last recorded point (none recorded: no wait).
  virtual void wait_on(DeviceStream& stream) const = 0;
  // Whether the last recorded point has been reached (never blocks); true if never recorded. Throws once the device
  // has failed in earlier work (as cudaEventQuery returns the sticky error), so that a poller never takes skipped
  // work for finished work.
  virtual bool done() const = 0;
  // The host waits for the last recorded point.
  virtual void synchronize() const = 0;
};

// Where a pointer's memory is, as a copy sees it.
enum class MemoryType { device, pinned, pageable };

class DeviceRuntime {
 public:
  DeviceRuntime() = default;
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;
  virtual ~DeviceRuntime() = default;

  virtual Device device() const = 0;
  virtual int ordinal() const = 0;
  // "CUDA device 0", "sim device 0".
  virtual std::string name() const = 0;
  // What tells this device apart from the other ranks' devices: ranks whose devices give the same non-empty identity
  // share one device (several processes on one GPU), and their device communicators stage their collectives through
  // the host (NCCL refuses them). A GPU's UUID; the simulated device's sim::Options::shared_as (empty by default:
  // its collectives take any placement).
  virtual std::string identity() const = 0;
  // Makes this the calling thread's current device (cudaSetDevice): before creating streams or memory on it.
  virtual void make_current() = 0;

  // Raw device memory (at least 256-byte aligned); null when the device is out of memory (never throws).
  virtual void* allocate(std::size_t bytes) noexcept = 0;
  // Waits for all of the device's work first (as cudaFree does).
  virtual void release(void* p) noexcept = 0;
  // What is free, for out-of-memory errors: "sim device 0 has 1048576 bytes free of 4194304".
  virtual std::string describe_free() const = 0;

  // Page-locked host memory, for asynchronous copies.
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void release_pinned(void* p) noexcept = 0;
  virtual MemoryType memory_type(const void* p) const = 0;

  // A non-blocking stream, and an event (without timing) on this device.
  virtual std::unique_ptr<DeviceStream> create_stream() = 0;
  virtual std::unique_ptr<DeviceEvent> create_event() = 0;

  // dst <- src, `bytes`, in any direction, ordered on `stream` (cudaMemcpyAsync with cudaMemcpyDefault), with the
  // completion rules above.
  virtual void copy_async(void* dst, const void* src, std::size_t bytes, DeviceStream& stream) = 0;
  // Every byte of device memory [dst, dst + bytes) set to `value`, ordered on `stream` (cudaMemsetAsync).
  virtual void fill_async(void* dst, std::uint8_t value, std::size_t bytes, DeviceStream& stream) = 0;
  // A block handed back to a cache: the simulated device overwrites it with a poison pattern in `stream`'s order, so
  // that later reads of the stale block give NaN; a GPU leaves it as it is.
  virtual void poison_async(void* p, std::size_t bytes, DeviceStream& stream) = 0;

  // The backend's parts that device-generic code runs, so that core names no backend: its GEMM engine over
  // `allocator`'s memory (GemmEngine::create), and how it runs an operation (ops/dispatch.hpp's run: the operation's
  // CPU body on the host for the simulated device, its CUDA launch on a GPU).
  virtual std::unique_ptr<GemmEngine> create_gemm_engine(DeviceAllocator& allocator) = 0;
  // Whether the device runs an operation's CPU body on host memory that stands for its own (the simulated device),
  // through launch_on_host; else operations launch the backend's kernels on the stream's native handle (a GPU).
  virtual bool runs_host_work() const = 0;
  // Queues `work` on `stream` in its order, the `ranges` it reads and writes checked to lie in live allocations and
  // given to it as host addresses, in order (ops' one dispatch: ops/dispatch.hpp). A GPU refuses.
  virtual void launch_on_host(DeviceStream& stream, const char* name, std::vector<DeviceRange> ranges,
                              std::function<void(const std::vector<void*>& host)> work) = 0;
};

}  // namespace optimus
