// The former name of optimus::Process (optimus/comm/process.hpp), kept so that programs written against it still
// build, with a deprecation warning: "context" in Optimus now means a layer's saved state alone (layers/context.hpp).
#pragma once

#include "optimus/comm/process.hpp"

namespace optimus {

using Context [[deprecated("optimus::Context is now optimus::Process (optimus/comm/process.hpp)")]] = Process;

}  // namespace optimus
