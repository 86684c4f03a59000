"""One workload on one cluster setting: submit the jobs as Pods at their (scaled) arrival
times, watch them through the API, and time every phase on this side of the wire."""
import threading
import time

from kubernetes import client, watch

NAMESPACE = "default"


DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"
DEVICE_CLASS = "gpu.kubecomp.io"  # the chart's DeviceClass (charts/kubecomp/templates/dra-deviceclass.yaml)


def claim_name(job):
    return job.pod_name + "-gpu"


def claim_body(job):
    """The job's ResourceClaim on the DRA path: its GPUs from the chart's DeviceClass."""
    return {"apiVersion": f"{DRA_GROUP}/{DRA_VERSION}", "kind": "ResourceClaim",
            "metadata": {"name": claim_name(job), "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/part-of": "kubecomp-demo"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": job.gpus}}]}}}


def pod_body(job, path="device-plugin"):
    cpu, gpus = str(int(job.cpu)), str(job.gpus)
    if path == "dra":
        # The GPUs come from the job's claim; the container names it.
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": job.pod_name, "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/part-of": "kubecomp-demo", "kubecomp.io/job-type": job.kind},
                         "annotations": {"kubecomp.io/run-seconds": f"{job.duration_s:g}"}},
            "spec": {"schedulerName": "kubecomp-sched", "restartPolicy": "Never",
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name(job)}],
                     "containers": [{"name": "job", "image": "busybox:stable", "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu},
                                                   "claims": [{"name": "gpu"}]}}]},
        }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": job.pod_name, "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/part-of": "kubecomp-demo", "kubecomp.io/job-type": job.kind},
                     "annotations": {"kubecomp.io/run-seconds": f"{job.duration_s:g}"}},
        "spec": {"schedulerName": "kubecomp-sched", "restartPolicy": "Never",
                 "containers": [{"name": "job", "image": "busybox:stable", "command": ["sleep", "infinity"],
                                 "resources": {"requests": {"cpu": cpu, "kubecomp.io/gpu": gpus},
                                               "limits": {"cpu": cpu, "kubecomp.io/gpu": gpus}}}]},
    }


class PodTimes:
    def __init__(self):
        self.submitted = None
        self.running = None
        self.finished = None
        self.phase = "Pending"
        self.node = ""
        self.reason = ""


class Watcher(threading.Thread):
    """Records, per pod, the monotonic time this process first saw it Running and finished."""

    def __init__(self, core, names):
        super().__init__(daemon=True)
        self.core = core
        self.times = {n: PodTimes() for n in names}
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.error = None

    def run(self):
        rv = None
        try:
            while not self.stop_flag.is_set():
                w = watch.Watch()
                try:
                    for ev in w.stream(self.core.list_namespaced_pod, NAMESPACE, resource_version=rv,
                                       timeout_seconds=5, allow_watch_bookmarks=True):
                        obj = ev["object"]
                        if isinstance(obj, dict):  # BOOKMARK or ERROR: not decoded into a V1Pod
                            if ev["type"] == "ERROR" and obj.get("code") == 410:
                                rv = None
                                break
                            rv = obj.get("metadata", {}).get("resourceVersion", rv)
                            continue
                        rv = obj.metadata.resource_version
                        self._see(obj)
                        if self.stop_flag.is_set():
                            break
                except client.ApiException as e:
                    if e.status == 410:
                        rv = None
                        continue
                    raise
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def _see(self, pod):
        now = time.monotonic()
        with self.lock:
            t = self.times.get(pod.metadata.name)
            if t is None:
                return
            phase = pod.status.phase if pod.status else "Pending"
            t.phase = phase
            t.node = pod.spec.node_name or ""
            if phase in ("Running", "Succeeded", "Failed") and t.running is None:
                t.running = now
            if phase in ("Succeeded", "Failed") and t.finished is None:
                t.finished = now
            for c in (pod.status.conditions or []) if pod.status else []:
                if c.type == "PodScheduled" and c.status == "False":
                    t.reason = f"{c.reason}: {c.message}"

    def snapshot(self):
        with self.lock:
            return {n: (t.submitted, t.running, t.finished, t.phase) for n, t in self.times.items()}


def release_claims(stack, jobs, snap, released):
    """What Kubernetes' resourceclaim controller does for a pod's own claim: once the pod has
    finished, the claim goes, and with it the allocation that held its GPUs."""
    for j in jobs:
        if j.pod_name in released or snap[j.pod_name][2] is None:
            continue
        try:
            stack.custom.delete_namespaced_custom_object(DRA_GROUP, DRA_VERSION, NAMESPACE,
                                                         "resourceclaims", claim_name(j))
        except client.ApiException as e:
            if e.status != 404:
                raise
        released.add(j.pod_name)


def run_workload(stack, jobs, scale, progress, stall_s):
    """Submits `jobs` at arrival/scale seconds and returns per-job results in paper seconds.

    The run ends when every pod has finished, or when nothing has changed for `stall_s` wall
    seconds while no pod runs (the pods still Pending then could never run: counted and kept
    with the scheduler's reason)."""
    core = stack.core
    watcher = Watcher(core, [j.pod_name for j in jobs])
    watcher.start()
    t0 = time.monotonic()
    pending = sorted(jobs, key=lambda j: j.arrival_s)
    released = set()  # jobs whose claim was deleted (DRA path)
    last_change, last_snap = time.monotonic(), None
    while True:
        now = time.monotonic()
        while pending and now - t0 >= pending[0].arrival_s / scale:
            job = pending.pop(0)
            with watcher.lock:
                watcher.times[job.pod_name].submitted = time.monotonic()
            if stack.path == "dra":
                stack.custom.create_namespaced_custom_object(DRA_GROUP, DRA_VERSION, NAMESPACE,
                                                             "resourceclaims", claim_body(job))
            core.create_namespaced_pod(NAMESPACE, pod_body(job, stack.path))
        if watcher.error:
            raise watcher.error
        stack.sup.check_alive()
        snap = watcher.snapshot()
        done = sum(1 for s in snap.values() if s[2] is not None)
        running = sum(1 for s in snap.values() if s[1] is not None and s[2] is None)
        submitted = len(jobs) - len(pending)
        progress(submitted, running, done, (now - t0) * scale)
        if stack.path == "dra":
            release_claims(stack, jobs, snap, released)
        if snap != last_snap:
            last_snap, last_change = snap, now
        if not pending and done == len(jobs):
            break
        if not pending and running == 0 and now - last_change > stall_s:
            break
        time.sleep(0.02)
    watcher.stop_flag.set()
    results = []
    with watcher.lock:
        for j in jobs:
            t = watcher.times[j.pod_name]
            row = {"id": j.id, "type": j.kind, "gpus": j.gpus, "arrival_s": j.arrival_s,
                   "node": t.node, "phase": t.phase}
            if t.running is not None:
                row["wait_s"] = (t.running - t.submitted) * scale
            if t.finished is not None:
                row["jct_s"] = (t.finished - t.submitted) * scale
            if t.running is None:
                row["reason"] = t.reason
            results.append(row)
    return results
