#!/usr/bin/python3
"""Implementations nobody here wrote agree with disaggpu-devplugin.

Debian's python3-grpcio plays kubelet: a Registration server on kubelet.sock (our plugin's
Register must reach it), a PodResources server, and a client that dials our plugin for
GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation and Allocate. The messages are
compiled from our proto/ files by protoc (--python_out) at test time, and the gRPC methods are
bound by their full names ('/v1beta1.DevicePlugin/Allocate'), so a package, service, method or
field number that differs from kubelet's breaks this test. Debian's python3-kubernetes sets up
the cluster side (GPUPool CRD from the chart, a Node, the pool's status) on the API test double.
The node's host (sysfs, /proc/driver/nvidia, /dev) is written by kubecomp-fake-host: the plugin
offers what the host sees, with its NUMA nodes, and turns a GPU the host loses Unhealthy. It runs
with --device-list-strategy cdi-cri: the node's CDI spec is validated by Debian's
python3-jsonschema against the CDI project's schema (../shared/peers/cdi/schema, through
tests/unit/cdi/validate_cdi.py; only that part is skipped when the peer is absent).

usage: python_kubelet_test.py APISERVER_DOUBLE DEVPLUGIN PROTOC PROTO_DIR SOURCE_DIR FAKE_HOST
                              PEERS_DIR
"""

import concurrent.futures
import importlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import kubernetes
import yaml

CHECKS = []
# The node's GPUs on the fake host: id -> (uuid, bdf, minor, NUMA node). Minors and NUMA nodes
# are not in id order, so a plugin that numbers by position is caught.
HOST_GPUS = {
    "c0.1": ("GPU-aaaaaaaa-0000-0000-0000-000000000001", "0000:3b:00.0", 3, 0),
    "c1.1": ("GPU-aaaaaaaa-0000-0000-0000-000000000002", "0000:5e:00.0", 0, 1),
    "c0.2": ("GPU-aaaaaaaa-0000-0000-0000-000000000003", "0000:86:00.0", 5, 1),
}


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


def compile_protos(protoc, proto_dir, out):
    files = ["deviceplugin/v1beta1/api.proto", "podresources/v1/api.proto"]
    os.makedirs(out, exist_ok=True)
    subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={out}", *files], check=True)
    sys.path.insert(0, out)
    dp = importlib.import_module("deviceplugin.v1beta1.api_pb2")
    pr = importlib.import_module("podresources.v1.api_pb2")
    return dp, pr


# Field numbers of kubelet's v1.29 protos (k8s.io/kubelet/pkg/apis/...), written here from
# the published API, independently of proto/: what kubelet sends is decoded by number.
UPSTREAM = {
    "deviceplugin": {
        "DevicePluginOptions": {"pre_start_required": 1, "get_preferred_allocation_available": 2},
        "RegisterRequest": {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4},
        "ListAndWatchResponse": {"devices": 1},
        "TopologyInfo": {"nodes": 1},
        "NUMANode": {"ID": 1},
        "Device": {"ID": 1, "health": 2, "topology": 3},
        "PreStartContainerRequest": {"devices_ids": 1},
        "PreferredAllocationRequest": {"container_requests": 1},
        "ContainerPreferredAllocationRequest": {"available_deviceIDs": 1,
                                                "must_include_deviceIDs": 2,
                                                "allocation_size": 3},
        "PreferredAllocationResponse": {"container_responses": 1},
        "ContainerPreferredAllocationResponse": {"deviceIDs": 1},
        "AllocateRequest": {"container_requests": 1},
        "ContainerAllocateRequest": {"devices_ids": 1},
        "AllocateResponse": {"container_responses": 1},
        "ContainerAllocateResponse": {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4,
                                      "cdi_devices": 5},
        "Mount": {"container_path": 1, "host_path": 2, "read_only": 3},
        "DeviceSpec": {"container_path": 1, "host_path": 2, "permissions": 3},
        "CDIDevice": {"name": 1},
    },
    "podresources": {
        "ListPodResourcesResponse": {"pod_resources": 1},
        "PodResources": {"name": 1, "namespace": 2, "containers": 3},
        "ContainerResources": {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4,
                               "dynamic_resources": 5},
        "ContainerDevices": {"resource_name": 1, "device_ids": 2, "topology": 3},
        "AllocatableResourcesResponse": {"devices": 1, "cpu_ids": 2, "memory": 3},
        "ContainerMemory": {"memory_type": 1, "size": 2, "topology": 3},
    },
}
UPSTREAM_SERVICES = {
    "deviceplugin": {"v1beta1.Registration": ["Register"],
                     "v1beta1.DevicePlugin": ["GetDevicePluginOptions", "ListAndWatch",
                                              "GetPreferredAllocation", "Allocate",
                                              "PreStartContainer"]},
    "podresources": {"v1.PodResourcesLister": ["List", "GetAllocatableResources", "Get"]},
}


def check_descriptors(dp, pr):
    for key, module in (("deviceplugin", dp), ("podresources", pr)):
        fd = module.DESCRIPTOR
        for message, fields in UPSTREAM[key].items():
            got = {f.name: f.number for f in fd.message_types_by_name[message].fields}
            for name, number in fields.items():
                check(got.get(name) == number, f"{fd.package}.{message}.{name} = {number}")
        for service, methods in UPSTREAM_SERVICES[key].items():
            desc = fd.services_by_name[service.split(".")[1]]
            check(desc.full_name == service and
                  all(m in desc.methods_by_name for m in methods),
                  f"service {service} has {', '.join(methods)}")


def fake_host(exe, root, *args):
    run = subprocess.run([exe, "--root", root, *args], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise AssertionError(f"kubecomp-fake-host {' '.join(args)}: exit {run.returncode}: "
                             f"{run.stderr.strip()}")
    return run.stdout


def cdi_validator(source_dir, peers):
    """refusal(spec) -> None or why, by the CDI project's schema; None when the peer is absent."""
    schema_dir = os.path.join(peers, "cdi", "schema")
    if not all(os.path.isfile(os.path.join(schema_dir, f)) for f in ("schema.json", "defs.json")):
        print(f"skip the CDI schema checks: peer absent: {schema_dir} (the CDI project's schema)",
              flush=True)
        return None
    sys.path.insert(0, os.path.join(source_dir, "tests/unit/cdi"))
    validate_cdi = importlib.import_module("validate_cdi")
    import jsonschema
    import pathlib
    validator = validate_cdi.make_validator(jsonschema, pathlib.Path(schema_dir))
    return lambda spec: validate_cdi.refusal(validator, spec)


def ids(devices):
    """(id, health) of a ListAndWatch list as the reader keeps it."""
    return [(i, h) for i, h, _ in devices]


def next_list(updates, pred, what, limit=5.0):
    """The first list from ListAndWatch (refusals resend lists) for which pred holds."""
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {limit} s waiting for ListAndWatch: {what}")
        try:
            got = updates.get(timeout=left)
        except queue.Empty:
            continue
        if got and got[0] == "ended":
            raise AssertionError(f"ListAndWatch ended waiting for {what}")
        if pred(dict((i, h) for i, h, _ in got)):
            return got


def check_node_spec(path, host_root, refusal, want_ids, cdi_names):
    """The node's CDI spec (cdi-cri): one device per GPU the host sees, its node from the host."""
    check(os.path.isfile(path), f"cdi-cri: the node's CDI spec {os.path.basename(path)} written")
    with open(path) as f:
        spec = json.load(f)
    if refusal is not None:
        why = refusal(spec)
        check(why is None, f"cdi-cri: the node's spec is a valid CDI spec ({why or 'schema.json'})")
    devices = {d["name"]: d for d in spec.get("devices", [])}
    check(spec.get("kind") == "kubecomp.io/gpu" and sorted(devices) == sorted(want_ids),
          f"cdi-cri: spec kind kubecomp.io/gpu with devices {sorted(want_ids)} ({sorted(devices)})")
    for gpu_id in want_ids:
        minor = HOST_GPUS[gpu_id][2]
        edits = devices[gpu_id]["containerEdits"]
        nodes = [(n["path"], n.get("hostPath")) for n in edits["deviceNodes"]]
        # hostPath is read by the runtime on the host: its /dev, wherever the plugin sees it.
        check(nodes == [(f"/dev/nvidia{minor}", f"/dev/nvidia{minor}")],
              f"cdi-cri: {gpu_id} is the host's /dev/nvidia{minor} ({nodes})")
    for name in cdi_names:
        kind, _, device = name.partition("=")
        check(kind == "kubecomp.io/gpu" and device in devices,
              f"cdi-cri: Allocate's {name} is a device of the spec")


def start_double(exe, work):
    kubeconfig = os.path.join(work, "kubeconfig")
    proc = subprocess.Popen([exe, "--port", "0", "--kubeconfig-out", kubeconfig,
                             "--token", "python-peer-token"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0,
             "the API test double's kubeconfig", 20)
    return proc, kubeconfig


class Kubelet:
    """Registration + PodResources servers, in Python, on unix sockets."""

    def __init__(self, dp, pr, plugin_dir, pod_resources_sock):
        self.dp, self.pr = dp, pr
        self.registrations = queue.Queue()
        self.in_use = []  # (namespace, pod, container, ids)
        self.plugin_dir = plugin_dir

        def register(request, context):
            self.registrations.put(request)
            return dp.Empty()

        def list_pods(request, context):
            resp = pr.ListPodResourcesResponse()
            for ns, pod, container, ids in self.in_use:
                p = resp.pod_resources.add(name=pod, namespace=ns)
                c = p.containers.add(name=container)
                c.devices.add(resource_name="kubecomp.io/gpu", device_ids=ids)
            return resp

        self.registration = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        self.registration.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "v1beta1.Registration",
            {"Register": grpc.unary_unary_rpc_method_handler(
                register, request_deserializer=dp.RegisterRequest.FromString,
                response_serializer=dp.Empty.SerializeToString)})])
        self.registration.add_insecure_port("unix:" + os.path.join(plugin_dir, "kubelet.sock"))
        self.registration.start()

        self.pod_resources = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        self.pod_resources.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister",
            {"List": grpc.unary_unary_rpc_method_handler(
                list_pods, request_deserializer=pr.ListPodResourcesRequest.FromString,
                response_serializer=pr.ListPodResourcesResponse.SerializeToString)})])
        self.pod_resources.add_insecure_port("unix:" + pod_resources_sock)
        self.pod_resources.start()

    def stop(self):
        self.registration.stop(0)
        self.pod_resources.stop(0)


class PluginClient:
    """kubelet's calls to a device plugin, bound by full method name."""

    def __init__(self, dp, socket):
        self.dp = dp
        self.channel = grpc.insecure_channel("unix:" + socket)
        m = "/v1beta1.DevicePlugin/"
        self.options = self.channel.unary_unary(
            m + "GetDevicePluginOptions", request_serializer=dp.Empty.SerializeToString,
            response_deserializer=dp.DevicePluginOptions.FromString)
        self.list_and_watch = self.channel.unary_stream(
            m + "ListAndWatch", request_serializer=dp.Empty.SerializeToString,
            response_deserializer=dp.ListAndWatchResponse.FromString)
        self.preferred = self.channel.unary_unary(
            m + "GetPreferredAllocation",
            request_serializer=dp.PreferredAllocationRequest.SerializeToString,
            response_deserializer=dp.PreferredAllocationResponse.FromString)
        self.allocate = self.channel.unary_unary(
            m + "Allocate", request_serializer=dp.AllocateRequest.SerializeToString,
            response_deserializer=dp.AllocateResponse.FromString)
        self.pre_start = self.channel.unary_unary(
            m + "PreStartContainer",
            request_serializer=dp.PreStartContainerRequest.SerializeToString,
            response_deserializer=dp.PreStartContainerResponse.FromString)


def pool_status(gpus):
    return {"gpus": [{"id": i, "uuid": u, "chassis": i.split(".")[0], "node": n,
                      "health": "Healthy", "draining": d} for i, u, n, d in gpus]}


def main():
    double_exe, plugin_exe, protoc, proto_dir, source_dir, fake_exe, peers = sys.argv[1:8]
    work = tempfile.mkdtemp(prefix="kc-pykubelet-")
    procs = []
    kubelet = None
    try:
        dp, pr = compile_protos(protoc, proto_dir, os.path.join(work, "gen"))
        check_descriptors(dp, pr)
        refusal = cdi_validator(source_dir, peers)
        api, kubeconfig = start_double(double_exe, work)
        procs.append(api)

        # Cluster side through python3-kubernetes.
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        ext = kubernetes.client.ApiextensionsV1Api(client)
        core = kubernetes.client.CoreV1Api(client)
        custom = kubernetes.client.CustomObjectsApi(client)
        with open(os.path.join(source_dir, "charts/kubecomp/crds/gpupools.kubecomp.io.yaml")) as f:
            ext.create_custom_resource_definition(yaml.safe_load(f))

        def pools_served():
            try:
                custom.list_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools")
                return True
            except kubernetes.client.ApiException:
                return False
        wait_for(pools_served, "the gpupools resource to be served")
        core.create_node({"metadata": {"name": "n1"}})
        with open(os.path.join(source_dir, "charts/kubecomp/examples/gpupool-sample.yaml")) as f:
            pool = yaml.safe_load(f)
        pool["metadata"]["name"] = "pool-a"
        custom.create_cluster_custom_object("kubecomp.io", "v1alpha1", "gpupools", pool)
        gpus = [("c0.1", "GPU-aaaaaaaa-0000-0000-0000-000000000001", "n1", False),
                ("c1.1", "GPU-aaaaaaaa-0000-0000-0000-000000000002", "n1", False),
                ("c0.2", "GPU-aaaaaaaa-0000-0000-0000-000000000003", "n1", False),
                ("c0.3", "GPU-aaaaaaaa-0000-0000-0000-000000000004", "n2", False)]
        custom.patch_cluster_custom_object_status(
            "kubecomp.io", "v1alpha1", "gpupools", "pool-a", {"status": pool_status(gpus)})

        plugin_dir = os.path.join(work, "device-plugins")
        os.mkdir(plugin_dir)
        # The node's host sees the three GPUs the pool attaches to n1, by the same UUIDs.
        host = os.path.join(work, "host")
        fake_host(fake_exe, host, "init")
        for gpu_id, (uuid, bdf, minor, numa) in HOST_GPUS.items():
            fake_host(fake_exe, host, "add", "--bdf", bdf, "--uuid", uuid, "--minor", str(minor),
                      "--numa", str(numa))
        cdi_dir = os.path.join(work, "cdi")
        os.mkdir(cdi_dir)
        node_spec = os.path.join(cdi_dir, "kubecomp.io-gpu_node.json")
        pr_sock = os.path.join(work, "pod-resources.sock")
        kubelet = Kubelet(dp, pr, plugin_dir, pr_sock)
        kubelet.in_use = [("default", "train", "main", ["c1.1"])]

        plugin = subprocess.Popen([plugin_exe, "--node-name", "n1", "--kubeconfig", kubeconfig,
                                   "--device-plugin-dir", plugin_dir,
                                   "--pod-resources-socket", pr_sock,
                                   "--pod-resources-interval-seconds", "0.1",
                                   "--sysfs-root", host + "/sys", "--procfs-root", host + "/proc",
                                   "--dev-root", host + "/dev",
                                   "--host-scan-interval-seconds", "0.1",
                                   "--device-list-strategy", "cdi-cri", "--cdi-spec-dir", cdi_dir,
                                   "--port", "0", "--log-level", os.environ.get("KC_LOG", "warn")])
        procs.append(plugin)

        # Our Register against Python's Registration server.
        req = kubelet.registrations.get(timeout=15)
        check(req.version == "v1beta1", "Register: version v1beta1")
        check(req.endpoint == "kubecomp-gpu.sock", "Register: endpoint is our socket's file name")
        check(req.resource_name == "kubecomp.io/gpu", "Register: resource kubecomp.io/gpu")
        check(req.options.get_preferred_allocation_available and not req.options.pre_start_required,
              "Register: options (preferred allocation yes, PreStartContainer no)")

        # Python's client against our DevicePlugin service.
        pc = PluginClient(dp, os.path.join(plugin_dir, req.endpoint))
        opts = pc.options(dp.Empty(), timeout=5)
        check(opts.get_preferred_allocation_available and not opts.pre_start_required,
              "GetDevicePluginOptions agrees with the registration")

        updates = queue.Queue()
        stream = pc.list_and_watch(dp.Empty())

        def read_stream():
            try:
                for resp in stream:
                    updates.put(sorted((d.ID, d.health, tuple(n.ID for n in d.topology.nodes))
                                       for d in resp.devices))
                updates.put(("ended", grpc.StatusCode.OK))
            except grpc.RpcError as e:
                updates.put(("ended", e.code()))
        threading.Thread(target=read_stream, daemon=True).start()
        first = updates.get(timeout=10)
        check(ids(first) == [("c0.1", "Healthy"), ("c0.2", "Healthy"), ("c1.1", "Healthy")],
              "ListAndWatch: the node's three GPUs, healthy")
        check({i: numa for i, _, numa in first} == {"c0.1": (0,), "c0.2": (1,), "c1.1": (1,)},
              f"ListAndWatch: topology NUMA node ids from the host ({first})")

        pref = pc.preferred(dp.PreferredAllocationRequest(container_requests=[
            dp.ContainerPreferredAllocationRequest(
                available_deviceIDs=["c1.1", "c0.1", "c0.2"], must_include_deviceIDs=[],
                allocation_size=2)]), timeout=5)
        check(sorted(pref.container_responses[0].deviceIDs) == ["c0.1", "c0.2"],
              "GetPreferredAllocation: two GPUs of one chassis")

        alloc = pc.allocate(dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=["c0.2", "c0.1"])]), timeout=5)
        envs = dict(alloc.container_responses[0].envs)
        check(envs.get("NVIDIA_VISIBLE_DEVICES") ==
              "GPU-aaaaaaaa-0000-0000-0000-000000000003,GPU-aaaaaaaa-0000-0000-0000-000000000001",
              "Allocate: NVIDIA_VISIBLE_DEVICES holds the UUIDs in request order")
        check(envs.get("KUBECOMP_GPU_IDS") == "c0.2,c0.1", "Allocate: KUBECOMP_GPU_IDS")
        cdi_names = [d.name for d in alloc.container_responses[0].cdi_devices]
        check(cdi_names == ["kubecomp.io/gpu=c0.2", "kubecomp.io/gpu=c0.1"],
              f"Allocate (cdi-cri): cdi_devices kubecomp.io/gpu=<name> in request order "
              f"({cdi_names})")

        for bad, code in (("c0.3", grpc.StatusCode.NOT_FOUND), ("nope", grpc.StatusCode.NOT_FOUND)):
            try:
                pc.allocate(dp.AllocateRequest(container_requests=[
                    dp.ContainerAllocateRequest(devices_ids=["c0.1", bad])]), timeout=5)
                check(False, f"Allocate of {bad} refused")
            except grpc.RpcError as e:
                check(e.code() == code and bad in e.details(),
                      f"Allocate of {bad}: {code.name} naming the device")

        # A refused Allocate sends kubelet the current list again (one per refusal), so its view
        # is fresh before it retries.
        for _ in range(2):
            check(updates.get(timeout=5) == first, "refused Allocate: the current list sent again")
        check(updates.empty(), "nothing else was sent")

        # PodResources (Python) -> our usage report on the Node.
        def usage():
            ann = core.read_node("n1").metadata.annotations or {}
            text = ann.get("kubecomp.io/gpu-usage")
            return json.loads(text) if text else None
        rep = wait_for(lambda: (u := usage()) and u.get("inUse", {}).get("c1.1") and u,
                       "the Node usage annotation to show c1.1 in use")
        check(rep["inUse"]["c1.1"] == ["default/train"], "usage annotation: c1.1 used by default/train")

        # reconfig-mgr marks c0.2 draining: withdrawn from kubelet, then confirmed on the Node.
        gpus[2] = ("c0.2", gpus[2][1], "n1", True)
        custom.patch_cluster_custom_object_status(
            "kubecomp.io", "v1alpha1", "gpupools", "pool-a", {"status": pool_status(gpus)})
        nxt = updates.get(timeout=10)
        check(ids(nxt) == [("c0.1", "Healthy"), ("c1.1", "Healthy")],
              "ListAndWatch: draining c0.2 withdrawn")
        rep = wait_for(lambda: (u := usage()) and "c0.2" in u.get("withdrawn", []) and u,
                       "the Node usage annotation to confirm c0.2 withdrawn")
        check(True, "usage annotation: c0.2 confirmed withdrawn")

        # The host's word, on the Node and in ListAndWatch, without a plugin restart.
        check(rep.get("hostChecked") is True and
              sorted(rep.get("hostVisible", [])) == ["c0.1", "c0.2", "c1.1"] and
              not rep.get("notVisible"),
              f"usage annotation: hostChecked, the three GPUs hostVisible ({rep})")
        fake_host(fake_exe, host, "unbind", "--bdf", HOST_GPUS["c0.1"][1])
        next_list(updates, lambda d: d.get("c0.1") == "Unhealthy" and d.get("c1.1") == "Healthy",
                  "c0.1 Unhealthy once unbound")
        check(True, "ListAndWatch: c0.1 unbound from its driver -> Unhealthy")
        try:
            pc.allocate(dp.AllocateRequest(container_requests=[
                dp.ContainerAllocateRequest(devices_ids=["c0.1"])]), timeout=5)
            check(False, "Allocate of the unbound c0.1 refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.FAILED_PRECONDITION and "c0.1" in e.details(),
                  f"Allocate of the unbound c0.1: FAILED_PRECONDITION ({e.details()})")
        rep = wait_for(lambda: (u := usage()) and "c0.1" in u.get("notVisible", {}) and u,
                       "the usage annotation to show c0.1 not visible")
        check("c0.1" not in rep.get("hostVisible", []), "usage annotation: c0.1 in notVisible")
        fake_host(fake_exe, host, "bind", "--bdf", HOST_GPUS["c0.1"][1])
        next_list(updates, lambda d: d.get("c0.1") == "Healthy", "c0.1 Healthy once bound again")
        check(True, "ListAndWatch: c0.1 bound again -> Healthy")
        fake_host(fake_exe, host, "remove", "--bdf", HOST_GPUS["c1.1"][1])
        got = next_list(updates, lambda d: d.get("c1.1") == "Unhealthy",
                        "c1.1 Unhealthy once gone from the bus")
        check(ids(got) == [("c0.1", "Healthy"), ("c1.1", "Unhealthy")],
              "ListAndWatch: c1.1 removed from the bus -> still listed, Unhealthy")
        rep = wait_for(lambda: (u := usage()) and "c1.1" in u.get("notVisible", {}) and
                       "c0.1" in u.get("hostVisible", []) and u,
                       "the usage annotation to show c1.1 not visible, c0.1 visible again")
        check(sorted(rep["hostVisible"]) == ["c0.1", "c0.2"] and
              list(rep["notVisible"]) == ["c1.1"],
              f"usage annotation: hostVisible c0.1, c0.2; notVisible c1.1 ({rep})")
        # The node's CDI spec follows the host: c1.1 gone, the others as Allocate named them.
        check_node_spec(node_spec, host, refusal, ["c0.1", "c0.2"], cdi_names)

        # SIGTERM: the stream ends, the socket goes, exit 0.
        plugin.send_signal(signal.SIGTERM)
        check(plugin.wait(timeout=15) == 0, "SIGTERM: exit status 0")
        ended = updates.get(timeout=10)
        check(ended[0] == "ended", "SIGTERM: ListAndWatch stream ended")
        check(not os.path.exists(os.path.join(plugin_dir, "kubecomp-gpu.sock")),
              "SIGTERM: plugin socket removed")
        print(f"python3-grpcio kubelet: {len(CHECKS)} checks passed", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - report any failure as the test's failure
        print(f"FAIL {e!r} (after {len(CHECKS)} checks passed)", flush=True)
        return 1
    finally:
        if kubelet:
            kubelet.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
