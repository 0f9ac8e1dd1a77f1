// OPTIMUS_CHECK_MPI: turns an MPI error code into optimus::Error with MPI's own description.
#pragma once

#include <mpi.h>

#include "optimus/core/error.hpp"

namespace optimus::detail {

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace optimus::detail

#define OPTIMUS_CHECK_MPI(call)                                                              \
  do {                                                                                       \
    const int optimus_mpi_code_ = (call);                                                    \
    OPTIMUS_CHECK(optimus_mpi_code_ == MPI_SUCCESS, #call, " failed: ",                      \
                  ::optimus::detail::mpi_error_string(optimus_mpi_code_));                    \
  } while (0)
