#!/usr/bin/env bash
# The save-directory torture test (issue 35): runs of train_gpt fighting over one --save directory — one started while
# another trains there, two started at once, a rollback and its resume, --keep across the branches, a run killed
# (SIGKILL) while it saves — and then the one property that matters: every checkpoint a run reported as saved
# ("saved DIR/step_N (run R; ...)") that is still in place loads, and is that run's (resuming it prints "run R"); one
# set aside is where the run that set it aside said.
#
#   save_dir_torture.sh TRAIN_GPT WORK_DIR
set -uo pipefail
train_gpt="$1"
work="$2"
rm -rf "$work" && mkdir -p "$work"
cd "$work" || exit 1
tiny=(--in-process 1 --q 1 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4 --every 1 --sample 0)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Every "saved PATH (run R; ...)" line of the logs given, as "PATH R".
saved_lines() { sed -n 's/^  saved \([^ ]*\) (run \([0-9a-f]*\);.*/\1 \2/p' "$@"; }

# PATH must load and be run R's: resumed for one more step, it names the run.
check_checkpoint() {
  local path="$1" run="$2" step out
  step="${path##*step_}"
  out="$("$train_gpt" "${tiny[@]}" --resume "$path" --steps $((step + 1)) 2>&1)" ||
    { fail "$path does not load: $out"; return; }
  grep -q "resumed from $path at step $step (run $run;" <<<"$out" || fail "$path is not run $run's: $out"
}

# wait_for_saves LOG N: until LOG reports N saves (at most 30 s).
wait_for_saves() {
  for _ in $(seq 600); do
    (($(saved_lines "$1" | wc -l) >= $2)) && return
    sleep 0.05
  done
}

# 1. A second run while the first trains into the directory: refused at once, naming the holder's process.
"$train_gpt" "${tiny[@]}" --steps 100000 --save held --save-every 1 --keep 2 >held_a.log 2>&1 &
a=$!
wait_for_saves held_a.log 1
"$train_gpt" "${tiny[@]}" --steps 6 --save held --save-every 1 >held_b.log 2>&1 && fail "a second run took held/"
grep -q "train_gpt: error: save directory held is in use by another run (process $a on " held_b.log ||
  fail "the second run's message: $(cat held_b.log)"
kill -KILL $a
wait $a 2>/dev/null
[[ -z "$(saved_lines held_b.log)" ]] || fail "the refused run reported saves: $(saved_lines held_b.log)"
# Its holder gone, the directory still holds another run's checkpoints: a fresh run is refused, naming them.
"$train_gpt" "${tiny[@]}" --steps 2 --save held >again.log 2>&1 && fail "a fresh run took held/ over another's checkpoints"
grep -Eq "holds another run's checkpoints \(step_[0-9]+(, step_[0-9]+)* of run" again.log ||
  fail "the fresh run's message: $(cat again.log)"

# 2. Two runs started at the same moment with one --save: one trains and saves, the other is refused (by the lock, or,
#    had the first finished already, by its checkpoints); never both.
"$train_gpt" "${tiny[@]}" --steps 6 --save race --save-every 1 >race_a.log 2>&1 &
a=$!
"$train_gpt" "${tiny[@]}" --steps 6 --save race --save-every 1 >race_b.log 2>&1 &
b=$!
wait $a; rc_a=$?
wait $b; rc_b=$?
if ((rc_a == 0 && rc_b == 0)) || ((rc_a != 0 && rc_b != 0)); then
  fail "racing runs: exits $rc_a and $rc_b (one must win, one be refused)"
fi
loser=race_b.log
((rc_a != 0)) && loser=race_a.log
grep -Eq "train_gpt: error: save directory race (is in use by another run \(process [0-9]+ on|holds another run's checkpoints)" \
  "$loser" || fail "the refused run's message: $(cat "$loser")"
[[ -z "$(saved_lines "$loser")" ]] || fail "the refused run reported saves: $(saved_lines "$loser")"

# 3. A rollback: run A saves steps 2, 4, 6; resumed at step 2 into the same directory with --keep 2, it sets step_4
#    and step_6 aside, trains its own branch to step 8 and keeps its newest two; --resume DIR then continues that branch.
"$train_gpt" "${tiny[@]}" --steps 6 --save branch --save-every 2 >branch_a.log 2>&1 || fail "run A: $(cat branch_a.log)"
"$train_gpt" "${tiny[@]}" --steps 8 --resume branch/step_2 --save branch --save-every 2 --keep 2 >branch_b.log 2>&1 ||
  fail "the rollback: $(cat branch_b.log)"
grep -q "set aside step_4, step_6 of branch (this run's branch after step 2, which it abandons) in branch/set_aside/1" \
  branch_b.log || fail "the rollback did not say what it set aside: $(cat branch_b.log)"
[[ "$(cd branch && echo step_*)" == "step_6 step_8" ]] || fail "after --keep 2: $(cd branch && echo step_*)"
[[ -d branch/set_aside/1/step_4 && -d branch/set_aside/1/step_6 ]] || fail "the abandoned branch is not in set_aside/1"
"$train_gpt" "${tiny[@]}" --steps 9 --resume branch >branch_c.log 2>&1 || fail "resume: $(cat branch_c.log)"
grep -q "resumed from branch/step_8 at step 8" branch_c.log || fail "--resume branch: $(cat branch_c.log)"
# The abandoned branch's checkpoints still load, as run A saved them.
run_a="$(saved_lines branch_a.log | head -1 | cut -d' ' -f2)"
check_checkpoint branch/set_aside/1/step_4 "$run_a"
check_checkpoint branch/set_aside/1/step_6 "$run_a"

# 4. Killed while it saves: a long run saving every step gets SIGKILL after its second save; the directory's lock dies
#    with it, and resuming the directory continues from a complete checkpoint.
"$train_gpt" "${tiny[@]}" --steps 100000 --save killed --save-every 1 --keep 2 >killed.log 2>&1 &
k=$!
wait_for_saves killed.log 2
kill -KILL $k
wait $k 2>/dev/null
"$train_gpt" "${tiny[@]}" --steps 100000 --resume killed --save killed --save-every 1 --keep 2 >resumed.log 2>&1 &
r=$!
for _ in $(seq 600); do
  grep -q "resumed from killed/step_" resumed.log && (($(saved_lines resumed.log | wc -l) >= 1)) && break
  sleep 0.05
done
kill -KILL $r
wait $r 2>/dev/null
grep -q "resumed from killed/step_" resumed.log || fail "the killed run's directory did not resume: $(cat resumed.log)"

# Every checkpoint any run reported as saved and that is still where it said: loads, and is that run's.
while read -r path run; do
  [[ -d "$path" ]] && check_checkpoint "$path" "$run"
done < <(saved_lines held_a.log race_a.log race_b.log branch_a.log branch_b.log killed.log resumed.log)
checked=$(saved_lines held_a.log race_a.log race_b.log branch_a.log branch_b.log killed.log resumed.log | wc -l)
echo "save_dir_torture: $checked checkpoints reported saved, every one still in place checked; $failures failures"
((failures == 0)) && echo "save_dir_torture: passed"
exit $((failures > 0))
