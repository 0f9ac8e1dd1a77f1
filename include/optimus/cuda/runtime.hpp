// The CUDA runtime of one GPU as a DeviceRuntime (optimus/core/device_runtime.hpp): device memory, page-locked host
// memory, non-blocking streams, events and copies, with device discovery. No globals: a Runtime is a handle on
// device N (as the CUDA runtime's own state is per device). This header is about the CUDA backend, so it includes
// cuda_runtime.h; everything above it is device-generic and also runs on the simulated device (optimus/sim/).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "optimus/core/device_runtime.hpp"
#include "optimus/core/cuda_check.hpp"

namespace optimus::cuda {

// Number of usable CUDA devices; 0 (never an error) when there is no driver or no GPU.
int device_count() noexcept;
// Why device_count() is 0, for skip messages ("no CUDA driver", "no device", ...); empty if devices exist.
std::string unavailable_reason();
// Throws optimus::Error "CUDA device N does not exist (M devices; why)" unless 0 <= device < device_count().
void require_device(int device);

class Runtime final : public DeviceRuntime {
 public:
  // Checks that the device exists.
  explicit Runtime(int device);

  Device device() const override { return Device::cuda; }
  int ordinal() const override { return device_; }
  std::string name() const override { return "CUDA device " + std::to_string(device_); }
  std::string identity() const override;  // "GPU-" and the UUID's hex digits
  void make_current() override;

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
  void poison_async(void*, std::size_t, DeviceStream&) override {}  // a GPU leaves released blocks as they are
  std::unique_ptr<GemmEngine> create_gemm_engine(DeviceAllocator& allocator) override;  // cuBLASLt's (lt_gemm.hpp)
  bool runs_host_work() const override { return false; }
  void launch_on_host(DeviceStream& stream, const char* name, std::vector<DeviceRange> ranges,
                      std::function<void(const std::vector<void*>& host)> work) override;

 private:
  int device_;
};

// A non-blocking stream of a CUDA device (created on it).
class Stream final : public DeviceStream {
 public:
  explicit Stream(Runtime& device);
  ~Stream() override;

  Device device() const override { return Device::cuda; }
  DeviceRuntime& runtime() const override { return *device_; }
  void synchronize() override;
  void* native_handle() const override { return stream_; }
  cudaStream_t get() const { return stream_; }

 private:
  Runtime* device_;
  cudaStream_t stream_ = nullptr;
};

class Event final : public DeviceEvent {
 public:
  // With `timing`, elapsed_ms() measures between two recorded events.
  Event(Runtime& device, bool timing);
  ~Event() override;

  void record(DeviceStream& stream) override;
  void wait_on(DeviceStream& stream) const override;
  bool done() const override;
  void synchronize() const override;
  float elapsed_ms(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// The cudaStream_t of a CUDA stream; optimus::Error naming `what` for a stream of another device.
cudaStream_t native(const DeviceStream& stream, const char* what);

}  // namespace optimus::cuda
