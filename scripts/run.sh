#!/usr/bin/env bash
# The main job: builds Optimus and trains a small character-level GPT on a 2x2 grid (4 MPI ranks) on the
# GPL-3 text, after checking one step against the fp64 reference. Arguments go to the program
# (e.g. --steps 2000, --q 1 with 1 rank via OPTIMUS_RANKS=1); the SUMMA example is examples/summa_2x2.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

optimus_build --target train_gpt >/dev/null
"${mpirun_cmd[@]}" -np "${OPTIMUS_RANKS:-4}" "$build_dir/apps/train_gpt" "$@"
