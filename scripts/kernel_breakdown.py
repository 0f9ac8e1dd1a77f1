#!/usr/bin/env python3
"""Where one training step's GPU time goes, by kernel kind, from Nsight Compute's per-launch durations.

    ncu --csv --metrics gpu__time_duration.sum --log-file kernels.csv optimus-bench layer ... --warmup 2 --iters 1
    scripts/kernel_breakdown.py kernels.csv

The bench runs its steps last and they launch the same kernels in the same order, so the step is the longest tail of
launches that repeats itself back to back (the launches before it, the GEMM peak and the GEMMs timed alone, do not).
Each launch is timed alone (Nsight Compute serialises them), so the sum is the step without overlap or launch gaps.
"""
import csv
import re
import sys
from collections import defaultdict

KINDS = [  # (kind, pattern on the kernel's name), first match wins
    ("GEMM (cuBLASLt)", re.compile(r"nvjet|gemm|cutlass|xmma|sm90_")),
    ("attention (fused)", re.compile(r"forward_kernel<|backward_query_kernel|backward_key_kernel")),
    ("casts f32 -> bf16", re.compile(r"to_bf16")),
    ("element-wise and row reductions", re.compile(r".")),
]


def launches(path):
    """[(name, microseconds)] in launch order."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(line for line in f if line.startswith('"'))]
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    at = {name: i for i, name in enumerate(header)}
    scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3, "second": 1e6}
    out = []
    for r in body:
        if r[at["Metric Name"]] != "gpu__time_duration.sum":
            continue
        value = float(r[at["Metric Value"]].replace(",", ""))
        out.append((r[at["Kernel Name"]], value * scale[r[at["Metric Unit"]]]))
    return out


def step_period(names):
    """The longest P with the last P launches' names equal to the P before them."""
    for p in range(len(names) // 2, 0, -1):
        if names[-p:] == names[-2 * p:-p]:
            return p
    return 0


def main():
    if len(sys.argv) != 2:
        print("usage: kernel_breakdown.py KERNELS.csv", file=sys.stderr)
        return 2
    all_launches = launches(sys.argv[1])
    p = step_period([name for name, _ in all_launches])
    if p == 0:
        print(f"kernel_breakdown.py: no repeated step among {len(all_launches)} launches", file=sys.stderr)
        return 1
    step = all_launches[-p:]
    total = sum(us for _, us in step)
    by_kind, by_name = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for name, us in step:
        kind = next(k for k, pattern in KINDS if pattern.search(name))
        short = re.sub(r"\(.*", "", name).replace("void ", "").split("::")[-1][:60]
        for table, key in ((by_kind, kind), (by_name, (kind, short))):
            table[key][0] += 1
            table[key][1] += us
    print(f"# one step: {p} launches, {total / 1e3:.3f} ms of kernels, each timed alone")
    print(f"# {'kind':<34} {'launches':>8} {'ms':>9} {'%step':>6}")
    for kind, _ in KINDS:
        if kind in by_kind:
            n, us = by_kind[kind]
            print(f"  {kind:<34} {n:8d} {us / 1e3:9.3f} {100 * us / total:6.1f}")
    print(f"# {'kernel':<60} {'kind':<18} {'launches':>8} {'ms':>9} {'%step':>6}")
    for (kind, short), (n, us) in sorted(by_name.items(), key=lambda item: -item[1][1]):
        print(f"  {short:<60} {kind[:18]:<18} {n:8d} {us / 1e3:9.3f} {100 * us / total:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
