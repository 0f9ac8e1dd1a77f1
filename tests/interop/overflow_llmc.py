"""Copies an llm.c GPT-2 checkpoint with the embeddings of tokens 0 and 1 set to 3e38, so that the logits they give
(wte is tied to the head) overflow to inf and the loss is NaN: a finite file that a training run cannot train on.

usage: overflow_llmc.py SOURCE.bin DESTINATION.bin HIDDEN
"""
import shutil
import struct
import sys

source, destination, hidden = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.copyfile(source, destination)
with open(destination, "r+b") as f:
    f.seek(256 * 4)  # llm.c's header: 256 int32; the parameters follow, wte [vocab, hidden] first, in f32
    f.write(struct.pack("<%df" % (2 * hidden), *([3e38] * (2 * hidden))))
