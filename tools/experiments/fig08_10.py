#!/usr/bin/env python3
"""Fig. 8 (average wait) and Fig. 10 (average JCT): Workloads 1-4 of Table II on the testbed
shape (2 nodes x 192 CPUs, 8 GPUs) under three GPU settings:
  pooled   composable (KubeComp), GPUs start 4+4 and move on demand
  0+8      preconfigured, every GPU on one node (concentrated)
  4+4      preconfigured, evenly distributed
25 jobs per workload (so Workload 4 has exactly one Job E), Poisson(60) s intervals, 300 s
jobs, FCFS, 19.5 s per GPU move; mean over 20 seeds."""
import sys

import simlib
from simlib import fmt, mean, plt, stdev

SEEDS = range(1, 21)
WORKLOADS = ["w1", "w2", "w3", "w4"]
SETTINGS = [
    ("pooled (KubeComp)", ["--mode", "composable", "--layout", "4+4"]),
    ("0+8", ["--mode", "preconfigured", "--layout", "0+8"]),
    ("4+4", ["--mode", "preconfigured", "--layout", "4+4"]),
]
BASE = ["--jobs", 25, "--lambda", 60, "--node-cpu", 192]


def main():
    print("fig 8/10: workloads 1-4 x 3 settings x 20 seeds", file=sys.stderr)
    runs = [(w, s, seed) for w in WORKLOADS for s, _ in SETTINGS for seed in SEEDS]
    args = [BASE + ["--workload", w, "--seed", seed] + dict(SETTINGS)[s] for w, s, seed in runs]
    res = simlib.run_many(args, "fig08/10")
    agg = {}
    for (w, s, _), r in zip(runs, res):
        a = agg.setdefault((w, s), {"wait": [], "jct": [], "rej": [], "moved": []})
        a["wait"].append(r["wait_s"]["mean"])
        a["jct"].append(r["jct_s"]["mean"])
        a["rej"].append(r["rejected"])
        a["moved"].append(r["gpus_moved"])
    names = [s for s, _ in SETTINGS]
    rows = []
    for w in WORKLOADS:
        row = [w.upper()]
        for s in names:
            a = agg[(w, s)]
            row.append(f"{fmt(mean(a['wait']))} ± {fmt(stdev(a['wait']))}")
        for s in names:
            row.append(fmt(mean(agg[(w, s)]["jct"])))
        worst = max(mean(agg[(w, s)]["wait"]) for s in names[1:])
        pooled = mean(agg[(w, names[0])]["wait"])
        row.append(f"{100 * (1 - pooled / worst):.0f}%" if worst > 0 else "-")
        row.append(" / ".join(fmt(mean(agg[(w, s)]["rej"]), 2) for s in names))
        row.append(fmt(mean(agg[(w, names[0])]["moved"])))
        rows.append(row)
    header = (["workload"] + [f"wait {s} (s)" for s in names] + [f"JCT {s} (s)" for s in names]
              + ["wait cut vs worst fixed", "rejected/run (pooled / 0+8 / 4+4)", "GPUs moved/run (pooled)"])
    simlib.write_md(
        "fig08_10", "Fig. 8 and Fig. 10: average wait and JCT, Workloads 1-4 (2 nodes, 8 GPUs)",
        __doc__, simlib.md_table(header, rows),
        "Wait and JCT are means over completed jobs, then over seeds (± one standard deviation "
        "across seeds). A rejected job (8 GPUs on 4+4) can never run and is not in the means.")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    width = 0.27
    for k, (metric, ax, title) in enumerate([("wait", axes[0], "Fig. 8: avg wait (s)"),
                                             ("jct", axes[1], "Fig. 10: avg JCT (s)")]):
        for i, s in enumerate(names):
            vals = [mean(agg[(w, s)][metric]) for w in WORKLOADS]
            xs = [x + (i - 1) * width for x in range(4)]
            ax.bar(xs, vals, width, label=s)
            for x, w, v in zip(xs, WORKLOADS, vals):
                if mean(agg[(w, s)]["rej"]) > 0:  # mark settings that could not run every job
                    ax.text(x, v, "E\nrej.", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(4), [w.upper() for w in WORKLOADS])
        ax.set_title(title, fontsize=10)
        if k == 0:
            ax.legend(fontsize=8)
    simlib.save_png(fig, "fig08_10")


if __name__ == "__main__":
    main()
