#!/usr/bin/env python3
"""What 64 to 1024 H100s would do for GPTs of 6.7 to 175 billion parameters, through the planner's models.

For each model and GPU count, optimus-plan (the H100 preset: plan/cluster.hpp, docs/devices.md) plans every layout
that fits 80 GiB per GPU; this writes the best plan with 2D tensor parallelism (q >= 2), the best with 1D (t >= 2) and
the best of all (which may use neither: data and pipeline parallelism only), each with its step time and its model
FLOPs utilisation against the H100 SXM's dense bf16 peak of 989 TFLOP/s, as a markdown table.

    bench/h100_projection.py OPTIMUS_PLAN OUT.md [--gpus 64,256,1024]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# GPT-3's family (Brown et al. 2020, Table 2.1), Megatron-LM's 8.3B (Shoeybi et al. 2019) and Megatron-LM's larger
# models (Narayanan et al. 2021, Table 1): hidden, heads, layers; seq 2048, vocabulary 51200 (Megatron's padded GPT-2
# vocabulary).
MODELS = [("6.7B", 4096, 32, 32), ("8.3B", 3072, 32, 72), ("13B", 5120, 40, 40), ("39B", 8192, 64, 48),
          ("76B", 10240, 80, 60), ("175B", 12288, 96, 96)]
SEQ, VOCAB, BATCH = 2048, 51200, 1536  # GPT-3's batch: 1536 sequences of 2048 tokens (3.1M tokens)
PEAK = 989e12                           # H100 SXM dense bf16 FLOP/s


def model_flops(h, layers):
    """One step's model FLOPs: 3x the forward, attention in full (Narayanan et al.'s formula)."""
    tokens = BATCH * SEQ
    return 72.0 * tokens * layers * h * h * (1 + SEQ / (6.0 * h) + VOCAB / (12.0 * layers * h))


def best(plans, tensor):
    """The fastest plan of `tensor` parallelism ("2D" with q >= 2, "1D" with t >= 2) or of any (None)."""
    for p in plans:  # sorted fastest first
        if tensor is None or (p["tensor"] == tensor and p["tp"] >= (4 if tensor == "2D" else 2)):
            return p
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("out")
    ap.add_argument("--gpus", default="64,256,1024")
    a = ap.parse_args()
    rows = []
    for name, h, heads, layers in MODELS:
        for gpus in [int(g) for g in a.gpus.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "plan.json")
                run = subprocess.run([a.plan, "--gpus", str(gpus), "--hidden", str(h), "--heads", str(heads),
                                      "--layers", str(layers), "--seq", str(SEQ), "--vocab", str(VOCAB), "--batch",
                                      str(BATCH), "--top", "1", "--json", path], capture_output=True, text=True)
                if run.returncode != 0:
                    rows.append((name, gpus, None, None, None, run.stdout.strip().splitlines()[-1:]))
                    continue
                with open(path) as f:
                    plans = json.load(f)["plans"]
            flops = model_flops(h, layers)
            cells = []
            for tensor in ("2D", "1D", None):
                p = best(plans, tensor)
                cells.append(None if p is None else (p["layout"], p["step_seconds"],
                                                     flops / (p["step_seconds"] * gpus * PEAK)))
            rows.append((name, gpus, *cells, None))
            print(f"{name} on {gpus}: " + "; ".join("-" if c is None else f"{c[0]} {c[1]:.2f} s {100 * c[2]:.1f}%"
                                                     for c in cells), file=sys.stderr)
    with open(a.out, "w") as f:
        f.write("# What 64 to 1024 H100s would do (the planner's models)\n\n")
        f.write("Written by `bench/h100_projection.py build/apps/optimus-plan docs/h100_projection.md`: for each "
                "model and GPU count, the fastest plan that fits 80 GiB per GPU with 2D tensor parallelism (q >= 2), "
                "with 1D (t >= 2), and of all layouts (data and pipeline parallelism, recomputation and offload as "
                "the planner chooses them: docs/planner.md), its predicted step time and its model FLOPs utilisation "
                "(MFU: 72 B s L h^2 (1 + s/6h + V/12Lh) FLOPs per step over the step time, the GPUs and the H100 "
                "SXM's dense bf16 peak of 989 TFLOP/s).\n\n")
        f.write("Assumptions — the H100 preset (plan/cluster.hpp, docs/devices.md): nodes of 8 GPUs, NVLink 4 at 450 "
                "GB/s per GPU inside a node, InfiniBand NDR at 50 GB/s per GPU between nodes (a collective group spanning nodes gets the "
                "share of the node's adapters of the ranks the node holds of it: plan::group_link), bf16 GEMMs at 600 "
                "TFLOP/s achieved, element-wise work at 3.35 TB/s, half of 2D's SUMMA traffic hidden behind its GEMMs, "
                "mixed precision (bf16 values, 2-byte activations); GPT-3's shapes (seq 2048, vocabulary 51200) and "
                f"batch ({BATCH} sequences, 3.1M tokens). None of it is measured on such a cluster: it is where the "
                "models, calibrated on one H100 and on CPUs, put each layout.\n\n")
        f.write("| model | GPUs | best 2D (q >= 2) | s/step | MFU | best 1D (t >= 2) | s/step | MFU | best of all | "
                "s/step | MFU |\n|---|---:|---|---:|---:|---|---:|---:|---|---:|---:|\n")
        for name, gpus, two, one, any_, why in rows:
            def cell(c):
                return "nothing fits | - | -" if c is None else f"{c[0]} | {c[1]:.2f} | {100 * c[2]:.1f}%"
            if two is None and one is None and any_ is None:
                f.write(f"| {name} | {gpus} | nothing fits: {' '.join(why)} | | | | | | | | |\n")
                continue
            f.write(f"| {name} | {gpus} | {cell(two)} | {cell(one)} | {cell(any_)} |\n")
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
