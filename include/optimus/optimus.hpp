// The umbrella header: everything a user of Optimus needs.
#pragma once

#include "optimus/comm/communicator.hpp"
#include "optimus/comm/context.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/dtype.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/matmul.hpp"
