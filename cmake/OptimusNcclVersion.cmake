# The NCCL that Optimus can use: ncclCommSplit (the grid's communicators are splits) needs NCCL 2.18, bf16
# (ncclBfloat16) 2.10. Used by OptimusDependencies.cmake; tested by tests/cmake/nccl_version.cmake.
#
#   optimus_nccl_version(<nccl.h> <var>)       the version the header declares ("2.28"), or "" if it declares none
#   optimus_nccl_check(<version> <var_ok> <var_why>)  whether Optimus can use it, and if not why
include_guard(GLOBAL)

set(OPTIMUS_NCCL_MINIMUM "2.18")

function(optimus_nccl_version header var)
  set(version "")
  if(EXISTS "${header}")
    file(STRINGS "${header}" major REGEX "^#define[ \t]+NCCL_MAJOR[ \t]+[0-9]+")
    file(STRINGS "${header}" minor REGEX "^#define[ \t]+NCCL_MINOR[ \t]+[0-9]+")
    if(major AND minor)
      string(REGEX REPLACE ".*NCCL_MAJOR[ \t]+([0-9]+).*" "\\1" major "${major}")
      string(REGEX REPLACE ".*NCCL_MINOR[ \t]+([0-9]+).*" "\\1" minor "${minor}")
      set(version "${major}.${minor}")
    endif()
  endif()
  set(${var} "${version}" PARENT_SCOPE)
endfunction()

function(optimus_nccl_check version var_ok var_why)
  if(version STREQUAL "")
    set(${var_ok} FALSE PARENT_SCOPE)
    set(${var_why} "nccl.h declares no NCCL_MAJOR/NCCL_MINOR" PARENT_SCOPE)
  elseif(version VERSION_LESS OPTIMUS_NCCL_MINIMUM)
    set(${var_ok} FALSE PARENT_SCOPE)
    set(${var_why} "NCCL ${version} is older than ${OPTIMUS_NCCL_MINIMUM} (Optimus needs ncclCommSplit, NCCL 2.18, and "
                   "bf16, NCCL 2.10)" PARENT_SCOPE)
  else()
    set(${var_ok} TRUE PARENT_SCOPE)
    set(${var_why} "" PARENT_SCOPE)
  endif()
endfunction()
