#!/bin/bash
# A sweep SIGKILLed after some saves resumes (optimus-sweep --resume) and its members' final exports are those of the
# same sweep never interrupted, byte for byte. Resumed once more, its members all finished, each is built from its last
# checkpoint, trains nothing and is exported again, the same bytes (it was refused: "--steps 60 leaves nothing to train");
# with a member added, that one trains beside them.
#   sweep_killed_resume.sh OPTIMUS_SWEEP DIR [sweep options...]
set -u
sweep=$1 dir=$2
shift 2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
base="--layers 2 --hidden 32 --heads 2 --seq 16 --batch 4 --steps 60 --every 20 --sample 0 --save-every 2 --keep 2"
# The sweep file of run $1: two members saving under $dir/$1 and exporting there.
write_sweep() {
  mkdir -p "$dir/$1"
  cat > "$dir/$1.json" <<JSON
{"members": [
  {"name": "a", "options": "$base --lr 3e-3 --seed 1 --save $dir/$1/save_a --export $dir/$1/a.bin"},
  {"name": "b", "options": "$base --lr 1e-3 --seed 2 --save $dir/$1/save_b --export $dir/$1/b.bin"}
]}
JSON
}
write_sweep whole
write_sweep killed
"$sweep" "$dir/whole.json" "$@" > "$dir/whole.log" 2>&1 || { echo "the uninterrupted sweep failed:"; cat "$dir/whole.log"; exit 1; }

"$sweep" "$dir/killed.json" "$@" > "$dir/killed.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do  # up to 30 s for member a's third checkpoint
  [[ -f "$dir/killed/save_a/step_6/metadata.json" ]] && break
  sleep 0.01
done
kill -KILL "$pid" 2> /dev/null
{ wait "$pid"; } 2> /dev/null
status=$?
if ((status != 137)); then
  echo "the sweep was to be killed after its third save but exited with status $status:"; cat "$dir/killed.log"; exit 1
fi
ls "$dir/killed/save_a" "$dir/killed/save_b"
"$sweep" "$dir/killed.json" "$@" --resume > "$dir/resumed.log" 2>&1 || { echo "the resumed sweep failed:"; cat "$dir/resumed.log"; exit 1; }
grep -c "resumed from" "$dir/resumed.log" | grep -qx 2 || { echo "both members should resume:"; cat "$dir/resumed.log"; exit 1; }
for m in a b; do
  cmp "$dir/whole/$m.bin" "$dir/killed/$m.bin" || { echo "member $m's export differs from the uninterrupted sweep's"; exit 1; }
done
echo "killed and resumed: the exports of the uninterrupted sweep"

rm "$dir/killed/a.bin" "$dir/killed/b.bin"
"$sweep" "$dir/killed.json" "$@" --resume > "$dir/finished.log" 2>&1 || { echo "the finished sweep resumed failed:"; cat "$dir/finished.log"; exit 1; }
grep -q "^\[[ab]\] step " "$dir/finished.log" && { echo "a finished member trained again:"; cat "$dir/finished.log"; exit 1; }
for m in a b; do
  cmp "$dir/whole/$m.bin" "$dir/killed/$m.bin" || { echo "finished member $m's export differs"; exit 1; }
  grep -Eq "^ +[0-9]+ +$m +[0-9.]+ +- +60/60\$" "$dir/finished.log" || { echo "no row of finished $m:"; cat "$dir/finished.log"; exit 1; }
done
sed 's|^]}|  ,{"name": "c", "options": "'"${base/--steps 60/--steps 4}"' --seed 3 --save '"$dir"'/killed/save_c"}\n]}|' \
  "$dir/killed.json" > "$dir/added.json"
"$sweep" "$dir/added.json" "$@" --resume > "$dir/added.log" 2>&1 || { echo "the sweep with a member added failed:"; cat "$dir/added.log"; exit 1; }
grep -q "^\[c\] step     4" "$dir/added.log" && ! grep -q "^\[[ab]\] step " "$dir/added.log" ||
  { echo "only the added member should train:"; cat "$dir/added.log"; exit 1; }
echo "resumed again: finished members exported as they were, an added one trained"
