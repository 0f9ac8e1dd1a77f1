#!/usr/bin/env bash
# The Llama interop test: Python writes a random tiny Llama in Hugging Face's layout; Optimus imports it on a 2x2 grid,
# its logits are checked against a numpy forward written from the published architecture, and its export read back
# in Python. PYTHON is a python with safetensors and numpy (scripts/test.sh makes one in the build directory); without
# it the test is skipped (exit 77), never silently passed.
set -euo pipefail
program="$1" python="$2" work="$3" here="$(dirname "${BASH_SOURCE[0]}")"
if ! "$python" -c "import safetensors, numpy" 2>/dev/null; then
  echo "run_llama_interop: $python lacks safetensors/numpy (./scripts/test.sh installs them into a venv)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
"$python" "$here/llama_check.py" write "$work/llama"
"$program" "$work/llama" "$work/logits.txt" "$work/exported"
"$python" "$here/llama_check.py" check-logits "$work/llama" "$work/logits.txt"
"$python" "$here/llama_check.py" check-export "$work/llama" "$work/exported"
rm -rf "$work"
