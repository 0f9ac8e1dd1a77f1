#!/usr/bin/env bash
# The BERT interop test: Python writes a random tiny BertForMaskedLM in Hugging Face's layout and a fixed batch with
# padding; Optimus imports it on a 2x2 grid and its masked-LM loss on the batch is checked against a numpy forward
# written from the published architecture; its export is read back in Python. PYTHON is a python with safetensors
# and numpy (scripts/test.sh makes one in the build directory); without it the test is skipped (exit 77), never
# silently passed.
set -euo pipefail
program="$1" python="$2" work="$3" here="$(dirname "${BASH_SOURCE[0]}")"
if ! "$python" -c "import safetensors, numpy" 2>/dev/null; then
  echo "run_bert_interop: $python lacks safetensors/numpy (./scripts/test.sh installs them into a venv)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
"$python" "$here/bert_check.py" write "$work/bert" "$work/batch.txt"
"$program" "$work/bert" "$work/batch.txt" "$work/loss.txt" "$work/exported"
"$python" "$here/bert_check.py" check-loss "$work/bert" "$work/batch.txt" "$work/loss.txt"
"$python" "$here/bert_check.py" check-export "$work/bert" "$work/exported"
# What Optimus's BERT cannot be is refused in one line naming the field.
refused() {  # KEY VALUE: the variant's import fails naming KEY
  "$python" "$here/bert_check.py" variant "$work/bert" "$work/$1" "$1" "$2"
  if "$program" "$work/$1" "$work/batch.txt" "$work/loss_$1.txt" "$work/exported_$1" >"$work/$1.log" 2>&1; then
    echo "run_bert_interop: a BERT with $1 = $2 was imported, not refused" && exit 1
  fi
  grep -q "^bert_interop: error: .*$1 = " "$work/$1.log" || { cat "$work/$1.log"; exit 1; }
  echo "run_bert_interop: $1 = $2 refused: $(head -1 "$work/$1.log")"
}
refused hidden_act '"gelu_new"'
refused position_embedding_type '"relative_key"'
refused model_type '"llama"'
rm -rf "$work"
