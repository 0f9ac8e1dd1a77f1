// Shapes and the owning host tensor (64-byte-aligned, zero-initialized).
#include "optimus/core/tensor.hpp"

#include "optimus/core/device_memory.hpp"

#include <cstdlib>
#include <cstring>

namespace optimus {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  OPTIMUS_CHECK(dims.size() <= static_cast<std::size_t>(kMaxRank), "a shape has at most ", kMaxRank,
                " dimensions, got ", dims.size());
  for (std::int64_t d : dims) {
    OPTIMUS_CHECK(d >= 0, "shape dimensions must be non-negative, got ", d);
    dims_[static_cast<std::size_t>(rank_++)] = d;
  }
  numel();  // refuses a shape whose element count overflows
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank_; ++d) {
    OPTIMUS_CHECK(!__builtin_mul_overflow(n, (*this)[d], &n) && n <= kMaxElements, "shape ", *this, " has more than ",
                  kMaxElements, " elements (2^60: its byte count would overflow)");
  }
  return n;
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int d = 0; d < a.rank_; ++d) {
    if (a[d] != b[d]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (int d = 0; d < s.rank(); ++d) os << (d ? ", " : "") << s[d];
  return os << ']';
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  std::int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

template <class T>
Tensor<T>::Tensor(Shape shape, MemoryTag tag, Init init)
    : data_(nullptr, Free{tag.device}), shape_(shape), tag_(tag) {
  DeviceMemory* on = tag.device;
  constexpr std::size_t kAlign = 64;
  const std::size_t bytes = (this->bytes() + kAlign - 1) / kAlign * kAlign;
  if (bytes == 0) return;
  if (on != nullptr) {
    void* p = on->allocate(bytes);
    data_.reset(static_cast<T*>(p));
    if (init == Init::zero) on->zero(p, bytes);
  } else {
    void* p = std::aligned_alloc(kAlign, bytes);
    OPTIMUS_CHECK(p != nullptr, "host allocation of ", bytes, " bytes for a tensor of shape ", shape, " failed");
    if (init == Init::zero) std::memset(p, 0, bytes);
    data_.reset(static_cast<T*>(p));
  }
  if (tag_.tracker) {
    counted_ = this->bytes();
    tag_.tracker->allocate(tag_.kind, place_of(tag_), counted_);
  }
}

template <class T>
Tensor<T>::Tensor(Tensor&& other) noexcept
    : data_(std::move(other.data_)), shape_(other.shape_), tag_(other.tag_), counted_(other.counted_) {
  other.shape_ = Shape{0};
  other.counted_ = 0;
}

template <class T>
Tensor<T>& Tensor<T>::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::move(other.data_);
    shape_ = other.shape_;
    tag_ = other.tag_;
    counted_ = other.counted_;
    other.shape_ = Shape{0};
    other.counted_ = 0;
  }
  return *this;
}

template <class T>
void Tensor<T>::reset() noexcept {
  if (tag_.tracker && counted_) tag_.tracker->release(tag_.kind, place_of(tag_), counted_);
  counted_ = 0;
  data_.reset();
  shape_ = Shape{0};
}

template <class T>
Device Tensor<T>::device() const {
  return device_of(device_memory());
}

template <class T>
Tensor<T> Tensor<T>::clone() const {
  Tensor copy(shape_, tag_, Init::none);
  copy_bytes(device_memory(), copy.data(), data(), bytes());
  return copy;
}

template <class T>
void Tensor<T>::Free::operator()(T* p) const noexcept {
  if (memory != nullptr) {
    memory->release(p);
  } else {
    std::free(p);
  }
}

void copy_bytes(DeviceMemory* device, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (device != nullptr) {
    device->copy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

template <class T>
Tensor<T> upload(const T* host, Shape shape, MemoryTag tag) {
  Tensor<T> t(shape, tag, Init::none);
  copy_bytes(t.device_memory(), t.data(), host, t.bytes());
  return t;
}

template <class T>
std::vector<T> download(const Tensor<T>& t) {
  std::vector<T> host(static_cast<std::size_t>(t.numel()));
  copy_bytes(t.device_memory(), host.data(), t.data(), t.bytes());
  return host;
}

#define OPTIMUS_INSTANTIATE(T)                                   \
  template class Tensor<T>;                                      \
  template Tensor<T> upload<T>(const T*, Shape, MemoryTag);      \
  template std::vector<T> download<T>(const Tensor<T>&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
OPTIMUS_INSTANTIATE(bf16)
OPTIMUS_INSTANTIATE(int)
OPTIMUS_INSTANTIATE(std::uint8_t)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus
