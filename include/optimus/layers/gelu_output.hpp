// What a linear layer's forward_gelu returns: y = gelu(x W + b) and GELU's input pre = x W + b, which the MLP keeps
// for GELU's derivative. Both [N, out] (as the layer splits it).
#pragma once

#include "optimus/grid/dist_matrix.hpp"

namespace optimus {

template <class T>
struct GeluOutput {
  DistMatrix<T> y;
  DistMatrix<T> pre;
};

}  // namespace optimus
