#!/usr/bin/env python3
"""Beyond the paper (issue 17): the paper's BF+LD under FCFS against each new policy and their
combination, same traces. New policies (libcore/alloc registry): queue `easy-backfill` (EASY
backfill, the head gets a reservation counting its GPU moves) and `slack-backfill` (the head's
reservation may slip by up to its own run time, a bound fixed when it became the head; with
`--slack-factor 3`, up to three run times: "slack x3"), and
recomposition `idle-gather` (free GPUs moved in the background toward the waiting head's
reserved node, or, nothing waiting, gathered for the recent arrivals' largest request).

Setups: Workloads 1-4 on the testbed shape of Fig. 8 (2 nodes x 192 CPUs, 8 GPUs; pooled =
composable starting 4+4; 4+4 = preconfigured, shown for reference), 25 jobs, Poisson(60) s, 20
seeds; the Fig. 11 mixes (4 nodes x 192 CPUs, one 24-GPU pool starting 6+6+6+6, 100 jobs, 10
seeds); the Fig. 13 setup (5 nodes x 6 GPUs, 50 jobs equally A-E, 30 seeds); Alibaba v2023
(completed tasks, arrivals x0.01) on the Fig. 12 pools (4 nodes of 96 CPUs, 24 GPUs 4+4+8+8
each), composable, one run per pool count. Node and GPU policies: the defaults (Eq. 1 = BF+LD,
unattached-first); moves 19.5 s per GPU. Per-seed metrics are averaged over the seeds.
"Moves while waiting" = GPU moves paid while a pod waited (every move made for a placement,
and background moves during whose flight a job was queued or waiting for its GPUs)."""
import os
import sys

import simlib
from simlib import fmt, mean, plt

# (label, queue, recomposition, extra flags)
POLICIES = [
    ("BF+LD fcfs", "fcfs", "none", []),
    ("fcfs + idle-gather", "fcfs", "idle-gather", []),
    ("easy-backfill", "easy-backfill", "none", []),
    ("easy-backfill + idle-gather", "easy-backfill", "idle-gather", []),
    ("slack-backfill", "slack-backfill", "none", []),
    ("slack-backfill + idle-gather", "slack-backfill", "idle-gather", []),
    ("slack x3", "slack-backfill", "none", ["--slack-factor", 3]),
    ("slack x3 + idle-gather", "slack-backfill", "idle-gather", ["--slack-factor", 3]),
]
# The combination the summary's "moves" column follows (the best on Workload 4).
COMBO = "slack x3 + idle-gather"
BASELINE = POLICIES[0][0]
WORKLOADS = ["w1", "w2", "w3", "w4"]
TESTBED = ["--jobs", 25, "--lambda", 60, "--node-cpu", 192, "--layout", "4+4"]
A_SHARES = [90, 70, 50, 30, 10]
FIG11 = ["--jobs", 100, "--lambda", 60, "--node-cpu", 192, "--mode", "composable", "--layout", "6+6+6+6"]
LAMBDAS = [30, 60, 120]
FIG13 = ["--workload", "fig13", "--jobs", 50, "--layout", "6+6+6+6+6", "--node-cpu", 192, "--mode", "composable"]
POOLS = [1, 2, 3, 4, 6, 8]
KEYS = ["wait", "p95", "jct", "makespan", "moved", "waiting_moves", "rejected"]


def metrics(r):
    return {"wait": r["wait_s"]["mean"], "p95": r["wait_s"]["p95"], "jct": r["jct_s"]["mean"],
            "makespan": r["makespan_s"], "moved": r["gpus_moved"],
            "waiting_moves": r["gpus_moved_while_waiting"], "rejected": r["rejected"]}


def setups():
    """(group, name, args, seeds): every setup that runs each policy."""
    out = [("testbed", w.upper(), TESTBED + ["--workload", w, "--mode", "composable"], range(1, 21))
           for w in WORKLOADS]
    out += [("fig11", f"Fig. 11 {a}/{100 - a}", FIG11 + ["--workload", f"ae:{a}"], range(1, 11))
            for a in A_SHARES]
    out += [("fig13", f"Fig. 13 λ={lam} s", FIG13 + ["--lambda", lam], range(1, 31)) for lam in LAMBDAS]
    pods = os.path.join(simlib.TRACES, "openb_pod_list_default.csv")
    if not os.path.exists(pods):
        sys.exit(f"Alibaba trace not found at {pods} (set KC_TRACE_DIR)")
    out += [("alibaba", f"Alibaba {p} pool{'s' if p > 1 else ''}",
             ["--alibaba-pods", pods, "--alibaba-completed-only", "--time-scale", 0.01, "--pools", p,
              "--layout", "4+4+8+8", "--node-cpu", 96, "--node-memory-mib", 786432, "--mode", "composable"],
             [1]) for p in POOLS]
    return out


def run_all(items, label):
    """items: (key, args, seeds); returns {key: {metric: mean over seeds}}."""
    runs = [(key, args + ["--seed", s]) for key, args, seeds in items for s in seeds]
    res = simlib.run_many([a for _, a in runs], label)
    agg = {}
    for (key, _), r in zip(runs, res):
        for k, v in metrics(r).items():
            agg.setdefault(key, {}).setdefault(k, []).append(v)
    return {key: {k: mean(v) for k, v in m.items()} for key, m in agg.items()}


def main():
    print("beyond the paper: BF+LD fcfs vs the new policies", file=sys.stderr)
    all_setups = setups()
    items = [((name, pol), args + ["--queue", q, "--recompose", rc] + extra, seeds)
             for _, name, args, seeds in all_setups for pol, q, rc, extra in POLICIES]
    items += [((w.upper(), "4+4 fcfs (rejects Job E)"), TESTBED + ["--workload", w, "--mode", "preconfigured"],
               range(1, 21)) for w in WORKLOADS]
    agg = run_all(items, "runs")

    header = ["setup", "policy", "mean wait (s)", "vs BF+LD", "p95 wait (s)", "mean JCT (s)", "makespan (s)",
              "GPUs moved", "moves while waiting", "vs BF+LD"]
    rows = []
    summary = []  # (setup, best policy, its wait ratio, its waiting-moves ratio, worse-than-BF+LD list)
    for group, name, _, _ in all_setups:
        base = agg[(name, BASELINE)]
        pols = [p for p, _, _, _ in POLICIES] + (["4+4 fcfs (rejects Job E)"] if group == "testbed" else [])
        worse = []
        for pol in pols:
            m = agg[(name, pol)]
            ratio = m["wait"] / base["wait"] if base["wait"] > 0 else 1.0
            mratio = m["waiting_moves"] / base["waiting_moves"] if base["waiting_moves"] > 0 else float("nan")
            flag = " (worse)" if m["wait"] > base["wait"] * 1.0005 + 1e-9 and pol in {p for p, _, _, _ in POLICIES} else ""
            if flag:
                worse.append(pol)
            digits = 2 if group == "fig13" else 1
            rows.append([name, pol, fmt(m["wait"], digits) + flag, fmt(ratio, 3), fmt(m["p95"]), fmt(m["jct"]),
                         fmt(m["makespan"]), fmt(m["moved"], 2), fmt(m["waiting_moves"], 2),
                         "-" if mratio != mratio else fmt(mratio, 3)])
        combo = agg[(name, COMBO)]
        summary.append((name, combo["wait"] / base["wait"] if base["wait"] > 0 else 1.0,
                        combo["waiting_moves"] / base["waiting_moves"] if base["waiting_moves"] > 0 else float("nan"),
                        worse))
    table = simlib.md_table(header, rows)
    w4 = min(agg[("W4", p)]["wait"] for p, _, _, _ in POLICIES[1:])
    best = min(POLICIES[1:], key=lambda p: agg[("W4", p[0])]["wait"])[0]
    fixed = agg[("W4", "4+4 fcfs (rejects Job E)")]["wait"]
    goals = [f"- Workload 4: best new policy ({best}) waits {fmt(w4)} s, the 4+4 layout {fmt(fixed)} s "
             f"(ratio {w4 / fixed:.3f}; goal < 1: {'met' if w4 < fixed else 'missed'})."]
    for name, wr, mr, worse in summary:
        if worse:
            goals.append(f"- {name}: waits longer than BF+LD under {', '.join(worse)}.")
    for _, name, _, _ in all_setups:
        if not name.startswith("Alibaba"):
            continue
        base = agg[(name, BASELINE)]
        ok = [(agg[(name, p)]["waiting_moves"], p) for p, _, _, _ in POLICIES[1:]
              if agg[(name, p)]["wait"] <= base["wait"]]
        if ok and base["waiting_moves"] > 0:
            moves, p = min(ok)
            r = moves / base["waiting_moves"]
            goals.append(f"- {name}: fewest moves while waiting at no higher mean wait: {p}, "
                         f"{moves:.0f} vs {base['waiting_moves']:.0f} (ratio {r:.3f}; goal <= 0.8: "
                         f"{'met' if r <= 0.8 else 'missed'}).")
        else:
            goals.append(f"- {name}: no new policy waits no longer than BF+LD with fewer moves while waiting.")
    # Is the W4 result more than the paper's 20 seeds? The same comparison on three more sets
    # (the slack factor 3 was chosen on 1-40; 41-60 and 61-80 confirm it).
    seed_sets = [(1, 20), (21, 40), (41, 60), (61, 80)]
    ritems = []
    for lo, hi in seed_sets:
        ritems += [((lo, pol), TESTBED + ["--workload", "w4", "--mode", "composable", "--queue", q, "--recompose", rc]
                    + extra, range(lo, hi + 1)) for pol, q, rc, extra in POLICIES]
        ritems.append(((lo, "4+4"), TESTBED + ["--workload", "w4", "--mode", "preconfigured"], range(lo, hi + 1)))
    ragg = run_all(ritems, "w4 seed sets")
    rrows = []
    for lo, hi in seed_sets:
        fixed_w = ragg[(lo, "4+4")]["wait"]
        best_w, best_p = min((ragg[(lo, p)]["wait"], p) for p, _, _, _ in POLICIES[1:])
        rrows.append([f"{lo}-{hi}"] + [fmt(ragg[(lo, p)]["wait"]) for p, _, _, _ in POLICIES] +
                     [fmt(fixed_w), f"{best_w / fixed_w:.3f} ({best_p})"])
        goals.append(f"- Workload 4, seeds {lo}-{hi}: {COMBO} {fmt(ragg[(lo, COMBO)]['wait'])} s vs 4+4 "
                     f"{fmt(fixed_w)} s (ratio {ragg[(lo, COMBO)]['wait'] / fixed_w:.3f}).")
    rheader = ["W4 seeds"] + [p for p, _, _, _ in POLICIES] + ["4+4 fcfs", "best / 4+4"]
    table += "\nWorkload 4 on four seed sets (mean wait, s):\n\n" + simlib.md_table(rheader, rrows)
    simlib.write_md("beyond", "Beyond the paper: BF+LD under FCFS vs backfill and idle-time recomposition",
                    __doc__, table,
                    "\"(worse)\": mean wait above BF+LD's in that setup. 4+4 rejects the Job E of W4 (not in "
                    "its means).\n\nGoals (issue 17):\n\n" + "\n".join(goals))

    names = [name for _, name, _, _ in all_setups]
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    width = 0.8 / (len(POLICIES) - 1)
    for k, (pol, _, _, _) in enumerate(POLICIES[1:]):
        xs = [i + (k - (len(POLICIES) - 2) / 2) * width for i in range(len(names))]
        waits, moves = [], []
        for name in names:
            base = agg[(name, BASELINE)]
            m = agg[(name, pol)]
            waits.append(m["wait"] / base["wait"] if base["wait"] > 0 else 1.0)
            moves.append(m["waiting_moves"] / base["waiting_moves"] if base["waiting_moves"] > 0 else 1.0)
        axes[0].bar(xs, waits, width, label=pol)
        axes[1].bar(xs, moves, width, label=pol)
    for ax, title in ((axes[0], "mean wait / BF+LD fcfs"), (axes[1], "moves while a pod waited / BF+LD fcfs")):
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(title, fontsize=8)
        ax.set_ylim(0, 2.0)
    axes[1].set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    axes[0].legend(fontsize=6, ncol=3)
    axes[0].set_title("Beyond the paper: each new policy vs BF+LD under FCFS (1.0 = BF+LD)", fontsize=9)
    simlib.save_png(fig, "beyond")


if __name__ == "__main__":
    main()
