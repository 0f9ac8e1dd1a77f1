// Tensors: Tensor<T> owns row-major memory — 64-byte-aligned host memory, or device memory from a DeviceMemory
// (optimus/core/device_memory.hpp) — and TensorView<T> is a non-owning strided window on it (or on any memory)
// that knows which device it is on. Copies are explicit (clone()) to prevent performance accidents. Shapes and
// strides count elements, not bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <type_traits>
#include <vector>

#include "optimus/core/device.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/memory.hpp"

namespace optimus {

// A shape of rank 0..kMaxRank.
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  // The most elements a shape may have, so that its bytes (8 per element at most) fit in 64 bits with room to align.
  static constexpr std::int64_t kMaxElements = std::int64_t{1} << 60;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int d) const { return dims_[static_cast<std::size_t>(d)]; }
  std::int64_t& operator[](int d) { return dims_[static_cast<std::size_t>(d)]; }
  // The product of the dimensions; throws optimus::Error naming the shape where it exceeds kMaxElements.
  std::int64_t numel() const;

  friend bool operator==(const Shape& a, const Shape& b);
  friend std::ostream& operator<<(std::ostream& os, const Shape& s);  // prints e.g. [4, 6]

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Row-major (C order) strides of a shape.
Shape contiguous_strides(const Shape& shape);

// A view names the device its memory is on: there is no default, so a view of device memory cannot silently become
// a view of host memory (host code would then touch device memory). An empty view is on the host.
template <class T>
class TensorView {
 public:
  TensorView() = default;
  TensorView(T* data, Shape shape, Shape strides, Device device)
      : data_(data), shape_(shape), strides_(strides), device_(device) {}
  TensorView(T* data, Shape shape, Device device) : TensorView(data, shape, contiguous_strides(shape), device) {}

  // A view of T converts to a view of const T.
  operator TensorView<const T>() const  // NOLINT(google-explicit-constructor)
    requires(!std::is_const_v<T>)
  {
    return TensorView<const T>(data_, shape_, strides_, device_);
  }

  T* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int rank() const { return shape_.rank(); }
  std::int64_t size(int d) const { return shape_[d]; }
  std::int64_t stride(int d) const { return strides_[d]; }
  std::int64_t numel() const { return shape_.numel(); }
  Device device() const { return device_; }
  bool is_contiguous() const { return strides_ == contiguous_strides(shape_); }

  // Matrix access for rank-2 views: element (r, c).
  T& operator()(std::int64_t r, std::int64_t c) const { return data_[r * strides_[0] + c * strides_[1]]; }

  // Rank-2 views: the rows x cols window starting at (r0, c0).
  TensorView block(std::int64_t r0, std::int64_t c0, std::int64_t rows, std::int64_t cols) const {
    OPTIMUS_CHECK(rank() == 2, "block() needs a rank-2 view, this one has shape ", shape_);
    OPTIMUS_CHECK(r0 >= 0 && c0 >= 0 && rows >= 0 && cols >= 0 && r0 + rows <= shape_[0] && c0 + cols <= shape_[1],
                  "block [", r0, ", ", c0, "] of size ", rows, "x", cols, " is outside a view of shape ", shape_);
    return TensorView(data_ + r0 * strides_[0] + c0 * strides_[1], Shape{rows, cols}, strides_, device_);
  }

 private:
  T* data_ = nullptr;
  Shape shape_;
  Shape strides_;
  Device device_ = Device::cpu;
};

// The bytes a view spans, from its first element to one past its last (0 for an empty view).
template <class T>
std::size_t span_bytes(const TensorView<T>& v) {
  if (v.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < v.rank(); ++d) last += (v.size(d) - 1) * v.stride(d);
  return static_cast<std::size_t>(last + 1) * sizeof(T);
}

// Whether a new tensor's memory is zeroed (the default) or left as it is, for buffers that are fully
// overwritten before they are read (communication panels, GEMM outputs with beta = 0).
enum class Init { zero, none };

// Owning tensor, row-major and contiguous, zero-initialized unless Init::none. Move-only. With a MemoryTag
// its bytes are counted by the tag's tracker from construction until destruction (or reset()). On the host
// unless the tag names a device: then in that device's memory, and its views say so.
template <class T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, MemoryTag tag = {}, Init init = Init::zero);

  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() { reset(); }

  // Frees the memory (and its count); the tensor becomes empty.
  void reset() noexcept;
  const MemoryTag& tag() const { return tag_; }

  Tensor clone() const;  // same tag, same device

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t size(int d) const { return shape_[d]; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * sizeof(T); }
  Device device() const;
  DeviceMemory* device_memory() const { return data_.get_deleter().memory; }  // null on the host

  TensorView<T> view() { return TensorView<T>(data(), shape_, device()); }
  TensorView<const T> view() const { return TensorView<const T>(data(), shape_, device()); }

 private:
  struct Free {
    DeviceMemory* memory = nullptr;  // null: host memory from std::aligned_alloc
    void operator()(T* p) const noexcept;
  };
  std::unique_ptr<T[], Free> data_;
  Shape shape_{0};
  MemoryTag tag_;
  std::size_t counted_ = 0;  // bytes reported to tag_.tracker
};

// A tensor of `tag` (host or device) holding a copy of host data [shape.numel()], and a host copy of a tensor.
template <class T>
Tensor<T> upload(const T* host, Shape shape, MemoryTag tag);
template <class T>
std::vector<T> download(const Tensor<T>& t);

extern template class Tensor<float>;
extern template class Tensor<double>;
extern template class Tensor<bf16>;
extern template class Tensor<int>;
extern template class Tensor<std::uint8_t>;

}  // namespace optimus
