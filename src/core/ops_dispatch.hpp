// Internal to src/core: what every device-dispatching operation (ops*.cpp) does first — find the one device of
// its operands (or refuse a mix, naming them), check shapes, and refuse what the CUDA side cannot run — and the
// Eigen views its CPU side computes with.
#pragma once

#include <Eigen/Core>
#include <initializer_list>
#include <sstream>
#include <type_traits>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

#if OPTIMUS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace optimus::ops::detail {

inline const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

// The one device of all operands, or an error naming the operation and where each operand lives.
inline Device common_device(const char* op, std::initializer_list<std::pair<const char*, Device>> operands) {
  const Device first = operands.begin()->second;
  bool mixed = false;
  for (const auto& [name, device] : operands) mixed = mixed || device != first;
  if (mixed) {
    std::ostringstream where;
    for (const auto& [name, device] : operands) where << (where.tellp() > 0 ? ", " : "") << name << " on " << device_name(device);
    OPTIMUS_FAIL(op, ": operands are on different devices (", where.str(), "); move them to one device first");
  }
  return first;
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

#if OPTIMUS_HAVE_CUDA
inline cudaStream_t stream_of(Queue q) { return static_cast<cudaStream_t>(q.cuda_stream); }
#endif

// The CUDA kernels are fp32; double (or a build without CUDA) on the device is refused.
template <class T>
void require_cuda(const char* op) {
#if OPTIMUS_HAVE_CUDA
  OPTIMUS_CHECK((std::is_same_v<T, float>), op, ": the CUDA kernels take f32 (f64 runs on the CPU)");
#else
  OPTIMUS_FAIL(op, ": operands are CUDA tensors but Optimus was built without CUDA (OPTIMUS_WITH_CUDA=OFF)");
#endif
}

// The CPU side's Eigen views of contiguous row-major data: [rows, cols] matrices and [1, n] arrays.
template <class T>
using Rows = Eigen::Map<Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using ConstRows = Eigen::Map<const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using Vec = Eigen::Map<Eigen::Array<std::remove_const_t<T>, 1, Eigen::Dynamic>>;
template <class T>
using ConstVec = Eigen::Map<const Eigen::Array<std::remove_const_t<T>, 1, Eigen::Dynamic>>;

// Whether the operands are CUDA tensors (then: f32, in a CUDA build) or CPU ones; a mix is refused.
template <class T>
bool on_cuda(const char* op, std::initializer_list<std::pair<const char*, Device>> operands) {
  if (common_device(op, operands) == Device::cpu) return false;
  require_cuda<T>(op);
  return true;
}

}  // namespace optimus::ops::detail
