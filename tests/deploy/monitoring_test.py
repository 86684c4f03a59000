#!/usr/bin/env python3
"""The chart's alerts and dashboard (docs/monitoring.md), checked by Prometheus' own tools and
against what the daemons export.

rules mode (labels deploy, real-peer): renders the chart with global.monitoring.prometheusRule
and grafanaDashboard off (no such object) and on (one PrometheusRule, one dashboard ConfigMap
with the sidecar label), lints them, refuses bad thresholds, then runs Debian's promtool:
`promtool check rules` on the rendered rules and `promtool test rules` with
tests/deploy/kubecomp.rules.test.yaml, which must hold a firing and a quiet case for every
alert. Rendered with other thresholds, the same unit tests must fail (the thresholds come from
values). Without promtool the promtool part is skipped (exit 77) after the rest has run.

metrics mode (labels deploy, real-peer, e2e): starts the daemons on the development control plane
(the demo's stack: kube-apiserver-double, chassis-sim, kubelet-standins, disaggpu-devplugins,
reconfig-mgr, kubecomp-sched; plus vni-webhook, bridge-operator, and rt-kubelet-shim over a
stand-in CRI runtime and a scratch cgroup tree), has one pod wait for a GPU move, scrapes every
/metrics and fails if a rule or a dashboard panel names a metric no daemon exports.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chart_test  # noqa: E402  (render, load_docs and the chart's rules)

RULE_TOGGLE = "global.monitoring.prometheusRule.enabled"
DASH_TOGGLE = "global.monitoring.grafanaDashboard.enabled"
SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# --- PromQL metric names ------------------------------------------------------------------------

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                   "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric (and recorded series) names a PromQL expression selects: identifiers that are
    not functions, keywords, label names, strings, numbers or durations."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", e)
    e = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group(0) in PROMQL_KEYWORDS:
            continue  # a function call or an operator keyword
        names.add(m.group(0))
    return names


def self_check_metric_names():
    cases = [
        ('histogram_quantile(0.9, sum by (le, phase) (rate(a_b_bucket{x="y", le=~"1|2"}[5m])))', {"a_b_bucket"}),
        ("k:c / ignoring (cpu) group_left () (c_bound > 0) and on () d offset 5m", {"k:c", "c_bound", "d"}),
        ("time() - min(ts > 0) > 1e3", {"ts"}),
        ('sum without (instance) (x) or vector(0) unless count(y{l="sum(z)"}[1m:10s])', {"x", "y"}),
    ]
    for expr, want in cases:
        got = metric_names(expr)
        if got != want:
            fail(f"metric_names({expr!r}) = {sorted(got)}, want {sorted(want)}")


# --- rendering -----------------------------------------------------------------------------------

def rendered(args, sets, expect_ok=True, extra=()):
    return chart_test.render(args.renderer, args.chart, sets, extra=extra, expect_ok=expect_ok)


def monitoring_docs(docs):
    rules = [d for d in docs if d["kind"] == "PrometheusRule"]
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and "kubecomp.json" in (d.get("data") or {})]
    return rules, dashboards


def rules_and_dashboard(args, sets=None, extra=()):
    sets = dict({RULE_TOGGLE: True, DASH_TOGGLE: True}, **(sets or {}))
    rules, dashboards = monitoring_docs(chart_test.load_docs(rendered(args, sets, extra=extra)))
    if len(rules) != 1 or len(dashboards) != 1:
        fail(f"{sets}: {len(rules)} PrometheusRules and {len(dashboards)} dashboard ConfigMaps, want 1 and 1")
    return rules[0], dashboards[0]


def dashboard_exprs(dashboard_json):
    """Every PromQL of the dashboard: panel targets (rows' nested panels too) and query variables."""
    dash = json.loads(dashboard_json)
    exprs = []
    panels = list(dash.get("panels", []))
    while panels:
        p = panels.pop(0)
        panels += p.get("panels", [])
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        if not targets or not all(t.get("expr") for t in targets):
            fail(f"dashboard panel {p.get('title')!r} has no PromQL target")
        exprs += [t["expr"] for t in targets]
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", q)
            exprs.append(m.group(1) if m else q)
    return dash, exprs


def rule_exprs(rule_doc):
    groups = rule_doc["spec"]["groups"]
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    return groups, recorded, [r["expr"] for g in groups for r in g["rules"]]


# --- rules mode ----------------------------------------------------------------------------------

def check_toggles(args):
    base = chart_test.load_docs(rendered(args, {}))
    rules, dashboards = monitoring_docs(base)
    if rules or dashboards:
        fail("the defaults render monitoring objects; both toggles are off by default")
    for toggle, kind in ((RULE_TOGGLE, "PrometheusRule"), (DASH_TOGGLE, "ConfigMap")):
        docs = chart_test.load_docs(rendered(args, {toggle: True}))
        added = sorted((d["kind"], d["metadata"]["name"]) for d in docs
                       if (d["kind"], d["metadata"]["name"]) not in {(b["kind"], b["metadata"]["name"]) for b in base})
        if len(added) != 1 or added[0][0] != kind:
            fail(f"{toggle}=true adds {added}, want one {kind}")
    print("toggles: off by default; each adds exactly its object")


def check_objects(args, rule, dash_cm):
    if rule["apiVersion"] != "monitoring.coreos.com/v1":
        fail(f"PrometheusRule apiVersion {rule['apiVersion']}")
    if dash_cm["metadata"]["labels"].get("grafana_dashboard") != "1":
        fail(f"dashboard ConfigMap lacks the sidecar label grafana_dashboard: \"1\": {dash_cm['metadata']['labels']}")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump({"global": {"monitoring": {"prometheusRule": {"labels": {"release": "kp"}}}}}, f)
        f.flush()
        r, cm = rules_and_dashboard(args, {"global.monitoring.grafanaDashboard.labelKey": "dashboards",
                                           "global.monitoring.grafanaDashboard.labelValue": "kubecomp",
                                           "global.monitoring.grafanaDashboard.folder": "KubeComp",
                                           "global.monitoring.grafanaDashboard.namespace": "monitoring"},
                                    extra=("-f", f.name))
    if r["metadata"]["labels"].get("release") != "kp":
        fail(f"prometheusRule.labels not followed: {r['metadata']['labels']}")
    labels = cm["metadata"]["labels"]
    if labels.get("dashboards") != "kubecomp" or "grafana_dashboard" in labels:
        fail(f"labelKey/labelValue not followed: {labels}")
    if cm["metadata"].get("annotations", {}).get("grafana_folder") != "KubeComp" or cm["metadata"]["namespace"] != "monitoring":
        fail(f"folder/namespace not followed: {cm['metadata']}")
    with open(os.path.join(args.chart, "dashboards", "kubecomp.json")) as f:
        if dash_cm["data"]["kubecomp.json"].strip() != f.read().strip():
            fail("the ConfigMap's dashboard differs from charts/kubecomp/dashboards/kubecomp.json")
    dash, _ = dashboard_exprs(dash_cm["data"]["kubecomp.json"])
    if not dash.get("uid") or not dash.get("title"):
        fail("the dashboard has no uid or title")
    # The chart's rules on the everything-on rendering with both toggles (flags are deploy_chart_render's).
    sets = dict(dict.fromkeys(chart_test.COMPONENT_TOGGLES + chart_test.OPTION_TOGGLES, True),
                **{RULE_TOGGLE: True, DASH_TOGGLE: True})
    docs = chart_test.load_docs(rendered(args, sets))
    values = chart_test.values_for(args.chart, sets)
    problems = (chart_test.rbac_violations(docs) + chart_test.workload_violations(docs, values)
                + chart_test.toggle_violations(docs, values))
    if problems:
        fail(f"the chart's rules with monitoring on: {problems}")
    print("objects: PrometheusRule, dashboard ConfigMap with the sidecar label (key, value, folder, namespace from values)")


def check_refusals(args):
    for key, value in (("prometheusRule.podWaitMinutes", 0), ("prometheusRule.moveStuckSeconds", -5),
                       ("prometheusRule.vniUsedRatio", 1.5), ("prometheusRule.rtBoundRatio", 0),
                       ("grafanaDashboard.labelKey", '""')):
        path = "global.monitoring." + key
        r = rendered(args, {RULE_TOGGLE: True, DASH_TOGGLE: True, path: value}, expect_ok=False)
        if r.returncode == 0 or key.split(".")[1] not in r.stderr:
            fail(f"{path}={value} was not refused with a message naming it: {r.stderr.strip()}")
    print("refused: non-positive wait and stuck times, ratios outside (0, 1], an empty sidecar label key")


def lint(args, work):
    """yamllint (the chart test's settings) over the two rendered documents as chart-render
    prints them, and the rules file itself."""
    text = rendered(args, {RULE_TOGGLE: True, DASH_TOGGLE: True})
    docs = [d for d in text.split("---\n") if "# Source: kubecomp/templates/monitoring.yaml" in d]
    if len(docs) != 2:
        fail(f"templates/monitoring.yaml rendered {len(docs)} documents, want 2")
    files = []
    for i, d in enumerate(docs):
        files.append(os.path.join(work, f"monitoring-{i}.yaml"))
        with open(files[-1], "w") as f:
            f.write(d)
    files.append(os.path.join(args.chart, "rules", "kubecomp.rules.yaml"))
    r = subprocess.run(["yamllint", "-f", "parsable", "-d", chart_test.YAMLLINT_CONFIG, *files],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("yamllint:\n" + r.stdout + r.stderr)
    print("yamllint clean: the rendered PrometheusRule and ConfigMap, and rules/kubecomp.rules.yaml")


def check_test_coverage(groups, tests_path):
    """Every alert has a case where it fires and one where it stays quiet."""
    with open(tests_path) as f:
        tests = yaml.safe_load(f)
    fired, quiet = set(), set()
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            (fired if a.get("exp_alerts") else quiet).add(a["alertname"])
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    want = {"KubecompGpuQuarantined", "KubecompGpuMoveFailing", "KubecompGpuMoveStuck", "KubecompPoolNoFreeGpu",
            "KubecompPodWaitingForGpus", "KubecompVniRangeNearlyFull", "KubecompBridgeJobUnknown",
            "KubecompRtNodeNearBound", "KubecompDaemonNotReady"}
    if alerts != want:
        fail(f"alerts {sorted(alerts)}, want {sorted(want)}")
    if alerts - fired or alerts - quiet:
        fail(f"alerts without a firing case {sorted(alerts - fired)}, without a quiet case {sorted(alerts - quiet)}")
    print(f"unit tests: every one of the {len(alerts)} alerts has a firing and a quiet case")


def promtool_run(promtool, rule_doc, work, tests_path):
    """check rules + test rules of one rendered PrometheusRule; returns (check, test) results."""
    d = tempfile.mkdtemp(dir=work)
    with open(os.path.join(d, "rendered.rules.yaml"), "w") as f:
        yaml.safe_dump(rule_doc["spec"], f, sort_keys=False)
    shutil.copy(tests_path, os.path.join(d, "kubecomp.rules.test.yaml"))
    check = subprocess.run([promtool, "check", "rules", "rendered.rules.yaml"], cwd=d, capture_output=True, text=True)
    test = subprocess.run([promtool, "test", "rules", "kubecomp.rules.test.yaml"], cwd=d, capture_output=True, text=True)
    return check, test


def run_rules(args):
    work = tempfile.mkdtemp(prefix="kc-monitoring-")
    try:
        check_toggles(args)
        rule, dash_cm = rules_and_dashboard(args)
        check_objects(args, rule, dash_cm)
        check_refusals(args)
        lint(args, work)
        groups, _, _ = rule_exprs(rule)
        check_test_coverage(groups, args.tests)
        promtool = shutil.which("promtool")
        if not promtool:
            print("SKIPPED (promtool): Debian's prometheus package is not installed "
                  "(tools/setup-deps.sh installs it); everything but promtool passed")
            return SKIP
        version = subprocess.run([promtool, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        check, test = promtool_run(promtool, rule, work, args.tests)
        if check.returncode != 0:
            fail("promtool check rules:\n" + check.stdout + check.stderr)
        if test.returncode != 0:
            fail("promtool test rules:\n" + test.stdout + test.stderr)
        print(f"{version}: check rules and test rules pass ({check.stdout.strip().splitlines()[-1].strip()})")
        # The thresholds come from values: rendered with others, the unit tests must fail.
        for key, value, alert in (("podWaitMinutes", 30, "KubecompPodWaitingForGpus"),
                                  ("moveStuckSeconds", 1200, "KubecompGpuMoveStuck"),
                                  ("vniUsedRatio", 0.97, "KubecompVniRangeNearlyFull"),
                                  ("rtBoundRatio", 0.99, "KubecompRtNodeNearBound")):
            other, _ = rules_and_dashboard(args, {f"global.monitoring.prometheusRule.{key}": value})
            _, t = promtool_run(promtool, other, work, args.tests)
            if t.returncode == 0 or alert not in t.stdout + t.stderr:
                fail(f"with {key}={value} the unit tests still pass (or fail elsewhere): {t.stdout[-2000:]}")
        print("thresholds: rendered with other podWaitMinutes, moveStuckSeconds, vniUsedRatio, rtBoundRatio, "
              "the unit tests of that alert fail")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- metrics mode --------------------------------------------------------------------------------

def scrape(port, scheme="http"):
    with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return text, names


def wait_port_file(path, proc, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return int(open(path).read().strip())
        if proc.poll() is not None:
            fail(f"{name} exited with status {proc.returncode}")
        time.sleep(0.02)
    fail(f"{name} wrote no port file within {timeout:.0f} s")


def stand_in_cri(sock):
    """A CRI runtime that answers every call with an empty message (no pods, no containers):
    enough for rt-kubelet-shim to start and serve its metrics. grpcio, in a thread."""
    import grpc
    from concurrent import futures

    class Empty(grpc.GenericRpcHandler):
        def service(self, details):
            return grpc.unary_unary_rpc_method_handler(lambda request, context: b"")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((Empty(),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    return server


def start_rt_shim(sup, bins, d):
    """rt-kubelet-shim on a scratch cgroup v1 tree (the files it reads; RT-capable needs root)."""
    cpu, cpuset = os.path.join(d, "cg", "cpu"), os.path.join(d, "cg", "cpuset")
    os.makedirs(cpu)
    os.makedirs(cpuset)
    for path, text in ((os.path.join(cpu, "cpu.rt_runtime_us"), "950000"), (os.path.join(cpu, "cpu.rt_period_us"), "1000000"),
                       (os.path.join(cpuset, "cpuset.cpus"), "0-1"), (os.path.join(cpuset, "cpuset.mems"), "0")):
        with open(path, "w") as f:
            f.write(text + "\n")
    port_file = os.path.join(d, "rt.port")
    proc = sup.start("rt-kubelet-shim", [bins["rt-kubelet-shim"], "--socket", os.path.join(d, "shim.sock"),
                                         "--runtime-endpoint", os.path.join(d, "cri.sock"), "--no-api",
                                         "--cgroup-cpu-root", cpu, "--cgroup-cpuset-root", cpuset, "--rt-cores", "0-1",
                                         "--runtime-connect-seconds", "10", "--port", "0", "--port-file", port_file])
    return wait_port_file(port_file, proc, "rt-kubelet-shim")


def wait_metric(stack, port, key, want, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = stack.metrics(port).get(key)
        if got == want:
            return
        stack.sup.check_alive()
        if time.monotonic() > deadline:
            fail(f"{what}: {key} is {got}, want {want}")
        time.sleep(0.05)


def drive_one_move(stack):
    """A pod asking 5 GPUs on nodes holding 4 each: kubecomp-sched reserves a node, reconfig-mgr
    moves a GPU, the pod is bound. The wait gauges must show the pod while it waits and clear
    once it is bound; the pool's gauges must then show its 5 GPUs in use, 3 free, no move."""
    core = stack.core
    created = time.time()
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "needs-a-move", "namespace": "default"},
        "spec": {"schedulerName": "kubecomp-sched", "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox:stable", "command": ["sleep", "infinity"],
                                 "resources": {"requests": {"cpu": "1", "kubecomp.io/gpu": "5"},
                                               "limits": {"cpu": "1", "kubecomp.io/gpu": "5"}}}]}})
    deadline = time.monotonic() + 90
    seen_waiting = False
    while True:
        sched = stack.metrics(stack.sched_metrics_port)
        pod = core.read_namespaced_pod("needs-a-move", "default")
        if pod.spec.node_name:
            break
        oldest = sched.get("kubecomp_sched_oldest_pending_gpu_pod_timestamp_seconds", 0)
        if sched.get("kubecomp_sched_pending_gpu_pods") == 1 and created - 5 <= oldest <= time.time() + 1:
            seen_waiting = True
        stack.sup.check_alive()
        if time.monotonic() > deadline:
            fail("the pod needing a GPU move was not bound within 90 s")
        time.sleep(0.05)
    if not seen_waiting:
        fail("kubecomp_sched_pending_gpu_pods / _oldest_pending_gpu_pod_timestamp_seconds never showed the waiting pod")
    wait_metric(stack, stack.sched_metrics_port, "kubecomp_sched_pending_gpu_pods", 0, "after the binding")
    wait_metric(stack, stack.sched_metrics_port, "kubecomp_sched_oldest_pending_gpu_pod_timestamp_seconds", 0,
                "after the binding")
    r = stack.reconfig_metrics_port
    wait_metric(stack, r, 'kubecomp_reconfig_moves_total{result="succeeded"}', 1, "after the move")
    for state, n in (("in_use", 5), ("free", 3), ("moving", 0), ("quarantined", 0), ("unhealthy", 0)):
        wait_metric(stack, r, f'kubecomp_reconfig_pool_gpus{{pool="{demo_pool(stack)}",state="{state}"}}', n,
                    "the pod running on 5 GPUs")
    wait_metric(stack, r, f'kubecomp_reconfig_moves_in_flight{{pool="{demo_pool(stack)}"}}', 0, "after the move")
    return pod.spec.node_name


def demo_pool(stack):
    return sys.modules[type(stack).__module__].POOL


def run_metrics(args):
    self_check_metric_names()
    if os.geteuid() != 0:
        print("SKIPPED (metrics): not root; rt-kubelet-shim exports its per-core metrics only on an "
              "RT-capable cgroup tree, which needs root")
        return SKIP
    rule, dash_cm = rules_and_dashboard(args)
    _, recorded, exprs = rule_exprs(rule)
    _, dash = dashboard_exprs(dash_cm["data"]["kubecomp.json"])
    used = {}
    for source, es in (("rules", exprs), ("dashboard", dash)):
        for e in es:
            for n in metric_names(e):
                used.setdefault(n, set()).add(source)
    bins = dict(b.split("=", 1) for b in args.bin)
    sys.path.insert(0, os.path.join(args.root, "tools", "demo"))
    import stack as demo_stack  # noqa: E402  (the demo's control plane)
    work = tempfile.mkdtemp(prefix="kcm-", dir="/tmp")  # short: unix socket paths live under it
    stack = demo_stack.Stack(bins, args.root, os.path.join(work, "run"), os.path.join(work, "logs"), "pooled",
                             20.0, "h3", reconfigure=True)
    cri = None
    ok = False
    try:
        stack.start()
        sup = stack.sup
        vni_port_file, bridge_port_file = os.path.join(work, "vni.port"), os.path.join(work, "bridge.port")
        vni = sup.start("vni-webhook", [bins["vni-webhook"], "--db", os.path.join(work, "vni.db"), "--port", "0",
                                        "--port-file", vni_port_file, "--durability", "normal"])
        bridge = sup.start("bridge-operator", [bins["bridge-operator"], "--port", "0", "--port-file", bridge_port_file])
        cri = stand_in_cri(os.path.join(work, "cri.sock"))
        rt_port = start_rt_shim(sup, bins, work)
        ports = {"vni-webhook": wait_port_file(vni_port_file, vni, "vni-webhook"),
                 "bridge-operator": wait_port_file(bridge_port_file, bridge, "bridge-operator"),
                 "rt-kubelet-shim": rt_port,
                 "kubecomp-sched": stack.sched_metrics_port, "reconfig-mgr": stack.reconfig_metrics_port}
        for i, (node, _) in enumerate(demo_stack.NODES):
            ports[f"disaggpu-devplugin {node}"] = int(open(os.path.join(work, "run", f"n{i}", "devplugin.port")).read())
        node = drive_one_move(stack)
        print(f"one pod waited for a GPU move and was bound to {node}")
        exported, by_daemon = set(), {}
        for name, port in sorted(ports.items()):
            text, names = scrape(port)
            by_daemon[name] = names
            exported |= names
            if "kubecomp_daemon_ready 1" not in text.splitlines():
                fail(f"{name}: no kubecomp_daemon_ready 1 in its /metrics")
        missing = {n: sorted(s) for n, s in used.items() if n not in exported and n not in recorded}
        if missing:
            fail("named by the rules or the dashboard but exported by no daemon: "
                 + ", ".join(f"{n} ({'/'.join(s)})" for n, s in sorted(missing.items())))
        # The same check must catch a name nobody exports.
        if "kubecomp_reconfig_no_such_metric" in exported or not metric_names("kubecomp_reconfig_no_such_metric > 0") - exported:
            fail("the exported-name check would not catch an unknown metric")
        unused_records = recorded - set(used)
        print(f"{len(used)} names used by {len(exprs)} rule and {len(dash)} dashboard expressions: every metric is "
              f"exported ({len(exported)} names from {len(ports)} daemons), every other name a recording rule"
              + (f"; recorded but unread: {sorted(unused_records)}" if unused_records else ""))
        ok = True
        return 0
    finally:
        if cri is not None:
            cri.stop(0)
        stack.stop()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs kept in {work}/logs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["rules", "metrics"])
    ap.add_argument("--renderer", required=True)
    ap.add_argument("--chart", required=True)
    ap.add_argument("--tests", default=os.path.join(HERE, "kubecomp.rules.test.yaml"))
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--bin", action="append", default=[], help="name=path of a daemon or tool (metrics mode)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: run the finally blocks
    sys.exit(run_rules(args) if args.mode == "rules" else run_metrics(args))


if __name__ == "__main__":
    main()
