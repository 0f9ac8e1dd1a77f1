#!/usr/bin/env bash
# The main job: builds Optimus and runs the SUMMA example on a 2x2 grid (4 MPI ranks), verified against Eigen.
# Arguments go to the example (e.g. --m 512 --n 256 --k 384).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

optimus_build --target summa_2x2 >/dev/null
"${mpirun_cmd[@]}" -np 4 "$build_dir/examples/summa_2x2" "$@"
