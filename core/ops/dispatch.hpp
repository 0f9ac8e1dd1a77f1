// Internal to core: how every operation of optimus/core/ops.hpp runs (core/ops/*.cpp). An operation checks its
// shapes, then calls run<T>() with its CPU body, its CUDA launch and its operands: the operands must be on one device
// (otherwise an error naming each operand's device); on the CPU the body runs; on an accelerator run refuses what its
// kernels do not take — f64, an operand whose layout they cannot read, a queue without a stream of that device — and
// runs the body on the simulated device's stream or launches the CUDA kernels on a GPU's. The GEMMs take dispatch(),
// which runs the device's GemmEngine instead.
#pragma once

#include <initializer_list>
#include <span>
#include <sstream>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_kernels.hpp"
#include "optimus/core/device_runtime.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/timeline.hpp"

// An operation's CUDA launch: the call in a build whose core has the operations' kernels (core/ops/*.cu), else
// unreachable (no CUDA tensor exists without CUDA).
#if defined(OPTIMUS_OPS_CUDA)
#define OPTIMUS_CUDA_LAUNCH(call) call
#else
#define OPTIMUS_CUDA_LAUNCH(call)                                              \
  do {                                                                         \
    (void)sizeof(decltype(call)*); /* the call checked, its operands used */   \
    OPTIMUS_FAIL("a CUDA launch in a build without CUDA");                     \
  } while (0)
#endif

namespace optimus::ops::detail {

// An operand as the dispatch sees it: its name, device and strides, and the layout an accelerator needs it in when
// it is not already so (null: it is fine).
struct Operand {
  const char* name;
  Device device;
  Shape strides;
  const char* needs = nullptr;
};

// Any layout (the operation checks it itself), contiguous, or rows contiguous (stride(1) = 1, any row stride).
template <class T>
Operand any_layout(const char* name, const TensorView<T>& v) {
  return {.name = name, .device = v.device(), .strides = v.strides()};
}
template <class T>
Operand contiguous(const char* name, const TensorView<T>& v) {
  return {.name = name, .device = v.device(), .strides = v.strides(), .needs = v.is_contiguous() ? nullptr : "contiguous"};
}
template <class T>
Operand contiguous_rows(const char* name, const TensorView<T>& v) {
  const bool rows = v.rank() != 2 || v.stride(1) == 1 || v.size(1) <= 1;
  return {.name = name, .device = v.device(), .strides = v.strides(), .needs = rows ? nullptr : "rows contiguous"};
}

// The one device of all operands (at least one), or an error naming the operation and where each operand lives.
inline Device common_device(const char* op, std::span<const Operand> operands) {
  const Device first = operands.front().device;
  bool mixed = false;
  for (const Operand& o : operands) mixed = mixed || o.device != first;
  if (mixed) {
    std::ostringstream where;
    for (const Operand& o : operands) where << (where.tellp() > 0 ? ", " : "") << o.name << " on " << name_of(o.device);
    OPTIMUS_FAIL(op, ": operands are on different devices (", where.str(), "); move them to one device first");
  }
  return first;
}
inline Device common_device(const char* op, std::initializer_list<Operand> operands) {
  return common_device(op, std::span<const Operand>(operands.begin(), operands.size()));
}

// On an accelerator: the operands' layouts, and a queue whose stream is on `where`.
inline void check_accelerated(const char* op, Device where, std::initializer_list<Operand> operands,
                              const Queue& queue) {
  for (const Operand& o : operands) {
    OPTIMUS_CHECK(o.needs == nullptr, op, ": on ", name_of(where), " ", o.name, " must be ", o.needs,
                  "; its strides are ", o.strides);
  }
  OPTIMUS_CHECK(queue.stream != nullptr, op, ": operands on ", name_of(where),
                " need a stream in the queue (ops::Queue::stream; there is no default stream)");
  OPTIMUS_CHECK(queue.stream->device() == where, op, ": operands on ", name_of(where), " but the queue's stream is a ",
                name_of(queue.stream->device()), " stream");
}

// How a timeline counts operation `op`: gemm and gemm_batched as GEMMs, the fused attention as attention, the rest as
// element-wise work.
inline SpanKind span_kind_of(const char* op) {
  const std::string_view name(op);
  if (name.starts_with("gemm")) return SpanKind::gemm;
  if (name.starts_with("flash_attention")) return SpanKind::attention;
  return SpanKind::elementwise;
}

// Runs on_cpu() on the host, or on_accelerator() after the checks above (the GEMMs: ops/gemm.cpp, which runs the
// device's GemmEngine); accelerators run f32 (F64: f64 too). Returns what they return.
template <class T, bool F64 = false, class OnCpu, class OnAccelerator>
decltype(auto) dispatch(const char* op, std::initializer_list<Operand> operands, const Queue& queue, OnCpu&& on_cpu,
                        OnAccelerator&& on_accelerator) {
  const Device where = common_device(op, operands);
  if (where == Device::cpu) {
    const Timeline::Operation timed(queue.timeline, queue.timeline != nullptr ? span_kind_of(op) : SpanKind::elementwise);
    return on_cpu();
  }
  if constexpr (!std::is_same_v<T, float> && !(F64 && std::is_same_v<T, double>)) {
    OPTIMUS_FAIL(op, ": operands on ", name_of(where), " must be f32: the accelerators' kernels take f32 (f64 runs on "
                 "the CPU)");
  } else {
    check_accelerated(op, where, operands, queue);
    return on_accelerator();
  }
}

// ---- An operation described once ----
//
//   run<T>(op, queue, cpu, cuda, in("x", x), out("y", y));
//
// cpu(views...) is the operation's CPU body: it runs on the host, and on a device that runs host work (the simulated
// device) on the queue's stream, over the operands' host addresses (DeviceRuntime::launch_on_host) — the device needs
// no code of its own. cuda(views..., stream) launches the operation's CUDA kernels on `stream` (a cudaStream_t), in
// CUDA builds (write the call as OPTIMUS_CUDA_LAUNCH(...)). On an accelerator operands are contiguous unless given as
// rows(...) (rows contiguous, any row stride); on the CPU the body takes what the operation's checks let through. An
// absent operand (a default TensorView: rank 0, no data) is passed on as it is. Accelerators run f32 (F64: f64
// too).
enum class Strides { contiguous, rows };

template <class T>
struct Arg {
  const char* name;
  TensorView<T> view;
  Strides strides = Strides::contiguous;
};
template <class T>
Arg<const T> in(const char* name, TensorView<const T> view) {
  return {name, view};
}
template <class T>
Arg<T> out(const char* name, TensorView<T> view) {
  return {name, view};
}
template <class T>
Arg<T> rows(Arg<T> arg) {
  arg.strides = Strides::rows;
  return arg;
}

template <class T>
bool absent(const TensorView<T>& v) {
  return v.rank() == 0 && v.data() == nullptr;  // TensorView{}
}

template <class T>
Operand operand_of(const Arg<T>& a) {
  return a.strides == Strides::rows ? contiguous_rows(a.name, a.view) : contiguous(a.name, a.view);
}

// The one device of the operands present (absent ones take any; none present: the CPU).
template <class... V>
Device device_of(const char* op, const Arg<V>&... args) {
  std::vector<Operand> present;
  (..., (absent(args.view) ? void() : present.push_back(any_layout(args.name, args.view))));
  return present.empty() ? Device::cpu : common_device(op, present);
}

template <class T>
TensorView<T> at_host_address(const TensorView<T>& v, void* host) {
  return TensorView<T>(static_cast<T*>(host), v.shape(), v.strides(), Device::cpu);
}

template <class Cpu, class Views, std::size_t... I>
void run_at(const Cpu& cpu, const Views& views, const std::vector<void*>& host, std::index_sequence<I...>) {
  cpu(at_host_address(std::get<I>(views), host[I])...);
}

template <class T, bool F64 = false, class Cpu, class Cuda, class... V>
void run(const char* op, const Queue& queue, Cpu cpu, Cuda cuda, Arg<V>... args) {
  const Device where = device_of(op, args...);
  if (where == Device::cpu) {
    const Timeline::Operation timed(queue.timeline,
                                    queue.timeline != nullptr ? span_kind_of(op) : SpanKind::elementwise);
    cpu(args.view...);
    return;
  }
  if constexpr (!std::is_same_v<T, float> && !(F64 && std::is_same_v<T, double>)) {
    OPTIMUS_FAIL(op, ": operands on ", name_of(where), " must be f32: the accelerators' kernels take f32 (f64 runs on "
                 "the CPU)");
  } else {
    check_accelerated(op, where, {operand_of(args)...}, queue);
    DeviceRuntime& device = queue.stream->runtime();
    if (!device.runs_host_work()) {
      cuda(args.view..., static_cast<cudaStream_t>(queue.stream->native_handle()));
      return;
    }
    std::vector<DeviceRange> ranges{
        DeviceRange{.begin = args.view.data(),
                    .bytes = absent(args.view) ? 0 : span_bytes(args.view),
                    .writes = !std::is_const_v<V>}...};
    device.launch_on_host(*queue.stream, op, std::move(ranges),
                          [cpu, views = std::make_tuple(args.view...)](const std::vector<void*>& host) {
                            run_at(cpu, views, host, std::index_sequence_for<V...>{});
                          });
  }
}

// ops::DropoutMask as the CUDA kernels take it.
inline cuda::DropoutMask cuda_mask(const DropoutMask& m) {
  return {.row0 = m.row0, .col0 = m.col0, .p = m.p, .keep_scale = static_cast<float>(1.0 / (1.0 - m.p)),
          .seed = m.seed, .stream = m.stream};
}

// A matrix with contiguous rows and the expected shape, or an error naming the operand.
template <class T>
void check_shape(const char* op, const char* name, const TensorView<T>& v, std::int64_t rows, std::int64_t cols) {
  OPTIMUS_CHECK(v.numel() == rows * cols && (v.rank() != 2 || (v.size(0) == rows && v.size(1) == cols)), op, ": ",
                name, " has shape ", v.shape(), ", expected ", rows, "x", cols);
  OPTIMUS_CHECK(v.is_contiguous(), op, ": ", name, " must be contiguous, its strides are ", v.strides());
}

template <class T>
std::int64_t rows_of(const TensorView<T>& x) { return x.rank() == 2 ? x.size(0) : 1; }
template <class T>
std::int64_t cols_of(const TensorView<T>& x) { return x.rank() == 2 ? x.size(1) : x.numel(); }

}  // namespace optimus::ops::detail
