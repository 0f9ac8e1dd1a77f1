// Whether a GEMM operand enters as it is stored or transposed: op(X) = X or X^T.
#pragma once

namespace optimus {

enum class Trans { no, yes };

}  // namespace optimus
