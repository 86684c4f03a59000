#!/usr/bin/python3
"""Plots rt_fig2's CSV (every job's response time / period) as one CDF per case and period,
and prints the deadline misses per case (response > period).

usage: rt_fig2_plot.py <rt_fig2.csv> <out.png>
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, out = sys.argv[1], sys.argv[2]
    data = {}
    with open(src) as f:
        for row in csv.DictReader(f):
            data.setdefault((row["case"], int(row["period_us"])), []).append(float(row["normalized"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for (case, period), values in sorted(data.items()):
        values.sort()
        ys = [(i + 1) / len(values) for i in range(len(values))]
        ax.step(values, ys, where="post", linestyle="-" if case == "reservation" else "--",
                label=f"{case}, T = {period // 1000} ms")
        misses = sum(1 for v in values if v > 1.0)
        print(f"{case:12s} T={period:6d} us jobs={len(values):5d} misses={misses:5d} "
              f"max={max(values):.3f} p99={values[int(0.99 * (len(values) - 1))]:.3f}")
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("normalised response time (response / period)")
    ax.set_ylabel("CDF")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Periodic tasks with a CPU hog on the same core")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
