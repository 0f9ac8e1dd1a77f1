# Warnings and precompiled headers for every Optimus target.
include_guard(GLOBAL)

add_library(optimus_warnings INTERFACE)
target_compile_options(optimus_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion -Wno-sign-conversion>
  # GCC 12 reports false positives inside its own AVX-512 intrinsics when inlining Eigen (GCC bug 105593).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>
  # A unity build (CMAKE_UNITY_BUILD, .ci/run) includes each source into a combined one, where GCC takes a source's
  # types that use its anonymous namespace for a header's and warns about each; in a source of its own they are fine.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<BOOL:${CMAKE_UNITY_BUILD}>>:-Wno-subobject-linkage>
  # Without CUDA an operation's launch lambda names its captures only in OPTIMUS_CUDA_LAUNCH's unevaluated check of the
  # call (core/ops/dispatch.hpp), which clang reports as captures not needed; with CUDA they are used.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>,$<NOT:$<BOOL:${OPTIMUS_HAVE_CUDA}>>>:-Wno-unused-lambda-capture>)

# Precompiled headers (GCC only: clang refuses a precompiled header built with other options, and the fuzz build's
# targets differ in theirs): the standard library and Eigen headers nearly every source includes through the public
# headers, parsed once per build instead of once per source. Libraries reuse optimus_core's, executables
# optimus_pch_executable's (core/CMakeLists.txt): GCC refuses a header precompiled with -fPIC in a -fPIE compile.
# A source compiled with optimisation options of its own must skip them (SKIP_PRECOMPILE_HEADERS): GCC accepts the
# header and drops the source's options (kernels_cpu.cpp's -fno-trapping-math, core/CMakeLists.txt).
set(OPTIMUS_USE_PCH OFF)
if(OPTIMUS_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(OPTIMUS_USE_PCH ON)
endif()
set(OPTIMUS_PRECOMPILED_HEADERS <algorithm> <array> <atomic> <chrono> <cmath> <cstddef> <cstdint> <cstring>
    <functional> <map> <memory> <mutex> <optional> <span> <string> <string_view> <tuple> <utility> <vector>
    <Eigen/Core>)

# optimus_target_warnings(<target>): warnings on, private to the target.
function(optimus_target_warnings target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:optimus_warnings>)
endfunction()

# optimus_target_defaults(<target>): warnings on, and the precompiled headers where OPTIMUS_USE_PCH holds.
function(optimus_target_defaults target)
  optimus_target_warnings(${target})
  if(NOT OPTIMUS_USE_PCH)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(target STREQUAL "optimus_core" OR target STREQUAL "optimus_pch_executable")
    target_precompile_headers(${target} PRIVATE ${OPTIMUS_PRECOMPILED_HEADERS})
  elseif(type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM optimus_pch_executable)
  else()
    target_precompile_headers(${target} REUSE_FROM optimus_core)
  endif()
endfunction()
