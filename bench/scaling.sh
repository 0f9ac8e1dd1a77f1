#!/usr/bin/env bash
# Scaling sweep of 1D (Megatron) and 2D (Optimus) transformer blocks: one `optimus-bench scaling` launch per
# configuration, then bench/scaling_report.py writes CSV, JSON and plots (gnuplot, when installed).
#
#   bench/scaling.sh [--out DIR] [--ps "1 4 16"] [--modes "strong weak iso"] [--h 256] [--tiny64 on|off]
#                    [--launcher CMD] [--smoke]
#
# Modes: strong — global problem held (b = 16, s = 64, h = 256 or --h, 16 heads) as p grows;
#        weak   — per-rank work held (b = 4 p);
#        iso    — for each p, the batch is doubled until parallel efficiency reaches E = 0.5 (ISO_TARGET),
#                 and the batch needed is reported, with the exponent of its growth in p, measured and as the
#                 alpha-beta model predicts it for this machine's calibration (docs/isoefficiency.md); a target
#                 above the shape's bound E_max is never reached at any batch (`optimus-bench model --iso` prints
#                 the bound: raise --h);
#        memory — p = 16, h = 1024, 16 heads, s = 256, b = 4 for both layouts: activation bytes per rank;
#        tiny64 — p = 64 at a tiny size (h = 64, 64 heads), to exercise the 8 x 8 grid and the counters.
# --smoke: a tiny shape (h = 32, s = 8, one timed iteration), every step of the sweep and the report, nothing timed
# worth reading (CI runs it on 2 cores).
# On a cluster, pass --launcher "srun -N 8 --ntasks-per-node=8" (the rank count is appended as -n P) or keep
# the default mpirun line; see bench/README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../scripts/common.sh"

out="${OPTIMUS_SCALING_OUT:-$root_dir/scaling-results}"
ps="1 4 16"
modes="strong weak iso"
tiny64=on
launcher=""
smoke=off
hidden=256
while (($#)); do
  case "$1" in
    --out) out="$2"; shift ;;
    --ps) ps="$2"; shift ;;
    --modes) modes="$2"; shift ;;
    --tiny64) tiny64="$2"; shift ;;
    --h) hidden="$2"; shift ;;
    --launcher) launcher="$2"; shift ;;
    --smoke) smoke=on ;;
    *) echo "scaling.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
bench="$build_dir/bench/optimus-bench"
[[ -x "$bench" ]] || optimus_build --target optimus-bench >/dev/null
mkdir -p "$out/raw"
rm -f "$out"/raw/*.json

launch() {  # launch P ARGS...: one run on P ranks
  local p="$1"; shift
  if [[ -n "$launcher" ]]; then
    $launcher -n "$p" "$bench" scaling "$@"
  else
    "${mpirun_cmd[@]}" -np "$p" "$bench" scaling "$@"
  fi
}

run() {  # run MODE LAYOUT P B [extra args]: one configuration into raw/MODE-LAYOUT-pP-bB.json
  local mode="$1" layout="$2" p="$3" b="$4"; shift 4
  local file="$out/raw/$mode-$layout-p$p-b$b.json"
  echo "== $mode $layout p=$p b=$b $*"
  launch "$p" --layout "$layout" --b "$b" --json "$file" "$@" | grep -E '^ +(1d|2d)' || {
    echo "scaling.sh: run failed: $mode $layout p=$p b=$b" >&2; exit 1; }
}

shape=(--s 64 --h "$hidden" --heads 16 --layers 1 --iters 3 --warmup 1)
model_shape=(--h "$hidden" --heads 16 --b 16 --s 64)
if [[ "$smoke" == on ]]; then
  shape=(--s 8 --h 32 --heads 4 --layers 1 --iters 1 --warmup 0)
  model_shape=(--h 32 --heads 4 --b 16 --s 8)
fi
target="${ISO_TARGET:-0.5}"
for mode in $modes; do
  for layout in 1d 2d; do
    for p in $ps; do
      case "$mode" in
        strong) run strong "$layout" "$p" 16 "${shape[@]}" ;;
        weak) run weak "$layout" "$p" $((4 * p)) "${shape[@]}" ;;
        iso)
          [[ "$p" == 1 ]] && continue  # the p = 1 runs are the baseline of every p below
          for b in 4 8 16 32 64; do
            [[ -f "$out/raw/iso-$layout-p1-b$b.json" ]] || run iso "$layout" 1 "$b" "${shape[@]}"
            run iso "$layout" "$p" "$b" "${shape[@]}"
            if python3 "$here/scaling_report.py" --efficiency "$out/raw/iso-$layout-p1-b$b.json" \
                 "$out/raw/iso-$layout-p$p-b$b.json" --target "$target"; then
              break
            fi
          done
          ;;
      esac
    done
  done
done
# Activation memory per rank at p = 16, h = 1024, 16 heads, s = 256, the same global batch for 1D and 2D.
if [[ " $ps " == *" 16 "* ]]; then
  for layout in 1d 2d; do run memory "$layout" 16 4 --s 256 --h 1024 --heads 16 --layers 1 --iters 1 --warmup 0; done
fi
if [[ "$tiny64" == on ]]; then
  for layout in 1d 2d; do run tiny64 "$layout" 64 8 --s 16 --h 64 --heads 64 --ffn 256 --iters 1 --warmup 0; done
fi
# The alpha-beta model: this machine calibrated, and an H100 cluster (NVLink in nodes of 8, InfiniBand NDR).
"${mpirun_cmd[@]}" -np 4 "$bench" calibrate --json "$out/calibration.json" >/dev/null
"$bench" model --json "$out/model-cluster.json" --ps 4,16,64,256
"$bench" model --json "$out/model-here.json" --calibration "$out/calibration.json" "${model_shape[@]}" \
  --elem-bytes 4 --ps 1,4,16,64,256 --iso "$target"
python3 "$here/scaling_report.py" --out "$out" --target "$target"
