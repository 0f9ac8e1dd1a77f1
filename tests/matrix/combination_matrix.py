#!/usr/bin/env python3
"""Every feature against every other (issue 34's combination matrix), through train_gpt as a user runs it.

An all-pairs covering array over the factors below -- every pair of values of any two factors appears in at least one
case (the greedy method of AETG over every valid row, deterministic) -- is printed, then each case trains 3 steps of a
tiny GPT with dropout in-process and is compared with the single-rank CPU run of the same model, global batch and
micro-batches:

* bitwise where the arithmetic is the same -- the 2D model on one rank per stage (q = 1, dp = 1) under any pipeline
  schedule, on the CPU or the simulated device, with any recomputation and offload (each promises the same bits): the
  exported models (GPT-2's safetensors; a Llama's Hugging Face directory, every file) are the same bytes and the
  printed losses the same (BERT: a masked LM on padded sequences, exported as a Hugging Face BERT directory);
* otherwise (q = 2, dp = 2, the 1D baseline: sums in another order) every printed loss within one unit of the fourth
  decimal in f32, 2% with bf16 GEMMs.

A case with `checkpoint` saves after step 2; the next case's layout that can share its global batch resumes it and its
step 3 is compared the same way. Every pair of values is trained (the pairs only a combination Optimus did not do yet
held would be met by cases that must be refused with their one line: refusal() lists none now). Constraints leave out
what means nothing: offload without a device, a schedule or an execution order without a pipeline, interleaving with micro-batches that are not a
multiple of the stages.

    combination_matrix.py TRAIN_GPT WORK_DIR
"""
import itertools
import re
import subprocess
import shutil
import sys
from pathlib import Path

FACTORS = {
    "arch": ["gpt2", "llama", "bert"],
    "family": ["2d", "1d"],
    "pp": [1, 2, 4],
    "tp": [1, 2],  # q (2D) or p (1D)
    "dp": [1, 2],
    "device": ["cpu", "sim"],
    "gemm": ["f32", "bf16"],
    "recompute": ["none", "selective", "full"],
    "micro_batches": [1, 2, 4],
    "schedule": ["1f1b", "gpipe", "interleaved", "wave", "zb"],
    "execution": ["static", "dynamic"],
    "offload": ["none", "optimizer", "spill", "spill+activations"],
    "checkpoint": ["none", "resume"],
}
NAMES = list(FACTORS)


def case_of(row):
    return {name: FACTORS[name][v] for name, v in zip(NAMES, row)}


def valid(c):
    if c["offload"] != "none" and c["device"] != "sim":
        return False  # offload moves state between a device and the host
    if c["pp"] == 1 and c["schedule"] != "1f1b":
        return False  # no pipeline: the schedule means nothing (1f1b stands for none)
    if c["pp"] == 1 and c["execution"] != "static":
        return False  # no pipeline: nothing to order (static stands for none)
    if c["schedule"] == "interleaved" and c["micro_batches"] % c["pp"] != 0:
        return False
    return True


def refusal(c):
    """The one line train_gpt must print for what it does not do yet, or None: every combination trains now."""
    return None


def greedy_cover(rows, uncovered, pairs_of):
    """Rows picked one at a time, each the first of those covering the most pairs still uncovered."""
    chosen = []
    while uncovered:
        best = max(rows, key=lambda r: len(pairs_of(r) & uncovered))
        chosen.append(best)
        uncovered = uncovered - pairs_of(best)
    return chosen


def covering_array():
    """Every pair some runnable row holds is trained by a case; every other pair some valid row holds is met by a
    case that must be refused."""
    pairs_of = lambda r: {(i, r[i], j, r[j]) for i in range(len(r)) for j in range(i + 1, len(r))}
    rows = [r for r in itertools.product(*(range(len(FACTORS[n])) for n in NAMES)) if valid(case_of(r))]
    runnable = [r for r in rows if not refusal(case_of(r))]
    trained = greedy_cover(runnable, set().union(*(pairs_of(r) for r in runnable)), pairs_of)
    covered = set().union(*(pairs_of(r) for r in trained))
    refused = [r for r in rows if refusal(case_of(r))]
    refusals = greedy_cover(refused, set().union(*(pairs_of(r) for r in refused)) - covered, pairs_of)
    return [case_of(r) for r in trained + refusals]


def ranks(c):
    return c["dp"] * c["pp"] * (c["tp"] ** 2 if c["family"] == "2d" else c["tp"])


def layout_args(c, device):
    args = ["--in-process", str(ranks(c)), "--pp", str(c["pp"])]
    args += ["--q", str(c["tp"])] if c["family"] == "2d" else ["--layout", "1d", "--p", str(c["tp"])]
    if c["pp"] > 1:
        args += ["--schedule", c["schedule"], "--execution", c["execution"]]
    if c["device"] == "sim":
        args += ["--device", device]
    return args


MODEL = ["--layers", "8", "--hidden", "16", "--ffn", "32", "--seq", "8", "--dropout", "0.1", "--lr", "1e-2", "--every",
         "1", "--sample", "0"]
# GPT-2's blocks with 2 heads; Llama's with 4 heads of 4 (rotary positions pair a head's columns) and 2 key/value heads
# (grouped-query attention that q, p = 2 split); BERT's with 2 heads, a masked LM (sequences of 8 positions, a sequence
# in ten shorter and padded).
ARCH = {"gpt2": ["--heads", "2"], "llama": ["--arch", "llama", "--heads", "4", "--kv-heads", "2"],
        "bert": ["--arch", "bert", "--heads", "2"]}
SEQUENCES_PER_MICRO_BATCH = 2  # q = 2 divides it


def export_path(c, stem):
    """Where a run exports: GPT-2's safetensors file, or a Llama's or BERT's Hugging Face directory (made anew by the
    export)."""
    if c["arch"] == "gpt2":
        return stem.with_suffix(".safetensors")
    path = stem.with_name(stem.name + "_" + c["arch"])
    shutil.rmtree(path, ignore_errors=True)
    return path


def export_bytes(path):
    """The export's bytes: the file's, or each file of the directory by name."""
    if path.is_dir():
        return {f.name: f.read_bytes() for f in sorted(path.iterdir())}
    return path.read_bytes()


def run(train_gpt, args):
    p = subprocess.run([train_gpt] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def losses(text):
    return [float(x) for x in re.findall(r"^step +\d+ +loss ([0-9.]+)", text, re.M)]


def close(got, want, bf16):
    if len(got) != len(want):
        return False
    return all(abs(g - w) <= (0.02 * abs(w) if bf16 else 1.0001e-4) for g, w in zip(got, want))


def main():
    # combination_matrix.py TRAIN_GPT WORK [DEVICE]: DEVICE (sim, or cuda on a GPU) runs the device cases, the
    # simulated device's by default. A GPU's arithmetic is not the CPU's: its cases are compared as close, not bitwise.
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in ("sim", "cuda")):
        sys.exit("usage: combination_matrix.py TRAIN_GPT WORK [sim|cuda]")
    train_gpt, work = sys.argv[1], Path(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) == 4 else "sim"
    work.mkdir(parents=True, exist_ok=True)
    cases = covering_array()
    print(f"{len(cases)} cases cover every pair of values of any two of {len(NAMES)} factors:")
    print("  #  " + " ".join(f"{n:>13}" for n in NAMES))
    for k, c in enumerate(cases):
        print(f"{k:3d}  " + " ".join(f"{str(c[n]):>13}" for n in NAMES))
    references = {}
    failures = []

    def reference(c):
        """The single-rank CPU run of the case's model, global batch and micro-batches: losses, export."""
        key = (c["arch"], c["gemm"], c["dp"] * c["micro_batches"])
        if key not in references:
            m = key[2]
            out = export_path(c, work / f"reference_{c['arch']}_{c['gemm']}_{m}")
            rc, text = run(train_gpt, MODEL + ARCH[c["arch"]] + ["--in-process", "1", "--q", "1", "--gemm", c["gemm"],
                                                                  "--steps", "3", "--batch",
                                                                  str(m * SEQUENCES_PER_MICRO_BATCH), "--micro-batches",
                                                                  str(m), "--export", str(out)])
            if rc != 0:
                sys.exit(f"the reference run failed:\n{text}")
            references[key] = (losses(text), out)
        return references[key]

    def train_args(c):
        batch = c["micro_batches"] * SEQUENCES_PER_MICRO_BATCH
        args = MODEL + ARCH[c["arch"]] + layout_args(c, device) + ["--gemm", c["gemm"], "--recompute", c["recompute"], "--batch", str(batch),
                                         "--micro-batches", str(c["micro_batches"])]
        return args + (["--offload", c["offload"]] if c["offload"] != "none" else [])

    def bitwise(c):
        same_math = c["device"] == "cpu" or device == "sim"
        return same_math and c["family"] == "2d" and c["tp"] == 1 and c["dp"] == 1
    for k, c in enumerate(cases):
        name = f"case {k}"
        out = export_path(c, work / f"case_{k}")
        save = work / f"case_{k}_saves"
        args = train_args(c) + ["--steps", "3", "--export", str(out)]
        if c["checkpoint"] == "resume":
            shutil.rmtree(save, ignore_errors=True)  # a save directory holds one run's checkpoints: this run's
            args += ["--save", str(save), "--save-every", "2"]
        rc, text = run(train_gpt, args)
        expected_refusal = refusal(c)
        if expected_refusal:
            lines = [l for l in text.splitlines() if l.startswith("train_gpt: error:")]
            if rc == 0 or len(lines) != 1 or expected_refusal not in lines[0]:
                failures.append(f"{name}: expected the refusal '{expected_refusal}', got exit {rc}:\n{text}")
            else:
                print(f"{name}: refused as expected: {lines[0]}")
            continue
        if rc != 0:
            failures.append(f"{name} failed (exit {rc}): train_gpt {' '.join(args)}\n{text}")
            continue
        want, ref_file = reference(c)
        got = losses(text)
        if bitwise(c):
            same = got == want and export_bytes(out) == export_bytes(ref_file)
            verdict = "bitwise" if same else "NOT bitwise"
            if not same:
                failures.append(f"{name}: losses {got} vs {want}, exports {'equal' if same else 'differ'}")
        else:
            ok = close(got, want, c["gemm"] == "bf16")
            verdict = "close" if ok else "NOT close"
            if not ok:
                failures.append(f"{name}: losses {got} vs the reference's {want}")
        print(f"{name}: {verdict} ({' '.join(str(x) for x in got)})")
        if c["checkpoint"] == "resume":
            # The next case that trains resumes step 3 on its layout from step 2 (its micro-batches of two sequences
            # sharing the global batch), in this case's GEMM math.
            micro = c["dp"] * c["micro_batches"]  # the global batch's micro-batches of two sequences
            j = next(j for j in list(range(k + 1, len(cases))) + list(range(k + 1))
                     if not refusal(cases[j]) and micro % cases[j]["dp"] == 0)
            other = dict(cases[j], arch=c["arch"])  # the checkpoint's blocks
            m = micro // other["dp"]
            if other["schedule"] == "interleaved" and m % other["pp"] != 0:
                other["schedule"] = "1f1b"
            resume_args = MODEL + ARCH[c["arch"]] + layout_args(other, device) + ["--gemm", c["gemm"], "--micro-batches", str(m), "--resume",
                                                        str(save / "step_2")]
            if other["offload"] != "none":
                resume_args += ["--offload", other["offload"]]
            rc, text = run(train_gpt, resume_args)
            resumed = losses(text)
            exact = bitwise(c) and bitwise(other)
            ok = rc == 0 and (resumed == want[2:] if exact else close(resumed, want[2:], c["gemm"] == "bf16"))
            print(f"{name}: resumed on case {j}'s layout: {'bitwise' if exact and ok else 'close' if ok else 'WRONG'} "
                  f"({' '.join(str(x) for x in resumed)})")
            if not ok:
                failures.append(f"{name}: resumed as train_gpt {' '.join(resume_args)} (exit {rc}) gave {resumed}, "
                                f"not {want[2:]}:\n{text}")
    if failures:
        print(f"\n{len(failures)} failures:")
        for f in failures:
            print(f)
        sys.exit(1)
    print(f"\nall {len(cases)} cases as expected")


if __name__ == "__main__":
    main()
