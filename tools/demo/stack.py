"""The development control plane of one demo run, every part a separate process:
kube-apiserver-double, chassis-sim (2 chassis x 4 GPUs, one pool), two kubelet-standins
(192 CPUs each), two disaggpu-devplugins, reconfig-mgr and kubecomp-sched.

Path "device-plugin": the pool's GPUs are kubelet's extended resource kubecomp.io/gpu and the
node agents trust the pool's word (the simulated nodes have no GPUs). Path "dra": the pool
publishes ResourceSlices (driver gpu.kubecomp.io), the node agents are kubelet DRA plugins
judging each GPU by a host view that chassis-sim writes as real hosts show their GPUs
(hot-add after an attach), and every job is a pod with a ResourceClaim."""
import json
import os
import re
import time
import urllib.request

import yaml
from kubernetes import client, config

from procs import StartError, Supervisor

NODES = [("css-host-128", 48), ("css-host-129", 0)]  # the paper's hosts and their chassis ports
GPU_MODEL = "Tesla V100-PCIE-32GB"
POOL = "testbed"
REDFISH_USER, REDFISH_PASSWORD = "kubecomp", "demo-only-password"

# Initial attachment per setting: GPUs per node, in NODES order (the simulator's --layout).
# What one GPU move costs on the simulated chassis with its default (measured H3) latencies:
# unassign 5-8 s, assign 8-16 s and one inventory read 3-4 s to verify, uniform: means
# 6.5 + 12 + 3.5 s. The simulator cross-check charges this per move.
MEAN_MOVE_S = 6.5 + 12.0 + 3.5

LAYOUTS = {"pooled": (4, 4), "concentrated": (0, 8), "even": (4, 4)}


def topology(setting):
    """The chassis-sim topology of a setting: 2 chassis x 4 GPUs, node i holding LAYOUTS[i]
    GPUs, spread over both chassis as evenly as possible."""
    per_node = LAYOUTS[setting]
    slots = []  # host port per GPU, chassis-major: falcon-0 gets the first four
    owners = [port for (_, port), n in zip(NODES, per_node) for _ in range(n)]
    # Deal the owners round-robin over the chassis so a 4+4 layout is 2+2 on each chassis.
    chassis = [[], []]
    for i, port in enumerate(owners):
        chassis[i % 2].append(port)
    for c in chassis:
        c += [None] * (4 - len(c))
    slots = chassis
    doc = {"chassis": []}
    for c in range(2):
        gpus = []
        for g in range(4):
            gpu = {"gid": f"00{c}{g}00", "model": GPU_MODEL,
                   "uuid": f"GPU-00000000-0000-4000-8000-0000000{c}{g:04d}"}
            if slots[c][g] is not None:
                gpu["host"] = slots[c][g]
            gpus.append(gpu)
        doc["chassis"].append({"name": f"falcon-{c}",
                               "hosts": [{"port": p, "system": n} for n, p in NODES],
                               "gpus": gpus})
    return doc


class Stack:
    def __init__(self, bins, root, run_dir, log_dir, setting, time_scale, dialect, reconfigure, sched_flags=(),
                 reconfig_flags=(), path="device-plugin"):
        self.bins = bins
        self.root = root
        self.dir = run_dir
        self.setting = setting
        self.scale = time_scale
        self.dialect = dialect
        self.reconfigure = reconfigure
        self.sched_flags = list(sched_flags)  # e.g. --queue-policy (kubecomp-demo)
        self.reconfig_flags = list(reconfig_flags)  # more reconfig-mgr flags (--recompose-policy)
        self.path = path  # "device-plugin" or "dra"
        self.hosts = os.path.join(run_dir, "hosts")  # chassis-sim's host trees (dra)
        self.sup = Supervisor(log_dir)
        self.chassis_url = None
        self.kubeconfig = os.path.join(run_dir, "kubeconfig")
        self.api = None
        self.reconfig_metrics_port = None

    # -- start -----------------------------------------------------------------------------
    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        self._start_api()
        self._start_chassis()
        self._create_pool()
        self._start_reconfig()
        for name, _ in NODES:
            self._start_node(name)
        self._start_sched()
        self._wait_ready()

    def _start_api(self):
        self.sup.start("kube-apiserver-double",
                       [self.bins["kube-apiserver-double"], "--port", "0", "--kubeconfig-out",
                        self.kubeconfig, "--history-window", "100000"])
        self.sup.wait_for_file(self.kubeconfig, "kube-apiserver-double")
        api_client = config.new_client_from_config(config_file=self.kubeconfig)
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        crd_path = os.path.join(self.root, "charts", "kubecomp", "crds", "gpupools.kubecomp.io.yaml")
        with open(crd_path) as f:
            crd = yaml.safe_load(f)
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
        if self.path == "dra":  # what the chart installs (charts/kubecomp/templates/dra-deviceclass.yaml)
            self.custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", {
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.kubecomp.io"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.kubecomp.io"'}}],
                         "extendedResourceName": "kubecomp.io/gpu"}})
        deadline = time.monotonic() + 10
        while True:  # served once the double has registered the resource
            try:
                self.custom.list_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools")
                break
            except client.ApiException:
                if time.monotonic() > deadline:
                    raise StartError("the GPUPool resource was not served within 10 s")
                time.sleep(0.05)

    def _start_chassis(self):
        topo = os.path.join(self.dir, "topology.yaml")
        with open(topo, "w") as f:
            yaml.safe_dump(topology(self.setting), f, sort_keys=False)
        dialect = "h3" if self.dialect == "h3" else "redfish"
        argv = [self.bins["chassis-sim"], "--topology", topo, "--port", "0",
                "--dialect", dialect, "--latency-scale", repr(1.0 / self.scale)]
        if self.dialect == "redfish":  # Redfish services require a login: a session from a Secret
            argv += ["--basic-auth", f"{REDFISH_USER}:{REDFISH_PASSWORD}"]
        if self.path == "dra":  # each host's sysfs/procfs under hosts/<node> (hot-add 300 ms, scaled)
            argv += ["--host-root", self.hosts]
        self.sup.start("chassis-sim", argv)
        line = self.sup.wait_for_log("chassis-sim", "chassis-sim listening on")
        m = re.search(r"listening on (\S+)", line)
        self.chassis_url = m.group(1).rstrip("/")

    def _create_pool(self):
        chassis = [{"name": f"falcon-{c}", "driver": self.dialect,
                    "endpoint": f"{self.chassis_url}/chassis/falcon-{c}", "gpuModel": GPU_MODEL}
                   for c in range(2)]
        if self.dialect == "h3":
            for c in chassis:
                c["gep"] = "0"
        else:
            self.core.create_namespaced_secret("kube-system", {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "chassis-login"},
                "stringData": {"username": REDFISH_USER, "password": REDFISH_PASSWORD}})
            for c in chassis:
                c["auth"] = "session"
                c["credentialsSecret"] = {"name": "chassis-login", "namespace": "kube-system"}
        nodes = [{"name": n, "hostPort": str(p) if self.dialect == "h3" else n} for n, p in NODES]
        body = {"apiVersion": "kubecomp.io/v1alpha1", "kind": "GPUPool", "metadata": {"name": POOL},
                "spec": {"chassis": chassis, "nodes": nodes,
                         "pollIntervalSeconds": 1}}
        if self.path == "dra":
            body["spec"]["allocationPath"] = "DRA"
        self.custom.create_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools", body)

    def _start_node(self, name):
        d = os.path.join(self.dir, "n" + str([n for n, _ in NODES].index(name)))
        dp_dir = os.path.join(d, "dp")
        os.makedirs(dp_dir, exist_ok=True)
        pr_sock = os.path.join(d, "pr.sock")
        longest = os.path.join(dp_dir, "kubelet.sock")
        if len(longest.encode()) > 100:
            raise StartError(f"socket path {longest} is too long for a unix socket (107 bytes); "
                             "set TMPDIR to a shorter directory")
        self.sup.start(f"kubelet-standin-{name}", [
            self.bins["kubelet-standin"], "--node-name", name, "--kubeconfig", self.kubeconfig,
            "--device-plugin-dir", dp_dir, "--pod-resources-socket", pr_sock, "--root-dir", d,
            "--cpu", "192", "--memory", "1Ti", "--time-scale", repr(self.scale),
            "--status-sync-period", "50ms", "--healthz-port", "0",
            "--port-file", os.path.join(d, "standin.port"),
            # a failed NodePrepareResources is retried soon (kubelet: its pod worker's next sync)
            "--dra-retry-period", "100ms"])
        self.sup.wait_for_file(os.path.join(d, "standin.port"), f"kubelet-standin-{name}")
        argv = [self.bins["disaggpu-devplugin"], "--node-name", name, "--kubeconfig", self.kubeconfig,
                "--port", "0", "--port-file", os.path.join(d, "devplugin.port")]
        if self.path == "dra":
            # kubelet's plugin watcher directory is <root-dir>/plugins_registry (the stand-in's too)
            plugin_dir = os.path.join(d, "plugins", "gpu.kubecomp.io")
            os.makedirs(plugin_dir, exist_ok=True)
            host = os.path.join(self.hosts, name)
            argv += ["--mode", "dra", "--plugins-registry-dir", os.path.join(d, "plugins_registry"),
                     "--dra-plugin-dir", plugin_dir, "--cdi-spec-dir", os.path.join(d, "cdi"),
                     "--sysfs-root", os.path.join(host, "sys"), "--procfs-root", os.path.join(host, "proc"),
                     "--dev-root", os.path.join(host, "dev"), "--host-scan-interval-seconds", "0.05"]
        else:
            argv += ["--device-plugin-dir", dp_dir, "--pod-resources-socket", pr_sock,
                     "--pod-resources-interval-seconds", "0.05",
                     # the simulated nodes have no GPUs: the pool's word is all there is
                     "--host-check=false"]
        self.sup.start(f"disaggpu-devplugin-{name}", argv)
        self.sup.wait_for_file(os.path.join(d, "devplugin.port"), f"disaggpu-devplugin-{name}")

    def _start_reconfig(self):
        port_file = os.path.join(self.dir, "reconfig-mgr.port")
        # In the fixed settings reconfig-mgr still writes the inventory the device plugins
        # advertise; it moves nothing because kubecomp-sched asks for nothing.
        argv = [self.bins["reconfig-mgr"], "--kubeconfig", self.kubeconfig, "--port", "0",
                "--port-file", port_file, "--leader-elect-retry-period", "200ms",
                "--leader-elect-resource-namespace", "kube-system"]
        argv += self.reconfig_flags
        if self.path == "dra":
            # How long the slices must have withheld a GPU before its drain counts (for an
            # allocation made just before to reach the claims informer), scaled like the rest.
            argv += ["--dra-drain-settle-seconds", repr(max(0.01, 0.5 / self.scale))]
        self.sup.start("reconfig-mgr", argv)
        self.reconfig_metrics_port = int(self.sup.wait_for_file(port_file, "reconfig-mgr"))

    def _start_sched(self):
        port_file = os.path.join(self.dir, "kubecomp-sched.port")
        # Retry delays of unschedulable pods scaled like everything else (kube-scheduler's
        # 1 s and 10 s), so a retry costs the same job time at any --time-scale.
        argv = [self.bins["kubecomp-sched"], "--kubeconfig", self.kubeconfig, "--port", "0",
                "--port-file", port_file, "--leader-elect-retry-period", "200ms",
                "--initial-backoff-seconds", repr(max(0.01, 1.0 / self.scale)),
                "--max-backoff-seconds", repr(max(0.01, 10.0 / self.scale)),
                "--mode", "composable" if self.reconfigure else "preconfigured"] + self.sched_flags
        self.sup.start("kubecomp-sched", argv)
        self.sched_metrics_port = int(self.sup.wait_for_file(port_file, "kubecomp-sched"))

    def metrics(self, port):
        """The daemon's Prometheus text as {name{labels}: value}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            out = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    k, _, v = line.rpartition(" ")
                    out[k] = float(v)
            return out

    def _wait_ready(self, timeout=60.0):
        """Ready when both daemons lead and both nodes advertise the GPUs the layout attaches
        to them."""
        deadline = time.monotonic() + timeout
        for port, gauge, name in ((self.sched_metrics_port, "kubecomp_sched_leader", "kubecomp-sched"),
                                  (self.reconfig_metrics_port, "kubecomp_reconfig_is_leader", "reconfig-mgr")):
            while self.metrics(port).get(gauge, 0) != 1:
                self.sup.check_alive()
                if time.monotonic() > deadline:
                    raise StartError(f"{name} did not take its Lease within {timeout:.0f} s")
                time.sleep(0.02)
        want = dict(zip([n for n, _ in NODES], LAYOUTS[self.setting]))
        while True:
            got = self._dra_devices() if self.path == "dra" else self._allocatable()
            if all(got.get(n, -1) == v for n, v in want.items()):
                return
            self.sup.check_alive()
            if time.monotonic() > deadline:
                raise StartError(f"nodes did not advertise the {self.setting} layout {want} "
                                 f"within {timeout:.0f} s (they show {got})")
            time.sleep(0.05)

    def _allocatable(self):
        got = {}
        for node in self.core.list_node().items:
            alloc = (node.status.allocatable or {}) if node.status else {}
            got[node.metadata.name] = int(alloc.get("kubecomp.io/gpu", "0"))
        return got

    def _dra_devices(self):
        """Devices in each node's DRA pool, counted once the node's DRA plugin is registered
        with its kubelet and its host shows them (the node's usage report)."""
        got = {}
        slices = self.custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
        for s in slices.get("items", []):
            pool = s.get("spec", {}).get("pool", {}).get("name", "")
            if pool.startswith(POOL + "/"):
                node = pool[len(POOL) + 1:]
                got[node] = got.get(node, 0) + len(s.get("spec", {}).get("devices", []))
        for node in self.core.list_node().items:
            usage = json.loads((node.metadata.annotations or {}).get("kubecomp.io/gpu-usage", "{}"))
            if not usage.get("registered") or len(usage.get("hostVisible", [])) != got.get(node.metadata.name, 0):
                got[node.metadata.name] = -1
        return got

    # -- during and after a run ------------------------------------------------------------
    def save_metrics(self):
        """Keeps each daemon's final /metrics beside its log."""
        for port, name in ((self.sched_metrics_port, "kubecomp-sched"), (self.reconfig_metrics_port, "reconfig-mgr")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                with open(os.path.join(self.sup.log_dir, name + ".metrics.txt"), "wb") as f:
                    f.write(r.read())

    def save_events(self):
        """Keeps the run's Events (scheduling reasons, moves, claims) beside the logs, in order."""
        rows = []
        for e in self.core.list_event_for_all_namespaces().items:
            when = e.last_timestamp or e.event_time or e.first_timestamp
            obj = e.involved_object
            rows.append((when.isoformat() if when else "", f"{obj.kind}/{obj.namespace or ''}/{obj.name}",
                         e.type or "", e.reason or "", e.count or 1, (e.message or "").replace("\n", " ")))
        rows.sort(key=lambda r: r[0])
        with open(os.path.join(self.sup.log_dir, "events.txt"), "w") as f:
            for r in rows:
                f.write("%s %s %s %s x%d: %s\n" % r)

    def chassis_state(self):
        with urllib.request.urlopen(self.chassis_url + "/sim/v1/state", timeout=10) as r:
            return json.load(r)

    def stop(self):
        if self.api is not None:
            self.api.close()
            self.api = None
        return self.sup.stop_all()
