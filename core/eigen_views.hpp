// Internal to core: Eigen views of contiguous row-major host data, for the CPU kernels: [rows, cols] matrices
// and [1, n] arrays.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>

#include "optimus/core/tensor.hpp"

namespace optimus::cpu::detail {

template <class T>
using Rows = Eigen::Map<Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using ConstRows = Eigen::Map<const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using ConstVec = Eigen::Map<const Eigen::Array<std::remove_const_t<T>, 1, Eigen::Dynamic>>;

// Rows and columns of a matrix view, or 1 x numel for a vector.
template <class T>
std::int64_t rows_of(const TensorView<T>& x) { return x.rank() == 2 ? x.size(0) : 1; }
template <class T>
std::int64_t cols_of(const TensorView<T>& x) { return x.rank() == 2 ? x.size(1) : x.numel(); }

}  // namespace optimus::cpu::detail
