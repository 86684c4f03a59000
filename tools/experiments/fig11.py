#!/usr/bin/env python3
"""Fig. 11: single pool, 4 nodes x 192 CPUs, 24 GPUs; mixes of Job A (1 GPU, 80 CPUs) and
Job E (8 GPUs, 40 CPUs) from A-dominant (90% A) to E-dominant (10% A), under
  pooled        composable (KubeComp), GPUs start 6+6+6+6 and move on demand
  6+6+6+6       preconfigured, even
  4+4+8+8       preconfigured, mixed
  8+8+8+0       preconfigured, concentrated on three nodes
100 jobs per run, Poisson(60) s intervals, 300 s jobs, FCFS, 19.5 s per GPU move; mean over
10 seeds. The fixed layouts are our choice (the paper does not list them)."""
import sys

import simlib
from simlib import fmt, mean, plt

SEEDS = range(1, 11)
A_SHARES = [90, 70, 50, 30, 10]
SETTINGS = [
    ("pooled (KubeComp)", ["--mode", "composable", "--layout", "6+6+6+6"]),
    ("6+6+6+6", ["--mode", "preconfigured", "--layout", "6+6+6+6"]),
    ("4+4+8+8", ["--mode", "preconfigured", "--layout", "4+4+8+8"]),
    ("8+8+8+0", ["--mode", "preconfigured", "--layout", "8+8+8+0"]),
]
BASE = ["--jobs", 100, "--lambda", 60, "--node-cpu", 192]


def main():
    print("fig 11: A/E mixes x 4 settings x 10 seeds", file=sys.stderr)
    runs = [(a, s, seed) for a in A_SHARES for s, _ in SETTINGS for seed in SEEDS]
    args = [BASE + ["--workload", f"ae:{a}", "--seed", seed] + dict(SETTINGS)[s] for a, s, seed in runs]
    res = simlib.run_many(args, "fig11")
    agg = {}
    for (a, s, _), r in zip(runs, res):
        x = agg.setdefault((a, s), {"wait": [], "rej": []})
        x["wait"].append(r["wait_s"]["mean"])
        x["rej"].append(r["rejected"])
    names = [s for s, _ in SETTINGS]
    rows = []
    for a in A_SHARES:
        row = [f"{a}% A / {100 - a}% E"]
        for s in names:
            w = fmt(mean(agg[(a, s)]["wait"]))
            rej = mean(agg[(a, s)]["rej"])
            row.append(w + (f" ({rej:.0f} rejected)" if rej > 0 else ""))
        rows.append(row)
    simlib.write_md("fig11", "Fig. 11: average wait (s), Job A / Job E mixes, 4 nodes, 24-GPU pool",
                    __doc__, simlib.md_table(["mix"] + names, rows),
                    "A layout whose nodes hold fewer than 8 GPUs cannot run Job E: those jobs are "
                    "rejected (counted per run) and the wait is over the jobs that ran.")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for s in names:
        # A layout that rejects Job E ran a different (smaller) workload: not comparable, not plotted.
        if any(mean(agg[(a, s)]["rej"]) > 0 for a in A_SHARES):
            ax.plot([], [], label=f"{s}: cannot run Job E (not plotted)", color="none")
            continue
        ax.plot([f"{a}/{100 - a}" for a in A_SHARES], [mean(agg[(a, s)]["wait"]) for a in A_SHARES],
                marker="o", label=s)
    ax.set_xlabel("% Job A / % Job E")
    ax.set_ylabel("avg wait (s)")
    ax.set_yscale("symlog", linthresh=10)
    ax.legend(fontsize=8)
    ax.set_title("Fig. 11: 4 nodes, 24 GPUs", fontsize=10)
    simlib.save_png(fig, "fig11")


if __name__ == "__main__":
    main()
