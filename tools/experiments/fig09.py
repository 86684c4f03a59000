#!/usr/bin/env python3
"""Fig. 9: cumulative distribution of used GPUs (time-weighted: share of time with at most k
of the 8 GPUs running jobs), Workloads 1-4 x {pooled, 0+8, 4+4}, same runs as Fig. 8 (2 nodes
x 192 CPUs, 25 jobs, Poisson(60) s, 300 s jobs), averaged over 20 seeds."""
import sys

import simlib
from simlib import fmt, mean, plt

from fig08_10 import BASE, SEEDS, SETTINGS, WORKLOADS


def main():
    print("fig 9: CDF of used GPUs", file=sys.stderr)
    runs = [(w, s, seed) for w in WORKLOADS for s, _ in SETTINGS for seed in SEEDS]
    args = [BASE + ["--workload", w, "--seed", seed] + dict(SETTINGS)[s] for w, s, seed in runs]
    res = simlib.run_many(args, "fig09")
    cdfs = {}
    for (w, s, _), r in zip(runs, res):
        cdfs.setdefault((w, s), []).append(r["used_gpus_cdf"])
    avg = {k: [mean([c[i] for c in v]) for i in range(len(v[0]))] for k, v in cdfs.items()}
    names = [s for s, _ in SETTINGS]
    rows = []
    for w in WORKLOADS:
        for s in names:
            c = avg[(w, s)]
            rows.append([w.upper(), s] + [fmt(x, 2) for x in c])
    header = ["workload", "setting"] + [f"P(used<={k})" for k in range(9)]
    simlib.write_md("fig09", "Fig. 9: CDF of used GPUs (8-GPU testbed shape)", __doc__,
                    simlib.md_table(header, rows))
    fig, axes = plt.subplots(1, 4, figsize=(10, 2.8), sharey=True)
    for ax, w in zip(axes, WORKLOADS):
        for s in names:
            ax.step(range(9), avg[(w, s)], where="post", label=s)
        ax.set_title(w.upper(), fontsize=10)
        ax.set_xlabel("used GPUs")
    axes[0].set_ylabel("CDF (time)")
    axes[0].legend(fontsize=7)
    simlib.save_png(fig, "fig09")


if __name__ == "__main__":
    main()
