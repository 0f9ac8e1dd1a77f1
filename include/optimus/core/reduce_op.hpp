// How a reduction combines its contributions: the one enum of the communicators' reductions (comm/communicator.hpp)
// and of the element-wise reduction of device buffers (ops::reduce_into).
#pragma once

namespace optimus {

enum class ReduceOp { sum, max, min };

}  // namespace optimus
