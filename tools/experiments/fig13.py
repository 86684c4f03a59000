#!/usr/bin/env python3
"""Fig. 13: GPUs reallocated. 5 nodes x 6 GPUs (one 30-GPU pool), 192 CPUs per node, 50 jobs
equally of types A-E, Poisson intervals with mean 30 / 60 / 120 s, 300 s jobs, composable,
FCFS. Node policy {none, best-fit, least-demand, eq1 = BF+LD} x GPU policy {alg1 (the paper's
Algorithm 1), unattached-first (ours), random}; 30 seeds, mean and standard deviation of the
GPUs moved per run. All GPUs start attached (6 per node), so there are no unattached GPUs and
'ours' ranks exactly as Algorithm 1 except for tie-breaking."""
import sys

import simlib
from simlib import fmt, mean, plt, stdev

SEEDS = range(1, 31)
LAMBDAS = [30, 60, 120]
NODE_POLICIES = [("none", "no policy"), ("best-fit", "BF"), ("least-demand", "LD"), ("eq1", "BF+LD")]
GPU_POLICIES = [("alg1", "Alg. 1"), ("unattached-first", "ours"), ("random", "random")]
BASE = ["--workload", "fig13", "--jobs", 50, "--layout", "6+6+6+6+6", "--node-cpu", 192, "--mode", "composable"]


def main():
    print("fig 13: GPUs moved, 3 lambdas x 4 node x 3 GPU policies x 30 seeds", file=sys.stderr)
    runs = [(l, n, g, s) for l in LAMBDAS for n, _ in NODE_POLICIES for g, _ in GPU_POLICIES for s in SEEDS]
    args = [BASE + ["--lambda", l, "--node-policy", n, "--gpu-policy", g, "--seed", s, "--policy-seed", s]
            for l, n, g, s in runs]
    res = simlib.run_many(args, "fig13")
    agg = {}
    for (l, n, g, _), r in zip(runs, res):
        x = agg.setdefault((l, n, g), {"moved": [], "wait": []})
        x["moved"].append(r["gpus_moved"])
        x["wait"].append(r["wait_s"]["mean"])
    rows = []
    for l in LAMBDAS:
        for n, nl in NODE_POLICIES:
            row = [l, nl]
            for g, _ in GPU_POLICIES:
                m = agg[(l, n, g)]["moved"]
                row.append(f"{fmt(mean(m))} ± {fmt(stdev(m))}")
            row.append(fmt(mean(agg[(l, n, "alg1")]["wait"])))
            rows.append(row)
    header = ["lambda (s)", "node policy"] + [f"GPUs moved, {gl}" for _, gl in GPU_POLICIES] + ["avg wait, Alg. 1 (s)"]
    simlib.write_md("fig13", "Fig. 13: GPUs reallocated per run (5 nodes x 6 GPUs, 50 jobs A-E)", __doc__,
                    simlib.md_table(header, rows))
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    w = 0.26
    for ax, l in zip(axes, LAMBDAS):
        for i, (g, gl) in enumerate(GPU_POLICIES):
            ms = [mean(agg[(l, n, g)]["moved"]) for n, _ in NODE_POLICIES]
            sd = [stdev(agg[(l, n, g)]["moved"]) for n, _ in NODE_POLICIES]
            ax.bar([x + (i - 1) * w for x in range(4)], ms, w, yerr=sd, capsize=2, label=gl)
        ax.set_xticks(range(4), [nl for _, nl in NODE_POLICIES], fontsize=8)
        ax.set_title(f"interval mean {l} s", fontsize=10)
    axes[0].set_ylabel("GPUs moved / run")
    axes[0].legend(fontsize=7)
    simlib.save_png(fig, "fig13")


if __name__ == "__main__":
    main()
