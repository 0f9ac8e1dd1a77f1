# Shared by the scripts: dependencies, configure + build, and how to launch MPI jobs here.
# Environment: OPTIMUS_BUILD_DIR (default build), OPTIMUS_BUILD_TYPE (Release), OPTIMUS_CMAKE_ARGS (extra).

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${OPTIMUS_BUILD_DIR:-$root_dir/build}"
# The cores this process may use (its affinity), not OMP_NUM_THREADS: GNU nproc honours that variable, which clusters
# export as 1.
jobs="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)"

# One thread per rank: ranks share cores, and OpenBLAS must not start a pool in each of them.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# mpirun for this machine: ranks may outnumber cores; root is allowed (containers, CI).
mpirun_cmd=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
if [[ "$(id -u)" -eq 0 ]]; then
  mpirun_cmd+=(--allow-run-as-root)
fi

# Configures as a user's `cmake -S . -B build` does: CMake's default generator (or CMAKE_GENERATOR's) for a new build
# directory, the one it was made with for an existing one.
optimus_build() {  # optimus_build [cmake --build args...]
  "$root_dir/scripts/install_deps.sh"
  # shellcheck disable=SC2086
  cmake -S "$root_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE="${OPTIMUS_BUILD_TYPE:-Release}" \
    ${OPTIMUS_CMAKE_ARGS:-} >/dev/null
  cmake --build "$build_dir" -j "$jobs" "$@"
}

# The environment of the sanitized tests and programs (a build of ./scripts/test.sh --sanitize in $1): leaks reported
# but Open MPI's own (lsan.supp), whose plugins stay loaded until exit (the build's liboptimus_keep_plugins.so, see
# tests/support/keep_plugins.cpp) so that AddressSanitizer's fast unwinder names them.
sanitizer_env() {  # sanitizer_env BUILD_DIR
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:verify_asan_link_order=0}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root_dir/scripts/lsan.supp}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
  export LD_PRELOAD="$1/liboptimus_keep_plugins.so${LD_PRELOAD:+:$LD_PRELOAD}"
}
