#!/usr/bin/env bash
# no_leftovers.sh GLOB COMMAND...: runs COMMAND here and exits with its status, unless a file matching GLOB (a writer's
# partial file, say) is left in this directory: then it prints "leftover: NAME" and exits 0, which fails a test that
# expects the command to fail (expect_failure.cmake).
glob=$1
shift
"$@"
rc=$?
for f in $glob; do
  if [[ -e $f ]]; then
    echo "leftover: $f"
    exit 0
  fi
done
exit $rc
