#!/usr/bin/env python3
"""Parallel GPU moves across chassis (issue 29): mean wait under the paper's serial fabric
(one move at a time per pool, --moves-per-pool 1) and the parallel schedule reconfig-mgr follows
(--moves-per-chassis 1 --moves-per-pool 0: one move in flight per chassis, no pool limit), with
the paper's GPU choice (Algorithm 1, alg1), ours (unattached-first, the default) and
chassis-spread (ours, equally ranked GPUs taken from different chassis).

Chassis: the testbed (Workloads 1-4) is one pool of two chassis x 4 GPUs (--gpus-per-chassis 4:
GPUs dealt round-robin over the chassis, so each node of the 4+4 layout holds 2 GPUs of each,
as tools/demo wires the real stack). The Alibaba set-up (Fig. 12's: pools of 4 nodes,
4+4+8+8 = 24 GPUs, arrivals x0.01) uses the same 4-GPU chassis, so 6 chassis per pool; 2-8
pools (one trace: no seeds, so each row is one run). FCFS,
19.5 s per move, 20 seeds for the workloads (as Fig. 8)."""
import os
import sys

import simlib
from simlib import fmt, mean, plt

SEEDS = range(1, 21)
WORKLOADS = ["w1", "w2", "w3", "w4"]
TESTBED = ["--jobs", 25, "--lambda", 60, "--node-cpu", 192, "--layout", "4+4", "--mode", "composable",
           "--gpus-per-chassis", 4]
SCHEDULES = [("serial", ["--moves-per-chassis", 1, "--moves-per-pool", 1]),
             ("parallel", ["--moves-per-chassis", 1, "--moves-per-pool", 0])]
POLICIES = [("alg1", "Alg. 1 (paper)"), ("unattached-first", "ours"), ("chassis-spread", "chassis-spread")]
ALIBABA_POOLS = [2, 4, 6, 8]


def settings():
    out = [(w, f"Workload {w[1]}", [a for a in TESTBED] + ["--workload", w], True) for w in WORKLOADS]
    pods = os.path.join(simlib.TRACES, "openb_pod_list_default.csv")
    if not os.path.exists(pods):
        sys.exit(f"Alibaba trace not found at {pods} (set KC_TRACE_DIR)")
    for p in ALIBABA_POOLS:
        out.append((f"alibaba{p}", f"Alibaba, {p} pools",
                    ["--alibaba-pods", pods, "--alibaba-completed-only", "--time-scale", 0.01, "--pools", p,
                     "--layout", "4+4+8+8", "--node-cpu", 96, "--node-memory-mib", 786432,
                     "--mode", "composable", "--gpus-per-chassis", 4], False))
    return out


def main():
    print("parallel moves: serial vs parallel schedule x GPU choice", file=sys.stderr)
    runs = []
    for name, _, base, seeded in settings():
        for sched, sflags in SCHEDULES:
            for pol, _ in POLICIES:
                for seed in (SEEDS if seeded else [1]):
                    runs.append((name, sched, pol, seed, base + sflags + ["--gpu-policy", pol, "--seed", seed]))
    res = simlib.run_many([r[4] for r in runs], "parallel")
    agg = {}
    for (name, sched, pol, _, _), r in zip(runs, res):
        x = agg.setdefault((name, sched, pol), {"wait": [], "moved": []})
        x["wait"].append(r["wait_s"]["mean"])
        x["moved"].append(r["gpus_moved"])
    rows = []
    for name, label, _, _ in settings():
        row = [label]
        for sched, _ in SCHEDULES:
            for pol, _ in POLICIES:
                row.append(fmt(mean(agg[(name, sched, pol)]["wait"])))
        serial = mean(agg[(name, "serial", "unattached-first")]["wait"])
        parallel = mean(agg[(name, "parallel", "unattached-first")]["wait"])
        row.append(f"{(1 - parallel / serial) * 100:.1f}%" if serial > 0 else "-")
        row.append(fmt(mean(agg[(name, "parallel", "alg1")]["moved"])))
        rows.append(row)
    header = (["setting"] + [f"{s}, {pl}" for s, _ in SCHEDULES for _, pl in POLICIES]
              + ["parallel cut (ours)", "GPUs moved/run"])
    simlib.write_md("parallel_moves", "Parallel GPU moves across chassis: mean wait (s)", __doc__,
                    simlib.md_table(header, rows))
    fig, ax = plt.subplots(figsize=(8, 3.2))
    names = [(n, label) for n, label, _, _ in settings()]
    combos = [(s, p, f"{s}, {pl}") for s, _ in SCHEDULES for p, pl in POLICIES]
    w = 0.8 / len(combos)
    for i, (s, p, label) in enumerate(combos):
        ax.bar([x + (i - len(combos) / 2 + 0.5) * w for x in range(len(names))],
               [mean(agg[(n, s, p)]["wait"]) for n, _ in names], w, label=label)
    ax.set_xticks(range(len(names)), [label for _, label in names], fontsize=8)
    ax.set_ylabel("mean wait (s)")
    ax.set_yscale("log")
    ax.legend(fontsize=6, ncol=2)
    simlib.save_png(fig, "parallel_moves")


if __name__ == "__main__":
    main()
