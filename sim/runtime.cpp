// The simulated device's memory (tagged, non-canonical addresses over host storage), copies, failures and race
// detection (optimus/sim/runtime.hpp).
#include "optimus/sim/runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string_view>
#include <thread>

#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/sim/lt_gemm.hpp"

namespace optimus::sim {
namespace {

// A copy between host and device as a copy engine of `bandwidth` bytes per second runs it: the copy's stream is busy
// for bytes / bandwidth from the object's construction to its destruction, however fast the memcpy in between was
// (unlimited bandwidth: no wait).
class CopyEngine {
 public:
  CopyEngine(double bandwidth, std::size_t bytes)
      : until_(std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(seconds(bandwidth, bytes)))) {}
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  ~CopyEngine() { std::this_thread::sleep_until(until_); }

 private:
  // bytes / bandwidth, refused past a day (a bandwidth in range whose copy's duration would overflow the clock).
  static double seconds(double bandwidth, std::size_t bytes) {
    if (!std::isfinite(bandwidth)) return 0.0;
    const double s = static_cast<double>(bytes) / bandwidth;
    OPTIMUS_CHECK(s <= 86400.0, "sim device: a copy of ", bytes, " bytes at the copy bandwidth of ", bandwidth,
                  " bytes per second would take ", s, " s (more than a day)");
    return s;
  }

  std::chrono::steady_clock::time_point until_;
};

// A device address is host storage's address with bit 55 set and the ordinal in bits 50-54. No host access can
// reach it: on x86-64 (4-level paging) it is non-canonical; on AArch64, whose top-byte-ignore leaves only bits 56-63
// unchecked, bit 55 selects the kernel's half; under 5-level paging it lies far above any mapping Linux makes.
constexpr int kTagShift = 50;
constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kTagShift) - 1;
constexpr std::uint64_t kSimTag = 0x20;  // bit 55, in the tag (the address's bits 50 and up)
constexpr std::size_t kAlignment = 256;  // as cudaMalloc's

// The bytes a request of `bytes` takes: at least one, rounded up to the alignment.
std::size_t rounded(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
}

std::uint64_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
std::uint64_t tag_of(const void* p) { return address(p) >> kTagShift; }
bool is_sim_address(const void* p) { return (tag_of(p) & ~std::uint64_t{0x1f}) == kSimTag; }

std::string hex(const void* p) {
  std::ostringstream os;
  os << "0x" << std::hex << address(p);
  return os.str();
}

bool overlap(const Access& a, const Access& b) {
  const std::uint64_t a0 = address(a.begin), b0 = address(b.begin);
  return a.bytes > 0 && b.bytes > 0 && a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

}  // namespace

struct Runtime::Running {
  int stream;
  const char* name;
  std::vector<Access> accesses;
};

Runtime::Runtime(const Options& options)
    : options_(options), tag_((kSimTag | static_cast<std::uint64_t>(options.ordinal)) << kTagShift) {
  OPTIMUS_CHECK(options.ordinal >= 0 && options.ordinal < 32, "sim device ordinal ", options.ordinal,
                " is outside 0..31");
  OPTIMUS_CHECK(options.delays.max_microseconds >= 0, "sim device delays of ", options.delays.max_microseconds,
                " microseconds: must not be negative");
  OPTIMUS_CHECK(options.copy_bandwidth > 0, "sim device copy bandwidth of ", options.copy_bandwidth,
                " bytes per second: must be positive (infinite: unthrottled)");
}

Runtime::~Runtime() {
  synchronize_all();
  legacy_.reset();
  std::lock_guard lock(memory_mu_);
  if (!blocks_.empty()) {
    std::cerr << "optimus: " << name() << " destroyed with " << blocks_.size() << " blocks (" << in_use_
              << " bytes) still allocated\n";
  }
  for (const auto& [real, bytes] : blocks_) std::free(reinterpret_cast<void*>(real));
  for (const auto& [real, bytes] : pinned_) std::free(reinterpret_cast<void*>(real));
}

std::string Runtime::name() const { return "sim device " + std::to_string(options_.ordinal); }

void* Runtime::allocate(std::size_t bytes) noexcept {
  const std::size_t size = rounded(bytes);
  std::unique_lock lock(memory_mu_);
  if (size > options_.capacity - in_use_) return nullptr;
  void* real = std::aligned_alloc(kAlignment, size);
  if (real == nullptr) return nullptr;
  if ((address(real) >> kTagShift) != 0) {  // no room for the tag (not on Linux user space)
    std::free(real);
    return nullptr;
  }
  blocks_[address(real)] = size;
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  if (options_.poison) std::memset(real, 0xff, size);  // fresh: uninitialised reads give NaN
  return reinterpret_cast<void*>(address(real) | tag_);
}

void Runtime::release(void* p) noexcept {
  if (p == nullptr) return;
  synchronize_all();  // as cudaFree: no queued work may still use the block
  std::unique_lock lock(memory_mu_);
  const auto it = blocks_.find(address(p) & kAddressMask);
  if (tag_of(p) != (tag_ >> kTagShift) || it == blocks_.end()) {
    std::cerr << "optimus: " << name() << " asked to release " << hex(p) << ", which it did not allocate\n";
    return;
  }
  in_use_ -= it->second;
  std::free(reinterpret_cast<void*>(it->first));
  blocks_.erase(it);
}

std::string Runtime::describe_free() const {
  std::shared_lock lock(memory_mu_);
  std::ostringstream os;
  os << name() << " has " << options_.capacity - in_use_ << " bytes free of " << options_.capacity;
  return os.str();
}

void* Runtime::allocate_pinned(std::size_t bytes) {
  const std::size_t size = rounded(bytes);
  void* p = std::aligned_alloc(kAlignment, size);
  OPTIMUS_CHECK(p != nullptr, name(), ": page-locked host allocation of ", bytes, " bytes failed");
  std::unique_lock lock(memory_mu_);
  pinned_[address(p)] = size;
  return p;
}

void Runtime::release_pinned(void* p) noexcept {
  if (p == nullptr) return;
  synchronize_all();  // as cudaFreeHost
  std::unique_lock lock(memory_mu_);
  const auto it = pinned_.find(address(p));
  if (it == pinned_.end()) {
    std::cerr << "optimus: " << name() << " asked to release page-locked memory it did not allocate\n";
    return;
  }
  pinned_.erase(it);
  std::free(p);
}

MemoryType Runtime::memory_type(const void* p) const {
  if (is_sim_address(p)) return MemoryType::device;
  std::shared_lock lock(memory_mu_);
  auto it = pinned_.upper_bound(address(p));
  if (it != pinned_.begin() && address(p) < std::prev(it)->first + std::prev(it)->second) return MemoryType::pinned;
  return MemoryType::pageable;
}

void* Runtime::translate(const void* p, std::size_t bytes, const char* what) const {
  if (bytes == 0) return nullptr;
  OPTIMUS_CHECK(is_sim_address(p), what, ": ", hex(p), " is not device memory of ", name(), " (host memory?)");
  OPTIMUS_CHECK(tag_of(p) == (tag_ >> kTagShift), what, ": ", hex(p), " is memory of sim device ",
                tag_of(p) & 0x1f, ", not of ", name());
  const std::uint64_t real = address(p) & kAddressMask;
  std::shared_lock lock(memory_mu_);
  auto it = blocks_.upper_bound(real);
  OPTIMUS_CHECK(it != blocks_.begin() && real < std::prev(it)->first + std::prev(it)->second, what, ": ", hex(p),
                " is not in a live allocation of ", name(), " (freed, or never allocated)");
  --it;
  OPTIMUS_CHECK(real + bytes <= it->first + it->second, what, ": ", bytes, " bytes at ", hex(p),
                " run past the end of their allocation (", it->second, " bytes at offset ", real - it->first, ")");
  return reinterpret_cast<void*>(real);
}

std::unique_ptr<DeviceStream> Runtime::create_stream() { return std::make_unique<Stream>(*this); }

std::unique_ptr<DeviceEvent> Runtime::create_event() { return std::make_unique<Event>(*this); }

Stream& Runtime::own(DeviceStream& stream, const char* what) {
  OPTIMUS_CHECK(stream.device() == Device::sim && &stream.runtime() == this, what, ": the stream is not one of ",
                name(), "'s (it is a ", name_of(stream.device()), " stream)");
  return static_cast<Stream&>(stream);
}

Stream& Runtime::legacy_stream() {
  std::lock_guard lock(legacy_mu_);
  if (!legacy_) legacy_ = std::make_unique<Stream>(*this);
  return *legacy_;
}

void Runtime::copy_async(void* dst, const void* src, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return;
  Stream& s = own(stream, "copy_async");
  const MemoryType to = memory_type(dst), from = memory_type(src);
  const Access read{.begin = src, .bytes = bytes, .writes = false}, write{.begin = dst, .bytes = bytes, .writes = true};
  if (to == MemoryType::device && from == MemoryType::device) {
    void* d = translate(dst, bytes, "copy_async (device to device), dst");
    const void* s_ = translate(src, bytes, "copy_async (device to device), src");
    s.launch("copy device to device", {read, write}, [this, d, s_, bytes] {
      std::memcpy(d, s_, bytes);
      d2d_ += bytes;
    });
  } else if (to == MemoryType::device) {
    void* d = translate(dst, bytes, "copy_async (host to device), dst");
    if (from == MemoryType::pinned) {  // read when the copy runs
      s.launch("copy host to device", {write}, [this, d, src, bytes] {
        const CopyEngine engine(options_.copy_bandwidth, bytes);
        std::memcpy(d, src, bytes);
        h2d_ += bytes;
      });
    } else {  // pageable: the source is taken now, the device written later
      auto taken = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                            static_cast<const std::byte*>(src) + bytes);
      s.launch("copy host to device", {write}, [this, d, taken] {
        const CopyEngine engine(options_.copy_bandwidth, taken->size());
        std::memcpy(d, taken->data(), taken->size());
        h2d_ += taken->size();
      });
    }
  } else if (from == MemoryType::device) {
    const void* s_ = translate(src, bytes, "copy_async (device to host), src");
    s.launch("copy device to host", {read}, [this, dst, s_, bytes] {
      const CopyEngine engine(options_.copy_bandwidth, bytes);
      std::memcpy(dst, s_, bytes);
      d2h_ += bytes;
    });
    if (to == MemoryType::pageable) s.synchronize();  // complete when it returns
  } else {
    s.launch("copy host to host", {}, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
    s.synchronize();
  }
}

void Runtime::fill_async(void* dst, std::uint8_t value, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return;
  Stream& s = own(stream, "fill_async");
  void* d = translate(dst, bytes, "fill_async");
  s.launch("memset", {{.begin = dst, .bytes = bytes, .writes = true}}, [d, value, bytes] { std::memset(d, value, bytes); });
}

std::unique_ptr<GemmEngine> Runtime::create_gemm_engine(DeviceAllocator& allocator) {
  return std::make_unique<LtGemm>(allocator);
}


void Runtime::launch_on_host(DeviceStream& stream, const char* name, std::vector<DeviceRange> ranges,
                             std::function<void(const std::vector<void*>& host)> work) {
  Stream& on = own(stream, name);
  std::vector<Access> accesses;
  std::vector<void*> host;
  for (const DeviceRange& r : ranges) {
    accesses.push_back({.begin = r.begin, .bytes = r.bytes, .writes = r.writes});
    host.push_back(translate(r.begin, r.bytes, name));  // checked now, when it is queued
  }
  on.launch(name, std::move(accesses), [work = std::move(work), host = std::move(host)] { work(host); });
}

void Runtime::poison_async(void* p, std::size_t bytes, DeviceStream& stream) {
  if (!options_.poison || bytes == 0) return;
  Stream& s = own(stream, "poison_async");
  void* d = translate(p, bytes, "poison_async");
  s.launch("poison a released block", {{.begin = p, .bytes = bytes, .writes = true}},
           [d, bytes] { std::memset(d, 0xff, bytes); });
}

void Runtime::copy(void* dst, const void* src, std::size_t bytes) {
  Stream& legacy = legacy_stream();
  copy_async(dst, src, bytes, legacy);
  legacy.synchronize();
}

Traffic Runtime::traffic() const {
  return {.host_to_device = h2d_.load(), .device_to_host = d2h_.load(), .device_to_device = d2d_.load()};
}

std::size_t Runtime::bytes_in_use() const {
  std::shared_lock lock(memory_mu_);
  return in_use_;
}

void Runtime::set_tracing(bool on) {
  std::lock_guard lock(trace_mu_);
  if (on) {
    spans_.clear();
    trace_origin_ = std::chrono::steady_clock::now();
  }
  tracing_ = on;
}

void Runtime::record_span(int stream, const char* name, std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point end) {
  if (!tracing_.load()) return;
  std::lock_guard lock(trace_mu_);
  const auto us = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - trace_origin_).count();
  };
  spans_.push_back({.stream = stream, .name = name, .start_us = us(start), .end_us = us(end)});
}

std::vector<Runtime::Span> Runtime::trace() const {
  std::lock_guard lock(trace_mu_);
  return spans_;
}

void Runtime::write_chrome_trace(const std::string& path, const std::map<int, std::string>& stream_names) const {
  const std::vector<Span> spans = trace();
  std::ostringstream out;
  out << "{\"traceEvents\": [\n";
  std::set<int> streams;
  for (const Span& s : spans) streams.insert(s.stream);
  bool first = true;
  for (int stream : streams) {  // row names
    const auto named = stream_names.find(stream);
    out << (first ? "" : ",\n") << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << stream
        << ", \"args\": {\"name\": \""
        << (named != stream_names.end() ? named->second : "stream " + std::to_string(stream)) << "\"}}";
    first = false;
  }
  for (const Span& s : spans) {
    const bool copy = std::string_view(s.name).starts_with("copy");
    out << (first ? "" : ",\n") << "{\"name\": \"" << s.name << "\", \"cat\": \"" << (copy ? "copy" : "compute")
        << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << s.stream << ", \"ts\": " << s.start_us
        << ", \"dur\": " << (s.end_us - s.start_us) << "}";
    first = false;
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  write_file(path, out.str());
}

std::size_t Runtime::peak_bytes_in_use() const {
  std::shared_lock lock(memory_mu_);
  return peak_in_use_;
}

std::exception_ptr Runtime::failure() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

void Runtime::fail(std::exception_ptr error) noexcept {
  std::lock_guard lock(failure_mu_);
  if (!failure_) failure_ = error;
  failed_.store(true);
}

void Runtime::throw_if_failed() const {
  if (!failed_.load()) return;
  const std::exception_ptr error = failure();
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    OPTIMUS_FAIL(name(), " failed in earlier device work: ", e.what());
  }
}

void Runtime::add_stream(Stream* s) {
  std::lock_guard lock(streams_mu_);
  streams_.insert(s);
}

void Runtime::remove_stream(Stream* s) {
  std::lock_guard lock(streams_mu_);
  streams_.erase(s);
}

void Runtime::synchronize_all() noexcept {
  std::lock_guard lock(streams_mu_);
  for (Stream* s : streams_) {
    if (s->runs_here()) continue;  // work that releases memory: the rest of its own stream comes later
    try {
      s->synchronize();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failed device reports its failure where it is synchronised
    }
  }
}

std::shared_ptr<void> Runtime::start(int stream, const char* name, const std::vector<Access>& accesses) {
  if (!options_.detect_races || accesses.empty()) return nullptr;
  auto mine = std::make_shared<Running>(Running{.stream = stream, .name = name, .accesses = accesses});
  std::lock_guard lock(running_mu_);
  for (const auto& other : running_) {
    if (other->stream == stream) continue;
    for (const Access& a : accesses) {
      for (const Access& b : other->accesses) {
        if (!overlap(a, b) || !(a.writes || b.writes)) continue;
        const std::uint64_t from = std::max(address(a.begin), address(b.begin));
        OPTIMUS_FAIL(this->name(), ": race: '", name, "' on stream ", stream, " and '", other->name, "' on stream ",
                     other->stream, " touch device bytes from ", hex(reinterpret_cast<const void*>(from)),
                     " at the same time and '", a.writes ? name : other->name,
                     "' writes them; order the streams with an event");
      }
    }
  }
  running_.push_back(mine);
  return std::shared_ptr<void>(mine.get(), [this, mine](void*) {
    std::lock_guard done(running_mu_);
    running_.erase(std::find(running_.begin(), running_.end(), mine));
  });
}

}  // namespace optimus::sim
