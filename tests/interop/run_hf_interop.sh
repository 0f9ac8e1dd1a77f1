#!/usr/bin/env bash
# The GPT-2 interop test: Optimus exports, Python's safetensors reads and checks; Python writes, Optimus imports and
# checks. PYTHON is a python with safetensors and numpy (scripts/test.sh makes one in the build directory); without
# it the test is skipped (exit 77), never silently passed.
set -euo pipefail
program="$1" python="$2" work="$3" here="$(dirname "${BASH_SOURCE[0]}")"
if ! "$python" -c "import safetensors, numpy" 2>/dev/null; then
  echo "run_hf_interop: $python lacks safetensors/numpy (./scripts/test.sh installs them into a venv)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
"$program" export "$work/optimus.safetensors" "$work/optimus.expected"
"$python" "$here/hf_check.py" check-export "$work/optimus.safetensors" "$work/optimus.expected"
"$python" "$here/hf_check.py" write-import "$work/python.safetensors" "$work/python.expected"
"$program" import "$work/python.safetensors" "$work/python.expected"
rm -rf "$work"
