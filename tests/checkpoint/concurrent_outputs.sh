#!/usr/bin/env bash
# Two runs writing one output at once (issue 52): train_gpt --export of two different models to one safetensors path,
# to one Hugging Face Llama directory, and optimus-plan --json of two different requests to one file, each pair started
# together REPS times. Every time, the output must be wholly one run's — its bytes equal that run's output written
# alone — or one run must refuse with one error line while the other succeeds; never a mix, never both failing, and no
# writer's partial file left behind.
#
#   concurrent_outputs.sh TRAIN_GPT OPTIMUS_PLAN WORK_DIR REPS
set -uo pipefail
train_gpt="$(realpath "$1")"
plan="$(realpath "$2")"
work="$3"
reps="$4"
rm -rf "$work" && mkdir -p "$work"
cd "$work" || exit 1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
tiny=(--in-process 1 --q 1 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4 --steps 3 --every 3 --sample 0)
llama=(--arch llama --kv-heads 1)
failures=0
refusals=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# same PATH_A PATH_B: byte for byte (a file, or every file of a directory).
same() { if [[ -d $1 ]]; then diff -rq "$1" "$2" >/dev/null; else cmp -s "$1" "$2"; fi; }

# race NAME TARGET SOLO_A SOLO_B COMMAND_A... -- COMMAND_B...: both at once, then the verdict.
race() {
  local name="$1" target="$2" solo_a="$3" solo_b="$4"
  shift 4
  local a=() b=() refused=0
  while [[ $1 != -- ]]; do a+=("$1"); shift; done
  shift
  b=("$@")
  for ((k = 1; k <= reps; k++)); do
    rm -rf "$target"
    "${a[@]}" >a.out 2>a.err &
    local pa=$!
    "${b[@]}" >b.out 2>b.err &
    local pb=$!
    wait $pa; local ra=$?
    wait $pb; local rb=$?
    local errors_a errors_b
    errors_a=$(grep -c ": error" a.err)
    errors_b=$(grep -c ": error" b.err)
    if ((ra != 0 && rb != 0)); then
      fail "$name #$k: both runs failed: $(cat a.err b.err)"
    elif ((ra != 0)) && ! { ((errors_a == 1)) && same "$target" "$solo_b"; }; then
      fail "$name #$k: the first run failed ($(cat a.err)) and $target is not wholly the second's"
    elif ((rb != 0)) && ! { ((errors_b == 1)) && same "$target" "$solo_a"; }; then
      fail "$name #$k: the second run failed ($(cat b.err)) and $target is not wholly the first's"
    elif ((ra == 0 && rb == 0)) && ! same "$target" "$solo_a" && ! same "$target" "$solo_b"; then
      fail "$name #$k: both runs succeeded and $target is neither's output alone"
    fi
    if ((ra != 0 || rb != 0)); then
      refused=$((refused + 1))
      cat a.err b.err | grep ": error" | head -1 >last_refusal.txt
    fi
    ls -A | grep -q '\.partial$' && fail "$name #$k: a partial file is left: $(ls -A | grep '\.partial$')"
  done
  refusals=$((refusals + refused))
  local last=""
  ((refused > 0)) && last=" (the last: $(cat last_refusal.txt))"
  echo "$name: $reps races, $refused ended in a refusal$last"
}

"$train_gpt" "${tiny[@]}" --seed 1 --export a.safetensors >/dev/null || fail "solo export a"
"$train_gpt" "${tiny[@]}" --seed 2 --export b.safetensors >/dev/null || fail "solo export b"
race safetensors out.safetensors a.safetensors b.safetensors \
  "$train_gpt" "${tiny[@]}" --seed 1 --export out.safetensors -- \
  "$train_gpt" "${tiny[@]}" --seed 2 --export out.safetensors

"$train_gpt" "${tiny[@]}" "${llama[@]}" --seed 1 --export llama_a >/dev/null || fail "solo export llama_a"
"$train_gpt" "${tiny[@]}" "${llama[@]}" --seed 2 --export llama_b >/dev/null || fail "solo export llama_b"
race llama_directory llama_out llama_a llama_b \
  "$train_gpt" "${tiny[@]}" "${llama[@]}" --seed 1 --export llama_out -- \
  "$train_gpt" "${tiny[@]}" "${llama[@]}" --seed 2 --export llama_out

shape=(--device-memory 1GiB --hidden 64 --heads 4 --layers 4 --seq 32)
"$plan" --gpus 8 "${shape[@]}" --json plan_a.json >/dev/null || fail "solo plan a"
"$plan" --gpus 16 "${shape[@]}" --json plan_b.json >/dev/null || fail "solo plan b"
race json plan.json plan_a.json plan_b.json \
  "$plan" --gpus 8 "${shape[@]}" --json plan.json -- "$plan" --gpus 16 "${shape[@]}" --json plan.json

if ((failures == 0)); then
  echo "concurrent_outputs: passed ($refusals of $((3 * reps)) races ended in a refusal)"
else
  echo "concurrent_outputs: $failures failures"
  exit 1
fi
