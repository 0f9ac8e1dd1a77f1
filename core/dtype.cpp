// Parsing of dtype names (used by command-line programs).
#include "optimus/core/dtype.hpp"

#include <string>

#include "optimus/core/error.hpp"

namespace optimus {

DType parse_dtype(std::string_view text) {
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    if (text == name_of(t)) return t;
  }
  OPTIMUS_FAIL("unknown dtype '", std::string(text), "' (expected f32, f64 or bf16)");
}

}  // namespace optimus
