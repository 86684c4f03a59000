#!/usr/bin/env python3
"""Gangs (issue 27): mean wait of gangs (multi-pod jobs placed all at once) and stranded GPU time
(GPUs allocated to no job while a gang waits), with recomposition (composable, starting 4+4) vs
the fixed 4+4 and 0+8 layouts (preconfigured), FCFS, Eq. 1 = BF+LD, the paper's 19.5 s moves.

Gang-heavy synthetic workloads on the testbed shape (2 nodes x 192 CPUs, 8 GPUs; 25 jobs,
Poisson(60) s, 300 s each, mean of 20 seeds): kubecomp-sim --gang-share S --gang-members M turns
the share S of the jobs into gangs of M pods, each pod with its Table I type's request.

Alibaba: the cluster-trace-gpu-v2023 tasks that completed, arrivals x0.01 as in Fig. 12, on pools
of 2 nodes (96 CPUs, 768 GiB each) and 8 GPUs, 4+4 or 0+8. Its 63 multi-GPU tasks are simulated
two ways: as the trace has them (one pod with g GPUs on one node) and with
--gangs-from-multi-gpu (a gang of g one-GPU pods, CPU and memory split evenly: data-parallel
workers that may sit on different nodes). "multi-GPU wait" is the mean wait of those 63 tasks
(of the ones that ran), either way."""
import csv
import os
import sys
import tempfile

import simlib
from simlib import fmt, plt

SEEDS = range(1, 21)
LAYOUTS = [("composable", "4+4", "recomposition (4+4 start)"), ("preconfigured", "4+4", "fixed 4+4"),
           ("preconfigured", "0+8", "fixed 0+8")]
# (label, mix, gang share, members)
SYNTHETIC = [("A-D, half gangs of 2", "custom:1,1,1,1,0", 0.5, 2),
             ("A+B, all gangs of 4 x 1 GPU", "custom:1,1,0,0,0", 1.0, 4),
             ("B+C, half gangs of 4", "custom:0,1,1,0,0", 0.5, 4)]
SHORT = {"A-D, half gangs of 2": "A-D\n2 x", "A+B, all gangs of 4 x 1 GPU": "A+B\n4 x 1 GPU",
         "B+C, half gangs of 4": "B+C\n4 x"}
ALIBABA_POOLS = [8, 12, 16]
TIME_SCALE = 0.01


def layout_args(mode, layout):
    return ["--mode", mode, "--layout", layout]


def synthetic():
    runs = [(s, l, seed) for s in SYNTHETIC for l in LAYOUTS for seed in SEEDS]
    args = [["--workload", s[1], "--jobs", 25, "--seed", seed, "--gang-share", s[2], "--gang-members", s[3]]
            + layout_args(l[0], l[1]) for s, l, seed in runs]
    res = simlib.run_many(args, "gangs synthetic")
    by = {}
    for (s, l, _), r in zip(runs, res):
        by.setdefault((s[0], l[2]), []).append(r)
    rows = []
    for s in SYNTHETIC:
        for l in LAYOUTS:
            rs = by[(s[0], l[2])]
            g = [r["gangs"] for r in rs]
            rows.append({"setup": s[0], "layout": l[2],
                         "gang_wait": simlib.mean([x["wait_s"]["mean"] for x in g]),
                         "stranded_h": simlib.mean([x["stranded_gpu_s"] / 3600 for x in g]),
                         "wait": simlib.mean([r["wait_s"]["mean"] for r in rs]),
                         "gangs": sum(x["gangs"] for x in g) / len(g),
                         "rejected": sum(x["rejected"] for x in g) / len(g),
                         "moved": simlib.mean([r["gpus_moved"] for r in rs])})
    return rows


def alibaba():
    pods = os.path.join(simlib.TRACES, "openb_pod_list_default.csv")
    if not os.path.exists(pods):
        sys.exit(f"Alibaba trace not found at {pods} (set KC_TRACE_DIR)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(p, gang, l) for p in ALIBABA_POOLS for gang in (True, False) for l in LAYOUTS]
        args = []
        for i, (p, gang, l) in enumerate(runs):
            a = ["--alibaba-pods", pods, "--alibaba-completed-only", "--time-scale", TIME_SCALE, "--pools", p,
                 "--node-cpu", 96, "--node-memory-mib", 786432, "--jobs-out", os.path.join(tmp, f"{i}.csv")]
            args.append(a + (["--gangs-from-multi-gpu"] if gang else []) + layout_args(l[0], l[1]))
        res = simlib.run_many(args, "gangs alibaba")
        for i, ((p, gang, l), r) in enumerate(zip(runs, res)):
            with open(os.path.join(tmp, f"{i}.csv")) as f:
                multi = [row for row in csv.DictReader(f) if int(row["gpus"]) > 1]
            ran = [float(row["wait"]) for row in multi if row["status"] == "done"]
            rows.append({"setup": f"Alibaba, {p} pools", "pools": p,
                         "mapping": "gang of 1-GPU pods" if gang else "one pod", "layout": l[2],
                         "gang_wait": simlib.mean(ran), "multi": len(multi), "multi_rejected": len(multi) - len(ran),
                         "stranded_h": r["gangs"]["stranded_gpu_s"] / 3600 if gang else None,
                         "wait": r["wait_s"]["mean"], "rejected": r["rejected"], "moved": r["gpus_moved"]})
    return rows


def plot(syn, ali):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    w = 0.26
    groups = [SHORT[s[0]] for s in SYNTHETIC] + [f"Alibaba\n{p} pools" for p in ALIBABA_POOLS]
    for i, l in enumerate(LAYOUTS):
        waits = [r["gang_wait"] for r in syn if r["layout"] == l[2]]
        waits += [r["gang_wait"] for r in ali if r["layout"] == l[2] and r["mapping"] != "one pod"]
        stranded = [r["stranded_h"] for r in syn if r["layout"] == l[2]]
        stranded += [r["stranded_h"] for r in ali if r["layout"] == l[2] and r["mapping"] != "one pod"]
        xs = [x + (i - 1) * w for x in range(len(groups))]
        axes[0].bar(xs, waits, w, label=l[2])
        axes[1].bar(xs, stranded, w, label=l[2])
    for ax, title in ((axes[0], "gang mean wait (s)"), (axes[1], "stranded GPU-hours")):
        ax.set_xticks(range(len(groups)), groups, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    simlib.save_png(fig, "gangs")


def main():
    print("gangs: gang-heavy workloads and the Alibaba multi-GPU tasks", file=sys.stderr)
    syn = synthetic()
    ali = alibaba()
    header = ["set-up", "layout", "gang mean wait (s)", "stranded GPU-h", "all jobs mean wait (s)",
              "gangs rejected / run", "GPUs moved / run"]
    table = simlib.md_table(header, [[r["setup"], r["layout"], fmt(r["gang_wait"]), fmt(r["stranded_h"], 2),
                                      fmt(r["wait"]), fmt(r["rejected"], 2), fmt(r["moved"], 1)] for r in syn])
    header2 = ["set-up", "multi-GPU tasks as", "layout", "multi-GPU mean wait (s)", "multi-GPU rejected",
               "stranded GPU-h", "all tasks mean wait (s)", "rejected", "GPUs moved"]
    table2 = simlib.md_table(header2, [[r["setup"], r["mapping"], r["layout"], fmt(r["gang_wait"]),
                                        f"{r['multi_rejected']} of {r['multi']}",
                                        "-" if r["stranded_h"] is None else fmt(r["stranded_h"], 1), fmt(r["wait"]),
                                        r["rejected"], r["moved"]] for r in ali])
    simlib.write_md("gangs", "Gangs: recomposition vs fixed 4+4 and 0+8", __doc__, table + "\n" + table2,
                    "Stranded GPU-h: GPU-hours during which GPUs were allocated to no job while at least one "
                    "gang waited in the queue ('-': no gangs in that run).")
    plot(syn, ali)


if __name__ == "__main__":
    main()
