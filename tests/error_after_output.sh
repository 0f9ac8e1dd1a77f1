#!/usr/bin/env bash
# error_after_output.sh FIRST ERROR COMMAND...: runs COMMAND with standard output and standard error into one file (as
# `cmd > log 2>&1` does: stdout is then fully buffered) and passes if it fails, and the line matching ERROR comes after
# the line matching FIRST (the program's banner): a program flushes what it printed before it reports an error.
first=$1
error=$2
shift 2
log=$(mktemp)
"$@" >"$log" 2>&1
rc=$?
banner=$(grep -n -m1 -E "$first" "$log" | cut -d: -f1)
failure=$(grep -n -m1 -E "$error" "$log" | cut -d: -f1)
if ((rc != 0)) && [[ -n $banner && -n $failure ]] && ((failure > banner)); then
  echo "error after output: passed (line $banner: banner, line $failure: error)"
else
  echo "error after output: FAILED (exit $rc, banner at line '${banner}', error at line '${failure}'):"
  cat "$log"
fi
rm -f "$log"
