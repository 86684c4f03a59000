#!/usr/bin/python3
"""Debian's python3-kubernetes (the official Python client) against the API test double:
list, watch from a resourceVersion, 410 after compaction, create + bind a pod, optimistic
concurrency, leases, events, custom objects and resource.k8s.io/v1 (Dynamic Resource Allocation,
through the client's dynamic client: Debian's client predates ResourceV1Api).

Usage: python_client_fidelity.py <path to kube-apiserver-double>
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib3

try:
    import kubernetes
    from kubernetes import client, config, dynamic, watch
    from kubernetes.client.rest import ApiException
except ImportError:
    print("python3-kubernetes is not installed (tools/setup-deps.sh installs it)")
    sys.exit(1)

urllib3.disable_warnings()


def expect(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def start_double(binary, tmp):
    kubeconfig = os.path.join(tmp, "kubeconfig")
    log = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen([binary, "--port", "0", "--token", "py-token", "--kubeconfig-out", kubeconfig,
                             "--history-window", "200", "--seed", "3"], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0:
            return proc, kubeconfig
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the double did not start: " + open(os.path.join(tmp, "server.log")).read())


def pod_body(name, labels=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]))


def main():
    binary = sys.argv[1]
    print("python3-kubernetes", kubernetes.__version__)
    with tempfile.TemporaryDirectory() as tmp:
        proc, kubeconfig = start_double(binary, tmp)
        try:
            run(kubeconfig)
        except BaseException:
            print("--- server log")
            print(open(os.path.join(tmp, "server.log")).read())
            raise
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print("PASS: python client fidelity")


def run(kubeconfig):
    api_client = config.new_client_from_config(config_file=kubeconfig)
    v1 = client.CoreV1Api(api_client)
    ns = "default"

    names = [n.metadata.name for n in v1.list_namespace().items]
    expect({"default", "kube-system"} <= set(names), "namespaces listed")

    # --- create, list with selectors and paging
    for i in range(5):
        v1.create_namespaced_pod(ns, pod_body("p%d" % i, {"app": "web" if i % 2 == 0 else "db"}))
    web = v1.list_namespaced_pod(ns, label_selector="app=web")
    expect(sorted(p.metadata.name for p in web.items) == ["p0", "p2", "p4"], "label selector")
    page = v1.list_namespaced_pod(ns, limit=2)
    expect(len(page.items) == 2 and page.metadata._continue, "first page has a continue token")
    rest = v1.list_namespaced_pod(ns, limit=10, _continue=page.metadata._continue)
    expect(len(rest.items) == 3 and rest.metadata.resource_version == page.metadata.resource_version,
           "second page: remaining items at the same list resourceVersion")
    unbound = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=")
    expect(len(unbound.items) == 5, "field selector spec.nodeName=")
    try:
        v1.list_namespaced_pod(ns, field_selector="spec.nope=1")
        expect(False, "unsupported field selector must fail")
    except ApiException as e:
        expect(e.status == 400 and "field label not supported" in e.body, "unsupported field selector is a 400")

    # --- watch from a resourceVersion sees changes made after it
    rv = v1.list_namespaced_pod(ns).metadata.resource_version
    seen = []

    def modify():
        time.sleep(0.5)
        v1.patch_namespaced_pod("p1", ns, {"metadata": {"labels": {"stage": "blue"}}})
        v1.delete_namespaced_pod("p3", ns)

    t = threading.Thread(target=modify)
    t.start()
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=10):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    t.join()
    expect(seen == [("MODIFIED", "p1"), ("DELETED", "p3")], "watch from resourceVersion: %s" % seen)

    # --- an old resourceVersion after compaction: 410 Expired
    api_client.call_api("/_double/compact", "POST", auth_settings=["BearerToken"], _preload_content=False)
    try:
        for ev in watch.Watch().stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5):
            expect(False, "expected 410, got event %s" % ev["type"])
    except ApiException as e:
        expect(e.status == 410, "watch from a compacted resourceVersion gets 410 (%s)" % e.reason)

    # --- optimistic concurrency
    p0 = v1.read_namespaced_pod("p0", ns)
    p0.metadata.labels["x"] = "1"
    v1.replace_namespaced_pod("p0", ns, p0)
    try:
        v1.replace_namespaced_pod("p0", ns, p0)  # still the old resourceVersion
        expect(False, "stale update must conflict")
    except ApiException as e:
        status = json.loads(e.body)
        expect(e.status == 409 and status["reason"] == "Conflict" and
               status["message"] == 'Operation cannot be fulfilled on pods "p0": the object has been modified; '
                                    'please apply your changes to the latest version and try again',
               "stale update is 409 Conflict with the real message")

    # --- binding. The server answers 201 with a Status (as kube-apiserver does); the
    # client's generated code tries to read it as a V1Binding and fails on the missing
    # `target` -- the well-known quirk. Callers use _preload_content=False.
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="p0"),
                            target=client.V1ObjectReference(kind="Node", name="node-1"))
    try:
        v1.create_namespaced_binding(ns, body)
        expect(False, "the client's V1Binding deserialisation quirk did not show")
    except ValueError as e:
        expect("target" in str(e), "create_namespaced_binding quirk (Status body is not a V1Binding)")
    expect(v1.read_namespaced_pod("p0", ns).spec.node_name == "node-1", "pod bound by the first call")
    body2 = client.V1Binding(metadata=client.V1ObjectMeta(name="p2", annotations={"kubecomp.io/why": "test"}),
                             target=client.V1ObjectReference(kind="Node", name="node-2"))
    resp = v1.create_namespaced_pod_binding("p2", ns, body2, _preload_content=False)
    status = json.loads(resp.data)
    expect(resp.status == 201 and status["kind"] == "Status" and status["status"] == "Success",
           "pods/<name>/binding answers 201 Status")
    p2 = v1.read_namespaced_pod("p2", ns)
    expect(p2.spec.node_name == "node-2" and p2.metadata.annotations["kubecomp.io/why"] == "test",
           "binding sets nodeName and merges annotations")
    expect(any(c.type == "PodScheduled" and c.status == "True" for c in p2.status.conditions),
           "binding sets PodScheduled=True")
    try:
        v1.create_namespaced_pod_binding("p2", ns, body2, _preload_content=False)
        expect(False, "second binding must conflict")
    except ApiException as e:
        body = e.body.decode() if isinstance(e.body, bytes) else e.body
        expect(e.status == 409 and json.loads(body)["message"] ==
               'Operation cannot be fulfilled on pods/binding "p2": pod p2 is already assigned to node "node-2"',
               "second binding is 409 Conflict with the real message")

    # --- status subresource
    p4 = v1.read_namespaced_pod("p4", ns)
    p4.status.phase = "Running"
    v1.replace_namespaced_pod_status("p4", ns, p4)
    expect(v1.read_namespaced_pod("p4", ns).status.phase == "Running", "status subresource update")

    # --- events and leases
    v1.create_namespaced_event(ns, client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="p2.1"), reason="Scheduled", message="assigned",
        involved_object=client.V1ObjectReference(kind="Pod", name="p2", namespace=ns, uid=p2.metadata.uid),
        type="Normal", count=1))
    evs = v1.list_namespaced_event(ns, field_selector="involvedObject.name=p2")
    expect(len(evs.items) == 1 and evs.items[0].reason == "Scheduled", "events by involvedObject.name")
    # One event storage behind core/v1 and events.k8s.io/v1.
    ev1 = client.EventsV1Api(api_client)
    ev1.create_namespaced_event(ns, client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="p2.2"), event_time=datetime.datetime.now(datetime.timezone.utc),
        reporting_controller="kubecomp.io/reconfig-mgr", reporting_instance="rm-0", action="Attach",
        reason="GpuAttached", note="attached falcon-0.3", type="Normal",
        regarding=client.V1ObjectReference(kind="Pod", name="p2", namespace=ns, uid=p2.metadata.uid)))
    evs = v1.list_namespaced_event(ns, field_selector="involvedObject.name=p2")
    expect(sorted((e.reason, e.message, e.reporting_component) for e in evs.items) ==
           [("GpuAttached", "attached falcon-0.3", "kubecomp.io/reconfig-mgr"), ("Scheduled", "assigned", None)],
           "core/v1 reads the event written through events.k8s.io/v1")
    # Read raw: a core event has no eventTime, which the real server (and the double) serve as
    # null through events.k8s.io/v1, and this client's EventsV1Event model refuses to build.
    raw = json.loads(ev1.list_namespaced_event(ns, field_selector="regarding.name=p2", _preload_content=False).data)
    expect(sorted((e["reason"], e["note"], e.get("deprecatedCount"), e["eventTime"] is None) for e in raw["items"]) ==
           [("GpuAttached", "attached falcon-0.3", None, False), ("Scheduled", "assigned", 1, True)],
           "events.k8s.io/v1 reads the event written through core/v1")
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease("kube-system", client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)))
    lease.spec.holder_identity = "b"
    coord.replace_namespaced_lease("leader", "kube-system", lease)
    try:
        coord.replace_namespaced_lease("leader", "kube-system", lease)
        expect(False, "stale lease update must conflict")
    except ApiException as e:
        expect(e.status == 409, "lease update race is 409")
    expect(coord.read_namespaced_lease("leader", "kube-system").spec.holder_identity == "b", "lease holder")

    # --- CRD + custom objects
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "bridgejobs.bridge.kubecomp.io"},
        "spec": {"group": "bridge.kubecomp.io", "scope": "Namespaced",
                 "names": {"plural": "bridgejobs", "singular": "bridgejob", "kind": "BridgeJob"},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]}})
    co = client.CustomObjectsApi(api_client)
    co.create_namespaced_custom_object("bridge.kubecomp.io", "v1alpha1", ns, "bridgejobs", {
        "apiVersion": "bridge.kubecomp.io/v1alpha1", "kind": "BridgeJob",
        "metadata": {"name": "job1"}, "spec": {"resourceURL": "http://slurm:6820"}})
    co.patch_namespaced_custom_object_status("bridge.kubecomp.io", "v1alpha1", ns, "bridgejobs", "job1",
                                             {"status": {"state": "DONE"}})
    got = co.get_namespaced_custom_object("bridge.kubecomp.io", "v1alpha1", ns, "bridgejobs", "job1")
    expect(got["status"]["state"] == "DONE" and got["kind"] == "BridgeJob", "custom object status patch")
    listed = co.list_namespaced_custom_object("bridge.kubecomp.io", "v1alpha1", ns, "bridgejobs")
    expect(len(listed["items"]) == 1, "custom objects listed")

    # --- pods/eviction (policy/v1) against a PodDisruptionBudget
    policy = client.PolicyV1Api(api_client)
    for name in ("e1", "e2"):
        v1.create_namespaced_pod(ns, pod_body(name, {"app": "evict"}))
        v1.patch_namespaced_pod_status(name, ns, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    policy.create_namespaced_pod_disruption_budget(ns, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="evict-pdb"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=client.V1LabelSelector(
            match_labels={"app": "evict"}))))
    pdb = policy.read_namespaced_pod_disruption_budget("evict-pdb", ns)
    expect(pdb.status.current_healthy == 2 and pdb.status.desired_healthy == 1 and
           pdb.status.disruptions_allowed == 1 and pdb.status.expected_pods == 2, "PDB status computed")
    eviction = lambda name: client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    v1.create_namespaced_pod_eviction("e1", ns, eviction("e1"))
    try:
        v1.read_namespaced_pod("e1", ns)
        expect(False, "evicted pod must be gone")
    except ApiException as e:
        expect(e.status == 404, "eviction deleted the pod")
    try:
        v1.create_namespaced_pod_eviction("e2", ns, eviction("e2"))
        expect(False, "second eviction must be refused")
    except ApiException as e:
        body = json.loads(e.body)
        expect(e.status == 429 and body["reason"] == "TooManyRequests" and
               body["details"]["causes"][0]["reason"] == "DisruptionBudget", "eviction past the budget is a 429")
    expect(policy.read_namespaced_pod_disruption_budget("evict-pdb", ns).status.disruptions_allowed == 0,
           "PDB status after the eviction")

    check_dra(api_client, ns, os.path.dirname(kubeconfig))

    # --- finalizer blocks deletion; ownerReferences garbage collection
    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="dependent", owner_references=[client.V1OwnerReference(
            api_version="v1", kind="ConfigMap", name="owner", uid=cm.metadata.uid)])))
    v1.delete_namespaced_config_map("owner", ns)
    try:
        v1.read_namespaced_config_map("dependent", ns)
        expect(False, "dependent must be garbage collected")
    except ApiException as e:
        expect(e.status == 404, "dependent garbage-collected after its owner")


def check_dra(api_client, ns, tmp):
    """resource.k8s.io/v1: discovery, a claim generated for a pod from its template, the
    status subresource, a slice field selector, a 422 and the claim going with its pod."""
    if hasattr(client, "ResourceV1Api"):
        print("python3-kubernetes %s has ResourceV1Api; DRA checked through the dynamic client all the same"
              % kubernetes.__version__)
    else:
        print("python3-kubernetes %s has no ResourceV1Api: DRA checked through its dynamic client"
              % kubernetes.__version__)
    # The discovery cache goes to the test's temporary directory, not a shared /tmp file.
    dyn = dynamic.DynamicClient(api_client, cache_file=os.path.join(tmp, "discovery.json"))
    res = {kind: dyn.resources.get(api_version="resource.k8s.io/v1", kind=kind)
           for kind in ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")}
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    expect([res[k].namespaced for k in sorted(res)] == [False, True, True, False],
           "DRA resources and their scopes found through discovery")

    res["DeviceClass"].create(body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.kubecomp.io"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.kubecomp.io"'}}]}})
    res["ResourceClaimTemplate"].create(namespace=ns, body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.kubecomp.io"}}]}}}})
    rv = res["ResourceClaim"].get(namespace=ns).metadata.resourceVersion
    # The typed V1PodSpec of this client has no resourceClaims: the pod goes as a dict.
    pod = pods.create(namespace=ns, body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-pod"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                 "containers": [{"name": "c", "image": "busybox:1.36", "resources": {"claims": [{"name": "gpu"}]}}]}})
    events = []
    for ev in dyn.watch(res["ResourceClaim"], namespace=ns, resource_version=rv, timeout=5):
        events.append((ev["type"], ev["object"].metadata.name))
        break
    claims = res["ResourceClaim"].get(namespace=ns).items
    expect(len(claims) == 1 and claims[0].metadata.name.startswith("gpu-pod-gpu-"), "one claim generated for the pod")
    claim = claims[0]
    expect(events == [("ADDED", claim.metadata.name)], "watch sees the generated claim: %s" % events)
    owner = claim.metadata.ownerReferences[0]
    expect(owner.kind == "Pod" and owner.uid == pod.metadata.uid and owner.controller and owner.blockOwnerDeletion,
           "the claim is controlled by the pod")
    expect(claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu", "pod-claim-name annotation")
    expect(claim.spec.devices.requests[0].exactly.allocationMode == "ExactCount" and
           claim.spec.devices.requests[0].exactly.count == 1, "v1 defaults on the claim")
    statuses = pods.get(namespace=ns, name="gpu-pod").status.resourceClaimStatuses
    expect([(s.name, s.resourceClaimName) for s in statuses] == [("gpu", claim.metadata.name)],
           "pod status records the claim")

    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.kubecomp.io", "pool": "node-1",
                                           "device": "gpu-0"}]}}
    res["ResourceClaim"].status.patch(namespace=ns, name=claim.metadata.name, content_type="application/merge-patch+json",
                                      body={"status": {"allocation": allocation}})
    got = res["ResourceClaim"].get(namespace=ns, name=claim.metadata.name)
    expect(got.status.allocation.devices.results[0].device == "gpu-0", "claim status written through /status")

    res["ResourceSlice"].create(body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-1-gpus"},
        "spec": {"driver": "gpu.kubecomp.io", "nodeName": "node-1",
                 "pool": {"name": "node-1", "generation": 0, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "H100"}}}]}})
    on_node = res["ResourceSlice"].get(field_selector="spec.nodeName=node-1").items
    elsewhere = res["ResourceSlice"].get(field_selector="spec.nodeName=node-2").items
    expect([s.metadata.name for s in on_node] == ["node-1-gpus"] and not elsewhere, "slices by spec.nodeName")
    try:
        res["ResourceSlice"].create(body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "bad"},
            "spec": {"driver": "gpu.kubecomp.io", "allNodes": True, "nodeName": "node-1",
                     "pool": {"name": "p", "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}})
        expect(False, "a slice with two node selections must be refused")
    except ApiException as e:
        status = json.loads(e.body)
        expect(e.status == 422 and status["reason"] == "Invalid" and status["details"]["causes"][0]["field"] == "spec",
               "invalid slice is a 422 naming the field")

    pods.delete(namespace=ns, name="gpu-pod")
    expect(not res["ResourceClaim"].get(namespace=ns).items, "the generated claim went with its pod")


if __name__ == "__main__":
    main()
