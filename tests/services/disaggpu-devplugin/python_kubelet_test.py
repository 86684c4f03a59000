#!/usr/bin/python3
"""Implementations nobody here wrote agree with disaggpu-devplugin.

Debian's python3-grpcio plays kubelet: a Registration server on kubelet.sock (our plugin's
Register must reach it), a PodResources server, and a client that dials our plugin for
GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation and Allocate. The messages are
compiled from our proto/ files by protoc (--python_out) at test time, and the gRPC methods are
bound by their full names ('/v1beta1.DevicePlugin/Allocate'), so a package, service, method or
field number that differs from kubelet's breaks this test. Debian's python3-kubernetes sets up
the cluster side (GPUPool CRD from the chart, a Node, the pool's status) on the API test double.

usage: python_kubelet_test.py APISERVER_DOUBLE DEVPLUGIN PROTOC PROTO_DIR SOURCE_DIR
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
    double_exe, plugin_exe, protoc, proto_dir, source_dir = sys.argv[1:6]
    work = tempfile.mkdtemp(prefix="kc-pykubelet-")
    procs = []
    kubelet = None
    try:
        dp, pr = compile_protos(protoc, proto_dir, os.path.join(work, "gen"))
        check_descriptors(dp, pr)
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
        pr_sock = os.path.join(work, "pod-resources.sock")
        kubelet = Kubelet(dp, pr, plugin_dir, pr_sock)
        kubelet.in_use = [("default", "train", "main", ["c1.1"])]

        plugin = subprocess.Popen([plugin_exe, "--node-name", "n1", "--kubeconfig", kubeconfig,
                                   "--device-plugin-dir", plugin_dir,
                                   "--pod-resources-socket", pr_sock,
                                   "--pod-resources-interval-seconds", "0.1",
                                   "--host-check=false",
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
                    updates.put(sorted((d.ID, d.health) for d in resp.devices))
                updates.put(("ended", grpc.StatusCode.OK))
            except grpc.RpcError as e:
                updates.put(("ended", e.code()))
        threading.Thread(target=read_stream, daemon=True).start()
        first = updates.get(timeout=10)
        check(first == [("c0.1", "Healthy"), ("c0.2", "Healthy"), ("c1.1", "Healthy")],
              "ListAndWatch: the node's three GPUs, healthy")

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
        check(nxt == [("c0.1", "Healthy"), ("c1.1", "Healthy")], "ListAndWatch: draining c0.2 withdrawn")
        wait_for(lambda: (u := usage()) and "c0.2" in u.get("withdrawn", []),
                 "the Node usage annotation to confirm c0.2 withdrawn")
        check(True, "usage annotation: c0.2 confirmed withdrawn")

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
