#!/usr/bin/env bash
# Issue 54's first measurement: 8 sweep members (lr 1e-3, 3e-4, 1e-4, 3e-5 x seeds 1, 2; 8 blocks of hidden 128, each
# needing more than 32 MiB of device memory alone: `train_gpt` fails on a 32 MiB simulated device and trains on 36) trained by
# optimus-sweep on 1 and 2 in-process slots and on 4 MPI ranks, on the simulated device (spilled, one member in flight;
# every slot smaller than a member) and on the CPU, under LRTF and round-robin; each member's printed losses and llm.c
# export compared with its plain `train_gpt --q 1` run on the CPU.
#   bench/sweep_members_bitwise.sh [BUILD_DIR] [WORK_DIR]
set -euo pipefail
build=$(realpath "${1:-build}")
work=${2:-sweep-bitwise}
mkdir -p "$work" && cd "$work"
S=$build/apps/optimus-sweep T=$build/apps/train_gpt
base="--layers 8 --hidden 128 --heads 4 --seq 32 --batch 4 --steps 4 --every 2 --sample 0"
lrs=(1e-3 3e-4 1e-4 3e-5)
members=""
for lr in "${lrs[@]}"; do for s in 1 2; do
  n=lr$lr-s$s
  members+="${members:+,}{\"name\": \"$n\", \"options\": \"$base --lr $lr --seed $s --export $PWD/sweep_$n.bin\"}"
  [[ -f solo_$n.bin ]] || "$T" $base --lr "$lr" --seed "$s" --q 1 --in-process 1 --export "solo_$n.bin" \
    | grep "^step" > "solo_$n.txt"
done; done
echo "{\"members\": [$members]}" > sweep.json
# $1: a label; the rest: the sweep's command line. One line: how many members equal their solo runs.
check() {
  local label=$1 same=0; shift
  rm -f sweep_*.bin
  if ! "$@" > "$label.log" 2>&1; then echo "$label: failed: $(grep -m1 'error' "$label.log" | cut -c1-160)"; return; fi
  for lr in "${lrs[@]}"; do for s in 1 2; do
    n=lr$lr-s$s
    grep "^\[$n\] step" "$label.log" | sed 's/^\[[^]]*\] //' | awk '{print $1, $2, $3, $4}' > swept.txt
    awk '{print $1, $2, $3, $4}' "solo_$n.txt" > alone.txt
    if cmp -s "sweep_$n.bin" "solo_$n.bin" && cmp -s swept.txt alone.txt; then same=$((same + 1)); fi
  done; done
  echo "$label: $same of 8 members bitwise (printed losses and export); $(grep 'trained in' "$label.log")"
}
spilled="--device sim --offload spill+activations --in-flight 1"
for sch in lrtf round-robin; do
  check "D=1 in-process, sim 12 MiB, $sch" "$S" sweep.json --in-process 1 $spilled --device-memory 12MiB --scheduler $sch
  check "D=2 in-process, one sim device of 32 MiB, $sch" "$S" sweep.json --in-process 2 $spilled --device-memory 32MiB \
    --scheduler $sch
  check "D=4 MPI, sim 24 MiB each, $sch" mpirun --oversubscribe --allow-run-as-root -np 4 "$S" sweep.json $spilled \
    --device-memory 24MiB --scheduler $sch
  check "D=2 in-process, CPU, $sch" "$S" sweep.json --in-process 2 --scheduler $sch
done
