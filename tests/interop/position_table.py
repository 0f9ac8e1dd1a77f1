"""A learned position table trained at a shorter length: the export keeps every row of the model it started from.

    position_table.py BEFORE AFTER SEQ

BEFORE and AFTER are llm.c GPT-2 checkpoints (.bin) or Hugging Face BERT directories. Passes when AFTER's table has
BEFORE's rows, its first SEQ rows trained (changed by more than weight decay alone moves a value) and the rest
untouched but for weight decay (each within 1% of BEFORE's: AdamW without a gradient only decays them).
"""
import json
import os
import sys

import numpy as np


def llmc_table(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    max_seq, vocab, layers, heads, channels, padded = (int(v) for v in header[2:8])
    del vocab, layers, heads
    data = np.fromfile(path, dtype=np.float32, offset=1024, count=padded * channels + max_seq * channels)
    return data[padded * channels:].reshape(max_seq, channels)


def bert_table(directory):
    from safetensors.numpy import load_file
    name = "bert.embeddings.position_embeddings.weight"
    index = os.path.join(directory, "model.safetensors.index.json")
    shard = json.load(open(index))["weight_map"][name] if os.path.exists(index) else "model.safetensors"
    return load_file(os.path.join(directory, shard))[name]


def table(path):
    return bert_table(path) if os.path.isdir(path) else llmc_table(path)


def main():
    before, after, seq = table(sys.argv[1]), table(sys.argv[2]), int(sys.argv[3])
    if before.shape != after.shape:
        sys.exit(f"position table: {after.shape} after, {before.shape} before: the table was not kept whole")
    trained = np.abs(after[:seq] - before[:seq]).max()
    scale = np.maximum(np.abs(before[seq:]), 1e-6)
    decayed = (np.abs(after[seq:] - before[seq:]) / scale).max()
    print(f"position table: {after.shape[0]} rows kept; rows < {seq} moved by up to {trained:.3g}, "
          f"rows >= {seq} by up to {decayed:.3g} of their values")
    if not trained > 1e-4:
        sys.exit("the trained rows did not change")
    if not decayed < 1e-2:
        sys.exit("the rows past the sequences changed by more than weight decay")
    print("position table kept whole")


main()
