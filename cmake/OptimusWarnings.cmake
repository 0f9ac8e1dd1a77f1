# Warnings for every Optimus target.
include_guard(GLOBAL)

add_library(optimus_warnings INTERFACE)
target_compile_options(optimus_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion -Wno-sign-conversion>
  # GCC 12 reports false positives inside its own AVX-512 intrinsics when inlining Eigen (GCC bug 105593).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>)


# optimus_target_defaults(<target>): warnings on, private to the target.
function(optimus_target_defaults target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:optimus_warnings>)
endfunction()
