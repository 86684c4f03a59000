#!/usr/bin/python3
"""Implementations nobody here wrote agree with disaggpu-devplugin --mode dra.

Debian's python3-grpcio plays kubelet's DRA side: its plugin watcher (GetInfo and
NotifyRegistrationStatus on our registration socket, the socket deleted as a kubelet restart
does) and its DRA manager (NodePrepareResources / NodeUnprepareResources, v1 and v1beta1, on the
endpoint GetInfo names). The messages are compiled at test time by protoc (--python_out) from the
UPSTREAM kubelet protos in ../shared/peers/kubelet-api, and the methods are bound by their full
names ('/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources'), so a package, service,
method or field number of ours that differs from kubelet's breaks this test. Debian's
python3-kubernetes sets up the cluster side on the API test double (the GPUPool CRD from the
chart, a DRA pool whose status attaches GPUs to n1, ResourceClaims allocated as kube-scheduler
writes them); kubecomp-fake-host writes the node's sysfs/procfs; each CDI spec the plugin writes
is validated by Debian's python3-jsonschema against the CDI project's schema
(../shared/peers/cdi/schema, through tests/unit/cdi/validate_cdi.py).

usage: python_kubelet_dra_test.py APISERVER_DOUBLE DEVPLUGIN FAKE_HOST PROTOC PEERS_DIR SOURCE_DIR
Exit 0 all good, 1 a failure, 77 skipped (a peer under PEERS_DIR is absent).
"""

import importlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import grpc
import kubernetes
import yaml
from kubernetes import dynamic

SKIP = 77
CHECKS = []
NODE = "n1"
NS = "default"
DRIVER = "gpu.kubecomp.io"
GPUPOOL = "pool-d"
KIND = "kubecomp.io/gpu"
# The full method names kubelet dials (k8s.io/kubelet/pkg/apis/...; pluginregistration has no
# version in its package).
V1 = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
V1BETA1 = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
REGISTRATION = "pluginregistration.Registration"
PROTOS = ["dra/v1/api.proto", "dra/v1beta1/api.proto", "pluginregistration/v1/api.proto"]

# id, uuid, node, bdf, minor, NUMA node, on the host at start. Minors and bus addresses are not
# in id order, so a spec that numbers by position instead of by the host's word is caught.
GPUS = [
    ("c0-1", "GPU-3c9a1f42-8d7e-4b16-a5c2-9e0f1b2d3a41", "n1", "0000:3b:00.0", 4, 0, True),
    ("c0-2", "GPU-3c9a1f42-8d7e-4b16-a5c2-9e0f1b2d3a42", "n1", "0000:5e:00.0", 2, 1, True),
    ("c1-1", "GPU-3c9a1f42-8d7e-4b16-a5c2-9e0f1b2d3a43", "n1", "0000:86:00.0", 7, 1, False),
    ("c1-2", "GPU-3c9a1f42-8d7e-4b16-a5c2-9e0f1b2d3a44", "n2", "0000:af:00.0", 0, 0, False),
]
BY_ID = {g[0]: g for g in GPUS}


def check(cond, what):
    CHECKS.append(what)
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}", flush=True)


def wait_for(pred, what, limit=10.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {limit} s waiting for {what}")


def settle(read, pred, limit=10.0):
    """read() until pred(value) holds or `limit` passes; the last value either way, so that the
    check after it says what was seen."""
    deadline = time.monotonic() + limit
    value = read()
    while not pred(value) and time.monotonic() < deadline:
        time.sleep(0.05)
        value = read()
    return value


def missing_peers(peers):
    """Which peer folders this test needs are absent, named for the skip message."""
    missing = []
    api = os.path.join(peers, "kubelet-api")
    if not all(os.path.isfile(os.path.join(api, p)) for p in PROTOS):
        missing.append(f"{api} (kubelet's DRA and plugin registration protos)")
    schema = os.path.join(peers, "cdi", "schema")
    if not all(os.path.isfile(os.path.join(schema, f)) for f in ("schema.json", "defs.json")):
        missing.append(f"{schema} (the CDI project's JSON schema)")
    return missing


def compile_protos(protoc, api_dir, out):
    os.makedirs(out, exist_ok=True)
    subprocess.run([protoc, f"-I{api_dir}", f"--python_out={out}", *PROTOS], check=True)
    sys.path.insert(0, out)
    return (importlib.import_module("dra.v1.api_pb2"),
            importlib.import_module("dra.v1beta1.api_pb2"),
            importlib.import_module("pluginregistration.v1.api_pb2"))


def check_services(v1, v1beta1, reg):
    for module, service, methods in ((v1, V1, ["NodePrepareResources", "NodeUnprepareResources"]),
                                     (v1beta1, V1BETA1,
                                      ["NodePrepareResources", "NodeUnprepareResources"]),
                                     (reg, REGISTRATION, ["GetInfo", "NotifyRegistrationStatus"])):
        desc = module.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]]
        check(desc.full_name == service and all(m in desc.methods_by_name for m in methods),
              f"upstream service {service} has {', '.join(methods)}")


def load_cdi_validator(source_dir, schema_dir):
    sys.path.insert(0, os.path.join(source_dir, "tests/unit/cdi"))
    validate_cdi = importlib.import_module("validate_cdi")
    import jsonschema
    import pathlib
    validator = validate_cdi.make_validator(jsonschema, pathlib.Path(schema_dir))
    return lambda spec: validate_cdi.refusal(validator, spec)


def start_double(exe, work):
    kubeconfig = os.path.join(work, "kubeconfig")
    proc = subprocess.Popen([exe, "--port", "0", "--kubeconfig-out", kubeconfig,
                             "--token", "python-peer-token"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0,
             "the API test double's kubeconfig", 20)
    return proc, kubeconfig


def fake_host(exe, root, *args):
    run = subprocess.run([exe, "--root", root, *args], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise AssertionError(f"kubecomp-fake-host {' '.join(args)}: exit {run.returncode}: "
                             f"{run.stderr.strip()}")
    return run.stdout


def add_gpu(exe, root, gpu_id):
    _, uuid, _, bdf, minor, numa, _ = BY_ID[gpu_id]
    fake_host(exe, root, "add", "--bdf", bdf, "--uuid", uuid, "--minor", str(minor),
              "--numa", str(numa))


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Registration:
    """kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus."""

    def __init__(self, reg, socket):
        self.reg = reg
        self.channel = grpc.insecure_channel("unix:" + socket)
        m = f"/{REGISTRATION}/"
        self.get_info = self.channel.unary_unary(
            m + "GetInfo", request_serializer=reg.InfoRequest.SerializeToString,
            response_deserializer=reg.PluginInfo.FromString)
        self.notify = self.channel.unary_unary(
            m + "NotifyRegistrationStatus",
            request_serializer=reg.RegistrationStatus.SerializeToString,
            response_deserializer=reg.RegistrationStatusResponse.FromString)

    def info(self):
        return self.get_info(self.reg.InfoRequest(), timeout=5)

    def close(self):
        self.channel.close()


class DraClient:
    """kubelet's DRA manager calling one version of the DRAPlugin service."""

    def __init__(self, api, service, endpoint):
        self.api = api
        self.channel = grpc.insecure_channel("unix:" + endpoint)
        m = f"/{service}/"
        self._prepare = self.channel.unary_unary(
            m + "NodePrepareResources",
            request_serializer=api.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=api.NodePrepareResourcesResponse.FromString)
        self._unprepare = self.channel.unary_unary(
            m + "NodeUnprepareResources",
            request_serializer=api.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=api.NodeUnprepareResourcesResponse.FromString)

    def claims(self, refs):
        return [self.api.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in refs]

    def prepare(self, *refs):
        return self._prepare(self.api.NodePrepareResourcesRequest(claims=self.claims(refs)),
                             timeout=10).claims

    def unprepare(self, *refs):
        return self._unprepare(self.api.NodeUnprepareResourcesRequest(claims=self.claims(refs)),
                               timeout=10).claims

    def close(self):
        self.channel.close()


class Cluster:
    """The API test double through python3-kubernetes."""

    def __init__(self, kubeconfig, source_dir, work):
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        self.core = kubernetes.client.CoreV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)
        ext = kubernetes.client.ApiextensionsV1Api(client)
        with open(os.path.join(source_dir, "charts/kubecomp/crds/gpupools.kubecomp.io.yaml")) as f:
            ext.create_custom_resource_definition(yaml.safe_load(f))
        wait_for(self.pools_served, "the gpupools resource to be served")
        # Debian's client predates ResourceV1Api: resource.k8s.io/v1 through its dynamic client.
        dyn = dynamic.DynamicClient(client, cache_file=os.path.join(work, "discovery.json"))
        self.claims = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")

    def pools_served(self):
        try:
            self.custom.list_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools")
            return True
        except kubernetes.client.ApiException:
            return False

    def create_pool(self, source_dir):
        with open(os.path.join(source_dir, "charts/kubecomp/examples/gpupool-sample.yaml")) as f:
            pool = yaml.safe_load(f)
        pool["metadata"]["name"] = GPUPOOL
        pool["spec"]["allocationPath"] = "DRA"
        pool["spec"]["nodes"] = [{"name": "n1", "hostPort": "1"}, {"name": "n2", "hostPort": "2"}]
        self.custom.create_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools", pool)
        status = {"gpus": [{"id": i, "uuid": u, "chassis": "falcon-" + i[1], "node": n,
                            "health": "Healthy", "draining": False}
                           for i, u, n, *_ in GPUS]}
        self.custom.patch_cluster_custom_object_status(
            "kubecomp.io", "v1alpha1", "gpupools", GPUPOOL, {"status": status})

    def create_claim(self, name, results=None, node=NODE):
        """A claim asking one GPU; with `results` [(pool, device, binding conditions?)] the
        allocation kube-scheduler writes (for `node`) and a pod reserving it. Returns its UID."""
        obj = self.claims.create(namespace=NS, body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}})
        if results is not None:
            allocated = []
            for pool, device, fabric in results:
                r = {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}
                if fabric:  # a fabric device attached for this claim (KEP-5007)
                    r["bindingConditions"] = ["gpu.kubecomp.io/attached"]
                    r["bindingFailureConditions"] = ["gpu.kubecomp.io/attach-failed"]
                allocated.append(r)
            allocation = {
                "devices": {"results": allocated},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                "allocationTimestamp": "2026-01-01T00:00:00Z"}
            self.claims.status.patch(
                namespace=NS, name=name, content_type="application/merge-patch+json",
                body={"status": {"allocation": allocation, "reservedFor": [
                    {"resource": "pods", "name": "pod-" + name, "uid": "uid-pod-" + name}]}})
        return obj.metadata.uid

    def usage(self):
        ann = self.core.read_node(NODE).metadata.annotations or {}
        text = ann.get("kubecomp.io/gpu-usage")
        return json.loads(text) if text else None


class Node:
    """The node's directories and the plugin process (started again for the restart check)."""

    def __init__(self, work, plugin_exe, kubeconfig):
        self.exe, self.kubeconfig, self.work = plugin_exe, kubeconfig, work
        self.registry = os.path.join(work, "plugins_registry")
        self.plugin_dir = os.path.join(work, "plugins", DRIVER)
        self.cdi = os.path.join(work, "cdi")
        self.host = os.path.join(work, "host")
        for d in (self.registry, self.plugin_dir, self.cdi):
            os.makedirs(d)
        self.reg_socket = os.path.join(self.registry, DRIVER + "-reg.sock")
        self.dra_socket = os.path.join(self.plugin_dir, "dra.sock")
        self.proc = None
        self.port = None
        self.starts = 0

    def start(self):
        self.starts += 1
        port_file = os.path.join(self.work, f"port-{self.starts}")
        self.proc = subprocess.Popen([
            self.exe, "--mode", "dra", "--node-name", NODE, "--kubeconfig", self.kubeconfig,
            "--plugins-registry-dir", self.registry, "--dra-plugin-dir", self.plugin_dir,
            "--cdi-spec-dir", self.cdi, "--sysfs-root", self.host + "/sys",
            "--procfs-root", self.host + "/proc", "--dev-root", self.host + "/dev",
            "--host-scan-interval-seconds", "0.1", "--bind-address", "127.0.0.1",
            "--port", "0", "--port-file", port_file,
            "--log-level", os.environ.get("KC_LOG", "warn")])
        text = wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                        "the plugin's port file", 20)
        self.port = int(text)
        wait_for(lambda: is_socket(self.reg_socket), "the registration socket", 10)
        return self.proc

    def spec_path(self, uid):
        return os.path.join(self.cdi, f"kubecomp.io-gpu_{uid}.json")

    def specs(self):
        return sorted(os.listdir(self.cdi))


def check_spec(node, refusal, uid, cdi_id, gpu_ids):
    """The claim's CDI spec: valid, naming the device kubelet was given, the host's minors."""
    path = node.spec_path(uid)
    check(os.path.isfile(path), f"claim {uid[:8]}: CDI spec {os.path.basename(path)} written")
    with open(path) as f:
        spec = json.load(f)
    why = refusal(spec)
    check(why is None, f"claim {uid[:8]}: the spec is a valid CDI spec ({why or 'schema.json'})")
    check(spec.get("kind") == KIND, f"claim {uid[:8]}: spec kind {KIND}")
    kind, _, name = cdi_id.partition("=")
    devices = {d["name"]: d for d in spec.get("devices", [])}
    check(kind == KIND and name in devices,
          f"claim {uid[:8]}: CDI id {cdi_id} names a device of the spec")
    nodes = [(n["path"], n.get("hostPath")) for n in devices[name]["containerEdits"]["deviceNodes"]]
    # hostPath is read by the runtime on the host: its /dev, wherever the plugin sees it.
    want = [(f"/dev/nvidia{BY_ID[g][4]}", f"/dev/nvidia{BY_ID[g][4]}") for g in gpu_ids]
    check(nodes == want,
          f"claim {uid[:8]}: device node /dev/nvidia<minor> of the fake host: {nodes}")
    env = [e for edits in [spec.get("containerEdits", {})] +
           [d["containerEdits"] for d in spec["devices"]] for e in edits.get("env", [])]
    uuids = ",".join(BY_ID[g][1] for g in gpu_ids)
    check(f"NVIDIA_VISIBLE_DEVICES={uuids}" in env,
          f"claim {uid[:8]}: NVIDIA_VISIBLE_DEVICES holds the UUID {uuids}")
    return spec


def check_answer(entry, what, pool, device):
    check(entry.error == "" and len(entry.devices) == 1,
          f"{what}: one device, no error ({entry.error!r})")
    d = entry.devices[0]
    check(list(d.request_names) == ["gpu"] and d.pool_name == pool and d.device_name == device,
          f"{what}: request gpu, pool {pool}, device {device} (got {list(d.request_names)}, "
          f"{d.pool_name}, {d.device_name})")
    check(len(d.cdi_device_ids) == 1 and d.cdi_device_ids[0].startswith(KIND + "="),
          f"{what}: one CDI id of kind {KIND}: {list(d.cdi_device_ids)}")
    return d.cdi_device_ids[0]


def registration_checks(node, reg):
    """The plugin watcher's side; returns the DRAPlugin endpoint."""
    info = node.registration.info()
    check(info.type == "DRAPlugin", f"GetInfo: type DRAPlugin ({info.type!r})")
    check(info.name == DRIVER, f"GetInfo: name {DRIVER}")
    check(info.endpoint == node.dra_socket and is_socket(info.endpoint),
          f"GetInfo: endpoint {info.endpoint} is the plugin's socket")
    check(sorted(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
          f"GetInfo: versions v1.DRAPlugin, v1beta1.DRAPlugin ({list(info.supported_versions)})")
    code, _ = http_get(node.port, "/readyz/kubelet-registration")
    check(code == 503, "/readyz: not ready before kubelet's NotifyRegistrationStatus")
    node.registration.notify(reg.RegistrationStatus(plugin_registered=False,
                                                    error="test: version refused"), timeout=5)
    code, body = http_get(node.port, "/readyz/kubelet-registration")
    check(code == 503 and "test: version refused" in body,
          "/readyz: a refusal keeps it unready and tells kubelet's error")
    node.registration.notify(reg.RegistrationStatus(plugin_registered=True), timeout=5)
    code, _ = http_get(node.port, "/readyz")
    check(code == 200, "/readyz: ready once kubelet registered the driver")
    return info.endpoint


def main():
    double_exe, plugin_exe, fake_exe, protoc, peers, source_dir = sys.argv[1:7]
    missing = missing_peers(peers)
    if missing:
        print("SKIP: peer absent: " + "; ".join(missing))
        return SKIP
    work = tempfile.mkdtemp(prefix="kc-pykubelet-dra-")
    procs = []
    clients = []
    try:
        v1, v1beta1, reg = compile_protos(protoc, os.path.join(peers, "kubelet-api"),
                                          os.path.join(work, "gen"))
        check_services(v1, v1beta1, reg)
        refusal = load_cdi_validator(source_dir, os.path.join(peers, "cdi", "schema"))
        api, kubeconfig = start_double(double_exe, work)
        procs.append(api)
        cluster = Cluster(kubeconfig, source_dir, work)
        cluster.core.create_node({"metadata": {"name": NODE}})
        cluster.create_pool(source_dir)

        node = Node(work, plugin_exe, kubeconfig)
        fake_host(fake_exe, node.host, "init")
        for g in GPUS:
            if g[6]:
                add_gpu(fake_exe, node.host, g[0])
        procs.append(node.start())
        node.registration = Registration(reg, node.reg_socket)
        clients.append(node.registration)
        endpoint = registration_checks(node, reg)
        dra1 = DraClient(v1, V1, endpoint)
        dra1b = DraClient(v1beta1, V1BETA1, endpoint)
        clients += [dra1, dra1b]

        # The host's word on the Node: c1-1 is attached per the pool but not on this host.
        rep = settle(lambda: cluster.usage() or {},
                     lambda u: u.get("registered") and
                     sorted(u.get("hostVisible", [])) == ["c0-1", "c0-2"])
        check(rep.get("hostChecked") is True, f"usage annotation: hostChecked ({rep})")
        check(sorted(rep["hostVisible"]) == ["c0-1", "c0-2"],
              f"usage annotation: hostVisible c0-1, c0-2 ({rep.get('hostVisible')})")
        check(list(rep.get("notVisible", {})) == ["c1-1"] and
              BY_ID["c1-1"][1] in rep["notVisible"]["c1-1"],
              f"usage annotation: notVisible c1-1 with the reason ({rep.get('notVisible')})")
        check(rep.get("registered") is True, "usage annotation: registered with kubelet")

        # v1: a claim of a GPU attached here (node-local pool) and seen by the host.
        uid_a = cluster.create_claim("claim-a", [(f"{GPUPOOL}/{NODE}", "c0-1", False)])
        ref_a = (NS, uid_a, "claim-a")
        first = dra1.prepare(ref_a)
        check(list(first) == [uid_a], "v1 NodePrepareResources: answered by claim UID")
        cdi_a = check_answer(first[uid_a], "v1 prepare claim-a", f"{GPUPOOL}/{NODE}", "c0-1")
        spec_a = check_spec(node, refusal, uid_a, cdi_a, ["c0-1"])
        again = dra1.prepare(ref_a)
        check(again[uid_a] == first[uid_a], "v1 prepare repeated: the same answer")
        with open(node.spec_path(uid_a)) as f:
            check(json.load(f) == spec_a, "v1 prepare repeated: the same spec")

        # v1beta1: a fabric device attached for its claim (pool = the GPUPool, binding conditions).
        uid_b = cluster.create_claim("claim-b", [(GPUPOOL, "c0-2", True)])
        ref_b = (NS, uid_b, "claim-b")
        got_b = dra1b.prepare(ref_b)
        cdi_b = check_answer(got_b[uid_b], "v1beta1 prepare claim-b", GPUPOOL, "c0-2")
        check_spec(node, refusal, uid_b, cdi_b, ["c0-2"])
        check(cdi_a != cdi_b, "two claims get distinct CDI device names")

        # Attached per the pool, absent on the host: refused until the host shows it.
        uid_c = cluster.create_claim("claim-c", [(f"{GPUPOOL}/{NODE}", "c1-1", False)])
        ref_c = (NS, uid_c, "claim-c")
        err = dra1.prepare(ref_c)[uid_c]
        check(err.error and "host" in err.error and "c1-1" in err.error and not err.devices,
              f"GPU not on the host: per-claim error naming it and the host ({err.error!r})")
        check(not os.path.exists(node.spec_path(uid_c)), "GPU not on the host: no spec written")
        add_gpu(fake_exe, node.host, "c1-1")
        got_c = wait_for(lambda: (r := dra1.prepare(ref_c)[uid_c]) and not r.error and r,
                         "the prepare of claim-c to succeed once the host sees c1-1", 5)
        cdi_c = check_answer(got_c, "hot-added GPU: retried prepare", f"{GPUPOOL}/{NODE}", "c1-1")
        check_spec(node, refusal, uid_c, cdi_c, ["c1-1"])
        rep = settle(lambda: cluster.usage() or {},
                     lambda u: "c1-1" in u.get("hostVisible", []) and "c0-1" in u.get("inUse", {}))
        check(sorted(rep.get("hostVisible", [])) == ["c0-1", "c0-2", "c1-1"],
              f"usage annotation: hot-added c1-1 visible ({rep.get('hostVisible')})")
        check(not rep.get("notVisible"), "usage annotation: nothing left not visible")
        check(rep.get("inUse", {}).get("c0-1") == ["ResourceClaim default/claim-a"],
              f"usage annotation: c0-1 held by claim-a ({rep.get('inUse')})")

        # Claims the plugin must refuse, each with its own error and nothing written.
        before = node.specs()
        uid_d = cluster.create_claim("claim-unallocated")
        uid_e = cluster.create_claim("claim-elsewhere", [(f"{GPUPOOL}/n2", "c1-2", False)], "n2")
        wrong_uid = "0e0e0e0e-1111-4222-8333-444444444444"
        refused = [
            ((NS, wrong_uid, "claim-a"), "UID", "wrong UID (deleted and created anew)"),
            ((NS, "5a5a5a5a-1111-4222-8333-444444444444", "no-such-claim"), "no-such-claim",
             "a claim that does not exist"),
            ((NS, uid_d, "claim-unallocated"), "not allocated", "an unallocated claim"),
            ((NS, uid_e, "claim-elsewhere"), "n2", "a claim allocated for node n2"),
        ]
        for ref, needle, what in refused:
            got = dra1.prepare(ref)
            check(list(got) == [ref[1]] and got[ref[1]].error and needle in got[ref[1]].error
                  and not got[ref[1]].devices,
                  f"{what}: per-claim error mentioning {needle!r} ({got[ref[1]].error!r})")
        both = dra1.prepare(ref_a, (NS, uid_d, "claim-unallocated"))
        check(sorted(both) == sorted([uid_a, uid_d]) and both[uid_a] == first[uid_a] and
              both[uid_d].error, "two claims in one request: both answered, each on its own")
        check(node.specs() == before, f"refused claims: no spec written ({node.specs()})")
        with open(os.path.join(node.plugin_dir, "checkpoint.json")) as f:
            checkpoint = f.read()
        check(uid_a in checkpoint and uid_d not in checkpoint and uid_e not in checkpoint,
              "checkpoint: the prepared claims, not the refused ones")

        # Unprepare removes exactly that claim's spec; repeated and unknown claims succeed.
        got = dra1.unprepare(ref_a)
        check(list(got) == [uid_a] and got[uid_a].error == "", "v1 NodeUnprepareResources: done")
        check(node.specs() == sorted(os.path.basename(node.spec_path(u)) for u in (uid_b, uid_c)),
              f"unprepare: claim-a's spec gone, the others kept ({node.specs()})")
        check(dra1.unprepare(ref_a)[uid_a].error == "", "unprepare repeated: success")
        unknown = "7b7b7b7b-1111-4222-8333-444444444444"
        check(dra1b.unprepare((NS, unknown, "never-prepared"))[unknown].error == "",
              "unprepare of a claim never prepared: success")

        # kubelet restart: the plugin watcher's directory is emptied; we serve our socket again.
        os.remove(node.reg_socket)
        node.registration.close()
        removed = time.monotonic()
        node.registration = Registration(reg, node.reg_socket)
        clients.append(node.registration)

        def info_again():
            try:
                return is_socket(node.reg_socket) and node.registration.info()
            except grpc.RpcError:
                return None
        info = wait_for(info_again, "GetInfo on the registration socket served again", 5)
        took = time.monotonic() - removed
        check(info.name == DRIVER and took < 1.5,
              f"kubelet restart: registration socket served again, GetInfo in {took:.2f} s")
        code, _ = http_get(node.port, "/readyz/kubelet-registration")
        check(code == 503, "kubelet restart: unready until kubelet registers the driver again")
        node.registration.notify(reg.RegistrationStatus(plugin_registered=True), timeout=5)
        check(http_get(node.port, "/readyz")[0] == 200, "kubelet restart: ready again")

        # Plugin restart: prepared claims answered from the checkpoint (claim-b is even gone
        # from the API server, so the answer cannot come from reading it again).
        cluster.claims.delete(namespace=NS, name="claim-b")
        proc = procs.pop()
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=15) == 0, "plugin SIGTERM: exit status 0")
        check(not os.path.exists(node.reg_socket) and not os.path.exists(node.dra_socket),
              "plugin SIGTERM: both sockets removed")
        procs.append(node.start())
        info = wait_for(info_again, "GetInfo after the plugin restart", 10)
        node.registration.notify(reg.RegistrationStatus(plugin_registered=True), timeout=5)
        again_b = dra1b.prepare(ref_b)
        check(again_b[uid_b] == got_b[uid_b],
              "plugin restart: claim-b (deleted from the API) answered the same, "
              "from the checkpoint")
        check(os.path.isfile(node.spec_path(uid_b)) and os.path.isfile(node.spec_path(uid_c)),
              "plugin restart: the prepared claims' specs are still there")
        check(dra1b.unprepare(ref_b)[uid_b].error == "" and
              not os.path.exists(node.spec_path(uid_b)) and os.path.isfile(node.spec_path(uid_c)),
              "plugin restart: unprepare removes claim-b's spec, keeps claim-c's")

        proc = procs.pop()
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=15) == 0, "SIGTERM: exit status 0")
        print(f"python3-grpcio kubelet (DRA): {len(CHECKS)} checks passed", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - report any failure as the test's failure
        print(f"FAIL {e!r} (after {len(CHECKS)} checks passed)", flush=True)
        return 1
    finally:
        for c in clients:
            c.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
