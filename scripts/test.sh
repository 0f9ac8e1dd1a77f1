#!/usr/bin/env bash
# The test command: installs missing Debian packages, configures, builds, and runs every test with ctest.
#
#   ./scripts/test.sh               Release build in build/, all tests (MPI at 1, 4, 9 and 16 ranks)
#   ./scripts/test.sh --sanitize    Debug (at -O1, -g1) + ASan/UBSan build in build-asan/ (the CUDA backend left out: no
#                                   GPU runs it here, and the simulated device takes every device path), all tests
#   ./scripts/test.sh --no-mpi      build without MPI in build-nompi/ (in-process backend only)
#   ./scripts/test.sh --fuzz        clang + libFuzzer build without MPI in build-fuzz/: the parsers' fuzz targets,
#                                   100000 inputs each, and train_gpt (instrumented alike) for in-process runs
#   ./scripts/test.sh --sanitize --fuzz
#                                   both in one clang build in build-asan/: every test and the fuzz targets, the
#                                   library instrumented for ASan/UBSan and libFuzzer once (what .ci/run does)
#   ./scripts/test.sh -- ARGS       extra arguments for ctest (e.g. -- -L mpi, -- -LE long)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ctest_args=()
fuzz=0
sanitize=0
no_mpi=0
while (($#)); do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --fuzz) fuzz=1 ;;
    --no-mpi) no_mpi=1 ;;
    --) shift; ctest_args+=("$@"); break ;;
    *) echo "test.sh: unknown option '$1' (see the top of this script)" >&2; exit 2 ;;
  esac
  shift
done
if ((no_mpi && (sanitize || fuzz))); then
  echo "test.sh: --no-mpi is a configuration of its own (--fuzz alone builds without MPI)" >&2
  exit 2
fi

if ((sanitize)); then
  build_dir="${OPTIMUS_BUILD_DIR:-$root_dir/build-asan}"
  OPTIMUS_BUILD_TYPE=Debug
  # Line tables only (-g1): the sanitizers' stack traces keep file and line, and the build is a quarter shorter.
  OPTIMUS_CMAKE_ARGS="${OPTIMUS_CMAKE_ARGS:-} -DOPTIMUS_SANITIZE=ON -DOPTIMUS_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1"
fi
if ((fuzz)); then
  OPTIMUS_CMAKE_ARGS="${OPTIMUS_CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER=clang++ -DOPTIMUS_FUZZ=ON -DOPTIMUS_WITH_CUDA=OFF"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
  export OPTIMUS_FUZZ=ON
  if ((!sanitize)); then
    build_dir="${OPTIMUS_BUILD_DIR:-$root_dir/build-fuzz}"
    OPTIMUS_CMAKE_ARGS="$OPTIMUS_CMAKE_ARGS -DOPTIMUS_WITH_MPI=OFF -DOPTIMUS_BUILD_TESTS=OFF -DOPTIMUS_BUILD_BENCH=OFF \
      -DOPTIMUS_BUILD_EXAMPLES=ON"
    export OPTIMUS_WITH_MPI=OFF
  fi
fi
if ((no_mpi)); then
  build_dir="${OPTIMUS_BUILD_DIR:-$root_dir/build-nompi}"
  export OPTIMUS_WITH_MPI=OFF
  OPTIMUS_CMAKE_ARGS="${OPTIMUS_CMAKE_ARGS:-} -DOPTIMUS_WITH_MPI=OFF"
fi

if ((fuzz && !sanitize)); then
  optimus_build --target optimus_fuzz train_gpt  # the fuzz targets, train_gpt and the libraries they link
  cd "$build_dir"
  exec ctest --output-on-failure --timeout 600 -j "$jobs" -L fuzz "${ctest_args[@]}"  # the targets side by side
fi
optimus_build
# Python test tools (the GPT-2 interop test's external reader and writer) in a venv of the build directory.
venv="$build_dir/test-venv"
if ! "$venv/bin/python" -c "import safetensors, numpy" 2>/dev/null; then
  echo "test.sh: installing safetensors and numpy into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check safetensors numpy
fi
if ((sanitize)); then
  sanitizer_env "$build_dir"
fi
cd "$build_dir"
ctest --output-on-failure --timeout 600 -j "$jobs" "${ctest_args[@]}"  # one test per core
