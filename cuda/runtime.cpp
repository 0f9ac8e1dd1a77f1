// The CUDA runtime as a DeviceRuntime (optimus/cuda/runtime.hpp). GPU-only code: CI compiles it, a GPU runs it.
#include "optimus/cuda/runtime.hpp"

#include "optimus/cuda/device.hpp"
#include "optimus/cuda/lt_gemm.hpp"

#include <iostream>
#include <iomanip>
#include <sstream>

namespace optimus::cuda {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("CUDA reports ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
  }
  return n == 0 ? "no CUDA device" : "";
}

void require_device(int device) {
  OPTIMUS_CHECK(device >= 0 && device < device_count(), "CUDA device ", device, " does not exist (", device_count(),
                " devices; ", unavailable_reason(), ")");
}

Runtime::Runtime(int device) : device_(device) { require_device(device); }

void Runtime::make_current() { OPTIMUS_CHECK_CUDA(cudaSetDevice(device_)); }

std::string Runtime::identity() const {
  cudaDeviceProp props{};
  OPTIMUS_CHECK_CUDA(cudaGetDeviceProperties(&props, device_));
  std::ostringstream os;
  os << "GPU-" << std::hex << std::setfill('0');
  for (const char byte : props.uuid.bytes) os << std::setw(2) << static_cast<unsigned>(static_cast<unsigned char>(byte));
  return os.str();
}

void* Runtime::allocate(std::size_t bytes) noexcept {
  void* p = nullptr;
  if (cudaSetDevice(device_) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory error is not sticky; clear it
    return nullptr;
  }
  return p;
}

void Runtime::release(void* p) noexcept {
  if (p == nullptr) return;
  cudaSetDevice(device_);
  const cudaError_t s = cudaFree(p);
  if (s != cudaSuccess) std::cerr << "optimus: cudaFree failed: " << cudaGetErrorString(s) << '\n';
}

std::string Runtime::describe_free() const {
  std::size_t free = 0, total = 0;
  std::ostringstream os;
  if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    os << name() << " has " << free << " bytes free of " << total;
  } else {
    cudaGetLastError();
    os << name() << " free memory unknown";
  }
  return os.str();
}

void* Runtime::allocate_pinned(std::size_t bytes) {
  void* p = nullptr;
  OPTIMUS_CHECK_CUDA(cudaMallocHost(&p, bytes));
  return p;
}

void Runtime::release_pinned(void* p) noexcept {
  if (p != nullptr) cudaFreeHost(p);
}

MemoryType Runtime::memory_type(const void* p) const {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // a pointer CUDA does not know: pageable host memory
    return MemoryType::pageable;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return MemoryType::device;
    case cudaMemoryTypeHost: return MemoryType::pinned;
    default: return MemoryType::pageable;
  }
}

std::unique_ptr<DeviceStream> Runtime::create_stream() { return std::make_unique<Stream>(*this); }

std::unique_ptr<DeviceEvent> Runtime::create_event() { return std::make_unique<Event>(*this, false); }

void Runtime::copy_async(void* dst, const void* src, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return;
  OPTIMUS_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, native(stream, "copy_async")));
}

void Runtime::fill_async(void* dst, std::uint8_t value, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return;
  OPTIMUS_CHECK_CUDA(cudaMemsetAsync(dst, value, bytes, native(stream, "fill_async")));
}

Stream::Stream(Runtime& device) : device_(&device) {
  device.make_current();
  OPTIMUS_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  const cudaError_t s = cudaStreamSynchronize(stream_);
  if (s != cudaSuccess) std::cerr << "optimus: stream failed before destruction: " << cudaGetErrorString(s) << '\n';
  cudaStreamDestroy(stream_);
}

void Stream::synchronize() { OPTIMUS_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

Event::Event(Runtime& device, bool timing) {
  device.make_current();
  OPTIMUS_CHECK_CUDA(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() { cudaEventDestroy(event_); }

void Event::record(DeviceStream& stream) { OPTIMUS_CHECK_CUDA(cudaEventRecord(event_, native(stream, "Event::record"))); }

void Event::wait_on(DeviceStream& stream) const {
  OPTIMUS_CHECK_CUDA(cudaStreamWaitEvent(native(stream, "Event::wait_on"), event_, 0));
}

bool Event::done() const {
  const cudaError_t s = cudaEventQuery(event_);
  if (s == cudaErrorNotReady) return false;
  OPTIMUS_CHECK_CUDA(s);
  return true;
}

void Event::synchronize() const { OPTIMUS_CHECK_CUDA(cudaEventSynchronize(event_)); }

float Event::elapsed_ms(const Event& start) const {
  float ms = 0;
  OPTIMUS_CHECK_CUDA(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

cudaStream_t native(const DeviceStream& stream, const char* what) {
  OPTIMUS_CHECK(stream.device() == Device::cuda, what, ": a ", name_of(stream.device()), " stream where a CUDA "
                "stream is needed");
  return static_cast<const Stream&>(stream).get();
}

std::unique_ptr<GemmEngine> Runtime::create_gemm_engine(DeviceAllocator& allocator) {
  return std::make_unique<LtGemm>(allocator);
}


void Runtime::launch_on_host(DeviceStream&, const char* name, std::vector<DeviceRange>,
                             std::function<void(const std::vector<void*>&)>) {
  OPTIMUS_FAIL(name, ": a GPU runs kernels, not host work (its memory is not the host's)");
}

}  // namespace optimus::cuda

namespace optimus {

std::unique_ptr<DeviceRuntime> open_cuda_device(int ordinal) { return std::make_unique<cuda::Runtime>(ordinal); }
int cuda_device_count() noexcept { return cuda::device_count(); }
std::string cuda_unavailable_reason() { return cuda::unavailable_reason(); }

}  // namespace optimus
