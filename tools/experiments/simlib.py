"""Shared helpers of the figure scripts: run kubecomp-sim, write Markdown tables and PNGs.

Every figure script imports this module, runs the simulator binary of the release build
(build/release/tools/kubecomp-sim/kubecomp-sim, or $KUBECOMP_SIM), and writes
docs/results/<figure>.md and docs/results/<figure>.png.
"""
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIM = os.environ.get("KUBECOMP_SIM", os.path.join(ROOT, "build", "release", "tools", "kubecomp-sim", "kubecomp-sim"))
OUT = os.path.join(ROOT, "docs", "results")
TRACES = os.environ.get("KC_TRACE_DIR", os.path.join(ROOT, "tools", "experiments", "traces", "alibaba-gpu-v2023"))
WORKERS = int(os.environ.get("KC_EXPERIMENT_JOBS", "2"))


def run(args):
    """Runs kubecomp-sim with the given flags and returns its summary JSON."""
    if not os.access(SIM, os.X_OK):
        sys.exit(f"simulator not found at {SIM}: build the release preset first")
    cmd = [SIM, "--quiet"] + [str(a) for a in args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"kubecomp-sim failed ({' '.join(cmd)}):\n{proc.stderr}")
    return json.loads(proc.stdout)


def run_many(arg_lists, label=""):
    """Runs several simulations (two at a time by default), printing progress on stderr."""
    results = [None] * len(arg_lists)
    done = 0
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {pool.submit(run, a): i for i, a in enumerate(arg_lists)}
        for fut in futures:
            results[futures[fut]] = fut.result()
            done += 1
            if done % max(1, len(arg_lists) // 10) == 0 or done == len(arg_lists):
                print(f"  {label} {done}/{len(arg_lists)} runs", file=sys.stderr, flush=True)
    return results


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def stdev(xs):
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines) + "\n"


def write_md(name, title, intro, table, notes=""):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name + ".md")
    with open(path, "w") as f:
        f.write(f"# {title}\n\n{intro.strip()}\n\n{table}\n")
        if notes:
            f.write(notes.strip() + "\n")
    print(f"wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)


def save_png(fig, name):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    size = os.path.getsize(path)
    print(f"wrote {os.path.relpath(path, ROOT)} ({size // 1024} KB)", file=sys.stderr)
    if size > 200 * 1024:
        sys.exit(f"{path} is larger than 200 KB")


def fmt(x, digits=1):
    return f"{x:.{digits}f}"
