#!/usr/bin/env python3
"""Fig. 12: multi-pool. Each pool is 4 nodes (96 CPUs, 768 GiB each) and 24 GPUs; 1..8 pools.
Preconfigured 4+4+8+8 per pool vs configurable (composable, starting 4+4+8+8). Wait is
normalised to the preconfigured cluster with one pool.

Trace: the paper used SenseTime Helios (Earth cluster), whose per-job logs are not available
(HeliosData's data.zip content is not published in the repository). We use the Alibaba
cluster-trace-gpu-v2023 pod list instead: tasks that completed (pod_phase Running rows are
censored long-lived services and are skipped; the count is in the table), GPU-sharing tasks
take one whole GPU, arrivals compressed 100x (--time-scale 0.01) so that up to 8 pools are busy."""
import os
import sys

import simlib
from simlib import fmt, plt

POOLS = [1, 2, 3, 4, 6, 8]
TIME_SCALE = 0.01
MODES = [("preconfigured", "preconfigured 4+4+8+8"), ("composable", "configurable")]


def main():
    pods = os.path.join(simlib.TRACES, "openb_pod_list_default.csv")
    if not os.path.exists(pods):
        sys.exit(f"Alibaba trace not found at {pods} (set KC_TRACE_DIR)")
    print("fig 12: multi-pool on the Alibaba trace", file=sys.stderr)
    runs = [(p, m) for p in POOLS for m, _ in MODES]
    args = [["--alibaba-pods", pods, "--alibaba-completed-only", "--time-scale", TIME_SCALE, "--pools", p,
             "--layout", "4+4+8+8", "--node-cpu", 96, "--node-memory-mib", 786432, "--mode", m] for p, m in runs]
    res = simlib.run_many(args, "fig12")
    by = {k: r for k, r in zip(runs, res)}
    base = by[(1, "preconfigured")]["wait_s"]["mean"]
    rows = []
    for p in POOLS:
        pre = by[(p, "preconfigured")]
        con = by[(p, "composable")]
        cut = (1 - con["wait_s"]["mean"] / pre["wait_s"]["mean"]) * 100 if pre["wait_s"]["mean"] > 0 else float("nan")
        rows.append([p, p * 4, p * 24, fmt(pre["wait_s"]["mean"]), fmt(con["wait_s"]["mean"]),
                     fmt(pre["wait_s"]["mean"] / base, 3), fmt(con["wait_s"]["mean"] / base, 3),
                     f"{cut:.0f}%" if cut == cut else "-", con["gpus_moved"], pre["rejected"]])
    t = by[(1, "preconfigured")]["trace"]
    header = ["pools", "nodes", "GPUs", "wait pre (s)", "wait conf (s)", "norm. pre", "norm. conf",
              "conf cut", "GPUs moved", "rejected"]
    simlib.write_md("fig12", "Fig. 12: multi-pool, normalised wait (Alibaba trace, not Helios)", __doc__,
                    simlib.md_table(header, rows),
                    f"Trace rows: {t['rows']}; jobs simulated: {t['jobs']}; skipped: {t['skipped_cpu_only']} "
                    f"CPU-only, {t['skipped_no_start_time']} without scheduled_time (pending at the end), "
                    f"{t['skipped_censored_running']} censored Running; {t['gpu_sharing_as_whole_gpu']} "
                    "GPU-sharing tasks took one whole GPU. 'rejected' = tasks larger than any node "
                    "(CPU, memory or GPUs).")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    w = 0.38
    xs = range(len(POOLS))
    for i, (m, label) in enumerate(MODES):
        ax.bar([x + (i - 0.5) * w for x in xs], [by[(p, m)]["wait_s"]["mean"] / base for p in POOLS], w, label=label)
    ax.set_xticks(list(xs), [str(p) for p in POOLS])
    ax.set_xlabel("GPU pools (24 GPUs, 4 nodes each)")
    ax.set_ylabel("wait / preconfigured 1 pool")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 12: Alibaba v2023 trace (paper: Helios)", fontsize=10)
    simlib.save_png(fig, "fig12")


if __name__ == "__main__":
    main()
