#!/usr/bin/env python3
"""Aggregates optimus-bench scaling runs (raw/*.json) into scaling.csv, scaling.json and gnuplot plots.

Parallel efficiency: E(p) = T(1) * work(p)/work(1) / (min(p, cores) * T(p)), with T the step time and work
the global batch (strong and iso: equal work; weak: p times the work). `cores` is os.cpu_count(): when p ranks
share fewer cores, the ideal speed-up is the core count, not p — so on a 2-core machine E measures how much of
the two cores the layout keeps busy, and on a cluster (one rank per GPU) it is the usual efficiency.
"""
import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    row = doc["rows"][0]
    return row


def efficiency(t1, tp, p, work_ratio, cores):
    """Speed-up over ideal: work_ratio = work(p) / work(1)."""
    ideal = min(p, cores)
    return (t1 * work_ratio) / (ideal * tp)


def fitted_exponent(points):
    """The least-squares slope of log b on log p, or None with fewer than two distinct p."""
    import math
    if len({p for p, _ in points}) < 2:
        return None
    xs = [math.log(p) for p, _ in points]
    ys = [math.log(b) for _, b in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--efficiency", nargs=2, metavar=("P1_JSON", "PP_JSON"))
    ap.add_argument("--target", type=float, default=0.5)
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    if a.efficiency:
        r1, rp = load(a.efficiency[0]), load(a.efficiency[1])
        e = efficiency(float(r1["step_ms"]), float(rp["step_ms"]), int(rp["p"]), 1.0, cores)
        print(f"   efficiency {e:.3f} (target {a.target})")
        sys.exit(0 if e >= a.target else 1)

    rows = []
    for path in sorted(glob.glob(os.path.join(a.out, "raw", "*.json"))):
        mode = os.path.basename(path).split("-")[0]
        r = load(path)
        r["mode"] = mode
        rows.append(r)
    by_key = {(r["mode"], r["layout"], int(r["p"]), int(r["b"])): r for r in rows}
    for r in rows:
        p, b = int(r["p"]), int(r["b"])
        base_b = b if r["mode"] in ("strong", "iso") else b // p
        base = by_key.get((r["mode"], r["layout"], 1, base_b))
        if base is None:
            r["efficiency"] = ""
            continue
        work_ratio = b / base_b
        r["efficiency"] = round(efficiency(float(base["step_ms"]), float(r["step_ms"]), p, work_ratio, cores), 4)
    # Isoefficiency: the smallest batch per (layout, p) that reached the target, and the exponent x of its growth,
    # b ~ p^x (least squares in log-log over p > 1), beside the alpha-beta model's for this machine (model-here.json).
    iso = {}
    for r in rows:
        if r["mode"] == "iso" and int(r["p"]) > 1 and r["efficiency"] != "" and float(r["efficiency"]) >= a.target:
            key = (r["layout"], int(r["p"]))
            iso[key] = min(iso.get(key, 10**9), int(r["b"]))
    exponents = {}
    for layout in ("1d", "2d"):
        measured = [(p, b) for (l, p), b in iso.items() if l == layout and p > 1]
        exponents[layout] = {"measured": fitted_exponent(measured), "model": None}
    here = os.path.join(a.out, "model-here.json")
    if os.path.exists(here):
        with open(here) as f:
            model_rows = json.load(f)["rows"]
        for layout in ("1d", "2d"):
            column = f"{layout.upper()}_iso_b"
            pts = [(int(r["p"]), float(r[column])) for r in model_rows
                   if int(r["p"]) > 1 and column in r and str(r[column]) != "-"]
            exponents[layout]["model"] = fitted_exponent(pts)
    plot(a.out, rows)
    fields = ["mode", "layout", "p", "q", "b", "s", "h", "heads", "ffn", "layers", "dtype", "step_ms",
              "GFLOP/s/rank", "efficiency", "recv_B/rank", "predicted_B", "equal", "msgs/rank", "act_B/rank",
              "act_pred_B", "param_B/rank", "peak_B/rank", "max_b@budget", "#wrong", "modelled_step_ms"]
    rows.sort(key=lambda r: (r["mode"], r["layout"], int(r["p"]), int(r["b"])))
    with open(os.path.join(a.out, "scaling.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    summary = {"cores": cores, "rows": rows,
               "isoefficiency_target": a.target,
               "isoefficiency_batch": [{"layout": k[0], "p": k[1], "batch": v} for k, v in sorted(iso.items())],
               "isoefficiency_exponent": exponents,
               "all_bytes_equal_prediction": all(r["equal"] == "yes" for r in rows),
               "all_activations_equal_prediction": all(str(r["act_B/rank"]) == str(r["act_pred_B"]) for r in rows)}
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump(summary, f, indent=2)
    mem = {r["layout"]: r for r in rows if r["mode"] == "memory"}
    if "1d" in mem and "2d" in mem:
        measured = float(mem["2d"]["act_B/rank"]) / float(mem["1d"]["act_B/rank"])
        predicted = float(mem["2d"]["act_pred_B"]) / float(mem["1d"]["act_pred_B"])
        summary["activation_ratio_2d_over_1d"] = {"measured": measured, "predicted": predicted}
        with open(os.path.join(a.out, "scaling.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print(f"activation bytes per rank at p=16 (h=1024, s=256): 2D/1D = {measured:.3f} measured, "
              f"{predicted:.3f} predicted")
    print(f"wrote {a.out}/scaling.csv and scaling.json ({len(rows)} rows); bytes equal prediction in every row: "
          f"{summary['all_bytes_equal_prediction']}; activations equal prediction: "
          f"{summary['all_activations_equal_prediction']}")
    for k, v in sorted(iso.items()):
        print(f"isoefficiency (E >= {a.target}): {k[0]} p={k[1]} needs b={v}")
    for layout, x in exponents.items():
        fmt = lambda v: "-" if v is None else f"{v:.2f}"
        print(f"isoefficiency exponent (b ~ p^x, p > 1): {layout} measured {fmt(x['measured'])}, "
              f"alpha-beta model {fmt(x['model'])}")


def plot(out, rows):
    if shutil.which("gnuplot") is None:
        print("gnuplot not found (apt-get install gnuplot-nox): no plots")
        return
    for mode in sorted({r["mode"] for r in rows if len({int(x["p"]) for x in rows if x["mode"] == r["mode"]}) > 1}):
        for column, label, name in (("efficiency", "parallel efficiency", "efficiency"),
                                    ("recv_B/rank", "bytes received per rank per step", "bytes"),
                                    ("act_B/rank", "activation bytes per rank", "memory")):
            series = []
            for layout in ("1d", "2d"):
                pts = [(int(r["p"]), r[column]) for r in rows if r["mode"] == mode and r["layout"] == layout
                       and r[column] != ""]
                path = os.path.join(out, f"{mode}-{name}-{layout}.dat")
                with open(path, "w") as f:
                    for p, v in sorted(pts):
                        f.write(f"{p} {v}\n")
                series.append((path, layout))
            png = os.path.join(out, f"{mode}-{name}.png")
            script = (f"set terminal png size 720,480; set output '{png}'; set logscale x 2; "
                      f"set xlabel 'ranks p'; set ylabel '{label}'; set title '{mode}: {label}, 1D vs 2D'; "
                      f"set key left top; plot " + ", ".join(
                          f"'{path}' using 1:2 with linespoints title '{layout.upper()}'" for path, layout in series))
            subprocess.run(["gnuplot", "-e", script], check=False)
    for name in ("model-cluster", "model-here"):
        path = os.path.join(out, name + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            model = json.load(f)
        dat = os.path.join(out, name + ".dat")
        with open(dat, "w") as f:
            for r in model["rows"]:
                f.write(f"{r['p']} {r['1D_step_ms']} {r['2D_step_ms']}\n")
        png = os.path.join(out, name + ".png")
        script = (f"set terminal png size 900,480; set output '{png}'; set logscale x 2; set xlabel 'ranks p'; "
                  f"set ylabel 'modelled step time (ms)'; set title '{name}: 1D vs 2D' noenhanced; set key left top; "
                  f"plot '{dat}' using 1:2 with linespoints title '1D', '{dat}' using 1:3 with linespoints title '2D'")
        subprocess.run(["gnuplot", "-e", script], check=False)
    # The model's efficiency against p on this machine (with --iso: the E columns), both layouts.
    here = os.path.join(out, "model-here.json")
    if os.path.exists(here):
        with open(here) as f:
            model_rows = json.load(f)["rows"]
        if model_rows and "1D_E" in model_rows[0]:
            dat = os.path.join(out, "model-here-efficiency.dat")
            with open(dat, "w") as f:
                for r in model_rows:
                    f.write(f"{r['p']} {r['1D_E']} {r['2D_E']}\n")
            png = os.path.join(out, "model-here-efficiency.png")
            script = (f"set terminal png size 720,480; set output '{png}'; set logscale x 2; set xlabel 'ranks p'; "
                      f"set ylabel 'parallel efficiency (alpha-beta model)'; set title 'this machine, the strong "
                      f"shape: 1D vs 2D' noenhanced; set key right top; plot '{dat}' using 1:2 with linespoints "
                      f"title '1D', '{dat}' using 1:3 with linespoints title '2D'")
            subprocess.run(["gnuplot", "-e", script], check=False)
    # Measured beside modelled on this machine.
    here = os.path.join(out, "model-here.json")
    if os.path.exists(here):
        with open(here) as f:
            model = {int(r["p"]): r for r in json.load(f)["rows"]}
        for r in rows:
            m = model.get(int(r["p"]))
            if r["mode"] == "strong" and m is not None:
                r["modelled_step_ms"] = m["1D_step_ms" if r["layout"] == "1d" else "2D_step_ms"]
    print(f"plots in {out}/*.png")


if __name__ == "__main__":
    main()
