#!/usr/bin/env python3
"""The kubecomp chart, rendered offline by tools/chart-render with every toggle combination.

render mode (label deploy): every combination renders, passes yamllint, and obeys the
deployment rules below (least-privilege RBAC, probes, limits, non-root, PDBs, TLS, toggles
that really toggle); every flag the chart passes to a daemon is one its --help lists. The node
agent's options (gpuPooling.devplugin.mode, hostCheck, hotRemove, rescanAfterSeconds,
deviceListStrategy) render exactly the host mounts, flags, capabilities and ResourceClaim
rule docs/deploy.md lists for them, and the invalid ones are refused at render time.
Least privilege (issue 24): Secrets only by name (reconfig-mgr exactly its credentialsSecrets),
no ServiceAccount token Secret (the shim's host service gets a projected, expiring token through
its token writer), a NetworkPolicy in front of each webhook admitting exactly Metacontroller and
the metrics scraper, every node DaemonSet on the nodes its values' nodeSelector labels, and a
ValidatingAdmissionPolicy (bound with Deny) per daemon and kind it patches, matching exactly its
ServiceAccount (global.admissionPolicies; what they admit: admission_policy_test.py).
apply mode (labels deploy, real-peer): the CRDs and the everything-on rendering are applied
with the real kubectl to the API test double, twice (the second apply must change nothing),
and every rendered object is read back; then the node agent in DRA mode with both host
actions, whose mounts, security context and rules must read back as rendered.

The rule checker is itself checked first on objects that break each rule, so a checker that
stops finding anything fails the test.
"""
import argparse
import atexit
import concurrent.futures
import copy
import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

NAMESPACE = "kubecomp"
RELEASE = "kubecomp"

# Toggles whose every combination is rendered. The first group switches components on and
# off; the second changes how they are deployed.
COMPONENT_TOGGLES = [
    "gpuPooling.scheduler.enabled",
    "gpuPooling.reconfig.enabled",
    "gpuPooling.devplugin.enabled",
    "gpuPooling.samplePool.enabled",
    "vni.enabled",
    "bridge.enabled",
    "rt.shim.enabled",
]
OPTION_TOGGLES = [
    "global.certManager.enabled",
    "global.monitoring.serviceMonitor.enabled",
    "global.monitoring.scrapeAnnotations",
    "metacontroller.rbac.enabled",
    "vni.tls.enabled",
    "bridge.tls.enabled",
]

# Component toggle -> (kind, app.kubernetes.io/name) of the object it must add.
TOGGLED_OBJECT = {
    "gpuPooling.scheduler.enabled": ("Deployment", "kubecomp-sched"),
    "gpuPooling.reconfig.enabled": ("Deployment", "reconfig-mgr"),
    "gpuPooling.devplugin.enabled": ("DaemonSet", "disaggpu-devplugin"),
    "gpuPooling.samplePool.enabled": ("GPUPool", "gpupool"),
    "gpuPooling.dra.enabled": ("DeviceClass", "dra-deviceclass"),
    "vni.enabled": ("Deployment", "vni-webhook"),
    "bridge.enabled": ("Deployment", "bridge-operator"),
    "rt.shim.enabled": ("DaemonSet", "rt-kubelet-shim"),
}
# Daemons that Metacontroller calls, with the values holding their TLS settings.
WEBHOOKS = {"vni-webhook": "vni", "bridge-operator": "bridge"}

# Workloads allowed to run as root with host paths, and exactly which (docs/deploy.md says
# why). The device plugin's depend on its values: devplugin_expected below.
DEVPLUGIN = "disaggpu-devplugin"
HOST_ACCESS = {
    # kubelet dials the shim's socket; it dials the runtime's; it writes cgroup v1 RT budgets.
    "rt-kubelet-shim": {"/var/run/rt-kubelet-shim", "/run/containerd", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuset"},
    # rt.shim.hostService: it copies its projected token into the host service's token directory.
    "rt-kubelet-shim-token": {"/var/lib/kubecomp/rt-kubelet-shim"},
}
# Workloads that run a shell loop in a daemon's image rather than a daemon: app -> container.
# No daemon flags (a /bin/sh command, no args), exec probes, no metrics.
HELPERS = {"rt-kubelet-shim-token": "token-writer"}
# The shim's host service gets its API token from this DaemonSet (no token Secret).
SHIM_TOKEN_WRITER = "rt-kubelet-shim-token"
# Node daemons (UID 0, host paths): app -> the values holding the nodeSelector they must carry.
# Its default must select nodes by a kubecomp.io/ label (docs/deploy.md).
NODE_SELECTORS = {
    DEVPLUGIN: "gpuPooling.devplugin.nodeSelector",
    "rt-kubelet-shim": "rt.shim.nodeSelector",
    SHIM_TOKEN_WRITER: "rt.shim.nodeSelector",
}
# A projected ServiceAccount token must expire within this (3607 s is the lifetime the API
# server silently extends to a year for legacy clients).
MAX_TOKEN_SECONDS = 86400
LEGACY_TOKEN_SECONDS = 3607
# Capabilities the device plugin adds with hotRemove (docs/deploy.md, section 5): reading
# /proc/<pid>/fd of processes of other users (DAC_READ_SEARCH) with capabilities it lacks
# (SYS_PTRACE). Nothing else, in no mode, adds a capability or runs privileged.
HOT_REMOVE_CAPS = {"SYS_PTRACE", "DAC_READ_SEARCH"}
# The device plugin's option values rendered in every valid combination (devplugin_option_sets).
DEVPLUGIN_OPTIONS = {
    "gpuPooling.devplugin.mode": ["device-plugin", "dra"],
    "gpuPooling.devplugin.hostCheck": [True, False],
    "gpuPooling.devplugin.hotRemove": [False, True],
    "gpuPooling.devplugin.rescanAfterSeconds": [0, 30],
    "gpuPooling.devplugin.deviceListStrategy": ["envvar", "cdi-cri"],
}
FORBIDDEN_ROLES = {"cluster-admin", "admin", "edit"}
FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate"}

docSeparator = re.compile(r"^---[ \t]*$", re.M)
YAMLLINT_CONFIG = ("{extends: default, rules: {line-length: {max: 160}, document-start: disable, "
                   "comments-indentation: disable}}")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def get(obj, *path, default=None):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


def lookup(values, dotted):
    for key in dotted.split("."):
        values = values[key]
    return values


def app_name(obj):
    return get(obj, "metadata", "labels", "app.kubernetes.io/name", default="")


# ---------------------------------------------------------------------------------------------
# The rules. Each returns a list of violations (strings); empty means the rendering is fine.

def rbac_violations(docs):
    out = []
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        if kind in ("Role", "ClusterRole"):
            if "aggregationRule" in d:
                out.append(f"{kind}/{name}: aggregationRule (its rules are not visible here)")
            for i, rule in enumerate(d.get("rules") or []):
                for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                    for item in rule.get(field) or []:
                        if "*" in str(item):
                            out.append(f"{kind}/{name} rule {i}: wildcard in {field}: {item}")
                for verb in rule.get("verbs") or []:
                    if verb in FORBIDDEN_VERBS and verb != "*":
                        out.append(f"{kind}/{name} rule {i}: verb {verb}")
                if not rule.get("verbs"):
                    out.append(f"{kind}/{name} rule {i}: no verbs")
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = get(d, "roleRef", "name", default="")
            if ref in FORBIDDEN_ROLES or ref.startswith("system:"):
                out.append(f"{kind}/{name}: binds the built-in role {ref}")
            for s in d.get("subjects") or []:
                if s.get("kind") == "Group" and s.get("name", "").startswith("system:"):
                    out.append(f"{kind}/{name}: binds the group {s['name']}")
    return out


def pod_spec(d):
    return get(d, "spec", "template", "spec", default={})


def devplugin_expected(values):
    """What the device plugin's values must render (docs/deploy.md, section 5): host path ->
    (mount path, read-only), the capabilities it adds, its flags (name -> value, None for a bare
    flag; the serving and log flags apart), and whether it may GET ResourceClaims."""
    d = values["gpuPooling"]["devplugin"]
    dra = d["mode"] == "dra"
    cdi = dra or d["deviceListStrategy"] == "cdi-cri"
    rescan = float(d["rescanAfterSeconds"]) > 0
    hot = bool(d["hotRemove"])
    mounts, flags = {}, {"--mode": d["mode"]}
    if dra:
        mounts[d["pluginsRegistryDir"]] = (d["pluginsRegistryDir"], False)
        mounts[d["draPluginDir"]] = (d["draPluginDir"], False)
        flags.update({"--plugins-registry-dir": d["pluginsRegistryDir"], "--dra-plugin-dir": d["draPluginDir"]})
    else:
        mounts[d["devicePluginDir"]] = (d["devicePluginDir"], False)
        mounts[d["podResourcesDir"]] = (d["podResourcesDir"], True)
        flags.update({"--device-plugin-dir": d["devicePluginDir"],
                      "--pod-resources-socket": d["podResourcesDir"] + "/kubelet.sock",
                      "--pod-resources-interval-seconds": str(d["podResourcesIntervalSeconds"]),
                      "--resource-name": d["resourceName"], "--device-list-strategy": d["deviceListStrategy"]})
    if cdi:
        mounts[d["cdiSpecDir"]] = (d["cdiSpecDir"], False)
        flags["--cdi-spec-dir"] = d["cdiSpecDir"]
    flags["--host-check"] = "true" if d["hostCheck"] else "false"
    if d["hostCheck"]:
        # Read-only unless an opt-in host action writes there; only /proc/driver unless
        # hotRemove must see every process; the host's /dev only for CDI specs.
        mounts["/sys/bus/pci"] = ("/host/sys/bus/pci", not rescan)
        mounts["/sys/devices"] = ("/host/sys/devices", not hot)
        if hot:
            mounts["/proc"] = ("/host/proc", True)
        else:
            mounts["/proc/driver"] = ("/host/proc/driver", True)
        flags.update({"--sysfs-root": "/host/sys", "--procfs-root": "/host/proc",
                      "--host-scan-interval-seconds": str(d["hostScanIntervalSeconds"])})
        if cdi:
            mounts["/dev"] = ("/host/dev", True)
            flags["--dev-root"] = "/host/dev"
    if hot:
        flags["--hot-remove"] = None
    if rescan:
        flags["--rescan-after-seconds"] = str(d["rescanAfterSeconds"])
    return {"mounts": mounts, "caps": HOT_REMOVE_CAPS if hot else set(), "flags": flags, "claims": dra}


SERVING_FLAGS = {"--bind-address", "--port", "--log-level", "--log-format"}


def devplugin_violations(docs, values):
    """The device plugin's DaemonSet and ClusterRole against devplugin_expected: exactly these
    host mounts (path, where, read-only or not), these flags, these capabilities, and `get`
    on resourceclaims exactly in DRA mode."""
    out = []
    if not values["gpuPooling"]["devplugin"]["enabled"]:
        return out
    want = devplugin_expected(values)
    for ds in (d for d in docs if d["kind"] == "DaemonSet" and app_name(d) == DEVPLUGIN):
        spec = pod_spec(ds)
        c = (spec.get("containers") or [{}])[0]
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        got = {}
        for m in c.get("volumeMounts") or []:
            v = volumes.get(m.get("name"), {})
            if "hostPath" in v:
                got[v["hostPath"].get("path")] = (m.get("mountPath"), m.get("readOnly") is True)
        for path in sorted(set(got) | set(want["mounts"])):
            if got.get(path) != want["mounts"].get(path):
                out.append(f"{DEVPLUGIN}: host path {path} mounted as {got.get(path)} (mount path, read-only), "
                           f"want {want['mounts'].get(path)}")
        mounted = {m.get("name") for m in c.get("volumeMounts") or []}
        for name in sorted(mounted - set(volumes)):
            out.append(f"{DEVPLUGIN}: volumeMount {name} names no volume")
        for name, v in volumes.items():
            if "hostPath" in v and name not in mounted:
                out.append(f"{DEVPLUGIN}: hostPath volume {name} is not mounted")
        flags = {}
        for a in c.get("args") or []:
            name, eq, value = a.partition("=")
            if name not in SERVING_FLAGS:
                flags[name] = value if eq else None
        if flags != want["flags"]:
            extra = {k: v for k, v in flags.items() if want["flags"].get(k, "?") != v}
            missing = {k: v for k, v in want["flags"].items() if flags.get(k, "?") != v}
            out.append(f"{DEVPLUGIN}: flags differ: rendered {extra}, want {missing}")
        add = set(get(c, "securityContext", "capabilities", "add", default=[]) or [])
        if add != want["caps"]:
            out.append(f"{DEVPLUGIN}: adds capabilities {sorted(add)}, want {sorted(want['caps'])}")
    for role in (d for d in docs if d["kind"] == "ClusterRole" and app_name(d) == DEVPLUGIN):
        dra_rules = [r for r in role.get("rules") or [] if "resource.k8s.io" in (r.get("apiGroups") or [])]
        want_rules = ([{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}]
                      if want["claims"] else [])
        if dra_rules != want_rules:
            out.append(f"{DEVPLUGIN}: resource.k8s.io rules {dra_rules}, want {want_rules}")
    return out


def workload_violations(docs, values):
    out = []
    devplugin = devplugin_expected(values) if values["gpuPooling"]["devplugin"]["enabled"] else None
    workloads = [d for d in docs if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet")]
    accounts = {}
    bound = set()
    for d in docs:
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for s in d.get("subjects") or []:
                if s.get("kind") == "ServiceAccount":
                    bound.add((s.get("namespace"), s.get("name")))
    for w in workloads:
        where = f"{w['kind']}/{w['metadata']['name']}"
        app = app_name(w)
        spec = pod_spec(w)
        sa = spec.get("serviceAccountName", "")
        if sa in ("", "default"):
            out.append(f"{where}: no ServiceAccount of its own")
        elif sa in accounts:
            out.append(f"{where}: shares ServiceAccount {sa} with {accounts[sa]}")
        else:
            accounts[sa] = where
            if not any(d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa for d in docs):
                out.append(f"{where}: ServiceAccount {sa} is not rendered")
            if (w["metadata"].get("namespace"), sa) not in bound and spec.get("automountServiceAccountToken") is not False:
                out.append(f"{where}: mounts an API token although {sa} is bound to no role")
        psc = spec.get("securityContext") or {}
        host = set(devplugin["mounts"]) if app == DEVPLUGIN and devplugin else HOST_ACCESS.get(app)
        caps = devplugin["caps"] if app == DEVPLUGIN and devplugin else set()
        if host is None and psc.get("runAsNonRoot") is not True:
            out.append(f"{where}: pod not runAsNonRoot")
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(flag):
                out.append(f"{where}: {flag}")
        for v in spec.get("volumes") or []:
            if "hostPath" in v:
                path = v["hostPath"].get("path")
                if host is None or path not in host:
                    out.append(f"{where}: hostPath {path} not allowed")
        if w["kind"] == "DaemonSet" and not spec.get("priorityClassName"):
            out.append(f"{where}: node daemon without priorityClassName")
        ports = set()
        for c in spec.get("containers") or []:
            cw = f"{where} container {c.get('name')}"
            for p in c.get("ports") or []:
                ports.add(str(p.get("containerPort")))
            if HELPERS.get(app) == c.get("name"):
                for probe in ("livenessProbe", "readinessProbe"):
                    if not get(c, probe, "exec", "command"):
                        out.append(f"{cw}: no exec {probe}")
            else:
                if get(c, "livenessProbe", "httpGet", "path") != "/livez":
                    out.append(f"{cw}: no livenessProbe on /livez")
                if get(c, "readinessProbe", "httpGet", "path") != "/readyz":
                    out.append(f"{cw}: no readinessProbe on /readyz")
            for part, keys in (("requests", ("cpu", "memory")), ("limits", ("memory",))):
                for k in keys:
                    if not get(c, "resources", part, k):
                        out.append(f"{cw}: no resources.{part}.{k}")
            sc = c.get("securityContext") or {}
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append(f"{cw}: allowPrivilegeEscalation not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                out.append(f"{cw}: root file system not read-only")
            if sc.get("privileged"):
                out.append(f"{cw}: privileged")
            if "ALL" not in (get(sc, "capabilities", "drop", default=[]) or []):
                out.append(f"{cw}: capabilities not dropped")
            added = set(get(sc, "capabilities", "add", default=[]) or [])
            if added - caps:
                out.append(f"{cw}: adds capabilities {sorted(added - caps)}")
        ann = get(w, "spec", "template", "metadata", "annotations", default={}) or {}
        if ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") not in ports:
            out.append(f"{where}: scrape annotation names port {ann.get('prometheus.io/port')}, not a container port")
        if w["kind"] == "Deployment":
            labels = get(w, "spec", "template", "metadata", "labels", default={})
            pdbs = [p for p in docs if p["kind"] == "PodDisruptionBudget"
                    and get(p, "metadata", "namespace") == w["metadata"].get("namespace")
                    and get(p, "spec", "selector", "matchLabels", default={}).items() <= labels.items()]
            if not pdbs:
                out.append(f"{where}: no PodDisruptionBudget selects its pods")
    return out


def toggle_violations(docs, values):
    out = []
    host_service = values["rt"]["shim"]["hostService"]
    for toggle, (kind, app) in TOGGLED_OBJECT.items():
        present = any(d["kind"] == kind and app_name(d) == app for d in docs)
        wanted = bool(lookup(values, toggle)) and not (toggle == "rt.shim.enabled" and host_service)
        if present != wanted:
            out.append(f"{toggle}={lookup(values, toggle)} but {kind} {app} is {'' if present else 'not '}rendered")
    writers = [d for d in docs if d["kind"] == "DaemonSet" and app_name(d) == SHIM_TOKEN_WRITER]
    if bool(writers) != bool(values["rt"]["shim"]["enabled"] and host_service):
        out.append(f"rt.shim.hostService={host_service} but the shim's token writer is {'' if writers else 'not '}rendered")
    shim_accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount" and app_name(d) == "rt-kubelet-shim"}
    for w in writers:
        spec = pod_spec(w)
        if spec.get("serviceAccountName") not in shim_accounts:
            out.append(f"token writer runs as {spec.get('serviceAccountName')}, not the shim's ServiceAccount")
        dirs = [get(v, "hostPath", "path") for v in spec.get("volumes") or [] if "hostPath" in v]
        if dirs != [values["rt"]["shim"]["tokenDir"]]:
            out.append(f"token writer's host paths {dirs}, want [rt.shim.tokenDir]")
        tokens = [s for v in spec.get("volumes") or [] for s in get(v, "projected", "sources", default=[]) or []
                  if "serviceAccountToken" in s]
        if len(tokens) != 1:
            out.append(f"token writer has {len(tokens)} projected ServiceAccount tokens, want 1")
    monitors = {d["metadata"]["name"] for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")}
    workloads = [d for d in docs if d["kind"] in ("Deployment", "DaemonSet") and app_name(d) not in HELPERS]
    if values["global"]["monitoring"]["serviceMonitor"]["enabled"]:
        for w in workloads:
            if w["metadata"]["name"] not in monitors:
                out.append(f"serviceMonitor on but {w['metadata']['name']} has no monitor")
    elif monitors:
        out.append(f"serviceMonitor off but monitors rendered: {sorted(monitors)}")
    scrape = values["global"]["monitoring"]["scrapeAnnotations"]
    for w in workloads:
        ann = get(w, "spec", "template", "metadata", "annotations", default={}) or {}
        if (ann.get("prometheus.io/scrape") == "true") != scrape:
            out.append(f"scrapeAnnotations={scrape} but {w['metadata']['name']} disagrees")
    mc = [d for d in docs if d["kind"] == "ClusterRoleBinding"
          and any(s.get("name") == values["metacontroller"]["rbac"]["serviceAccountName"] for s in d.get("subjects") or [])]
    want_mc = values["metacontroller"]["rbac"]["enabled"] and (values["vni"]["enabled"] or values["bridge"]["enabled"])
    if bool(mc) != bool(want_mc):
        out.append(f"Metacontroller binding rendered={bool(mc)}, expected {bool(want_mc)}")
    return out


def tls_violations(docs, values):
    out = []
    services = {(d["metadata"]["name"], d["metadata"].get("namespace")): d for d in docs if d["kind"] == "Service"}
    for ctl in (d for d in docs if d["kind"] in ("DecoratorController", "CompositeController")):
        app = app_name(ctl)
        tls = values[WEBHOOKS[app]]["tls"]
        hooks = get(ctl, "spec", "hooks", default={})
        if not hooks:
            out.append(f"{ctl['kind']}/{ctl['metadata']['name']}: no hooks")
        for hook, spec in hooks.items():
            url = get(spec, "webhook", "url", default="")
            m = re.fullmatch(r"(https?)://([^.]+)\.([^.]+)\.svc:(\d+)/(\w+)", url)
            if not m:
                out.append(f"{app} {hook}: url {url!r} is not an in-cluster Service URL")
                continue
            scheme, svc, ns, port, path = m.groups()
            if (scheme == "https") != tls["enabled"]:
                out.append(f"{app} {hook}: scheme {scheme} with tls.enabled={tls['enabled']}")
            if path != hook:
                out.append(f"{app} {hook}: url path /{path}")
            s = services.get((svc, ns))
            if s is None:
                out.append(f"{app} {hook}: Service {ns}/{svc} is not rendered")
            elif int(port) not in [p.get("port") for p in get(s, "spec", "ports", default=[])]:
                out.append(f"{app} {hook}: Service {svc} has no port {port}")
            if tls["enabled"] and values["global"]["certManager"]["enabled"]:
                certs = [c for c in docs if c["kind"] == "Certificate"
                         and get(c, "spec", "secretName") == tls["secretName"]
                         and f"{svc}.{ns}.svc" in get(c, "spec", "dnsNames", default=[])]
                if not certs:
                    out.append(f"{app}: no Certificate for {svc}.{ns}.svc into Secret {tls['secretName']}")
        dep = [w for w in docs if w["kind"] == "Deployment" and app_name(w) == app]
        for w in dep:
            spec = pod_spec(w)
            args = " ".join(a for c in spec["containers"] for a in c.get("args") or [])
            secrets = [get(v, "secret", "secretName") for v in spec.get("volumes") or []]
            if tls["enabled"] != ("--tls-cert=" in args and "--tls-key=" in args):
                out.append(f"{app}: --tls-cert/--tls-key do not follow tls.enabled={tls['enabled']}")
            if tls["enabled"] != (tls["secretName"] in secrets):
                out.append(f"{app}: TLS Secret volume does not follow tls.enabled={tls['enabled']}")
            probe_scheme = get(spec["containers"][0], "readinessProbe", "httpGet", "scheme")
            if probe_scheme != ("HTTPS" if tls["enabled"] else "HTTP"):
                out.append(f"{app}: readiness probe scheme {probe_scheme} with tls.enabled={tls['enabled']}")
    if not values["global"]["certManager"]["enabled"] and any(d["kind"] == "Certificate" for d in docs):
        out.append("certManager off but a Certificate is rendered")
    return out


def flag_violations(docs, help_texts):
    out = []
    for w in (d for d in docs if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet")):
        for c in pod_spec(w).get("containers") or []:
            if HELPERS.get(app_name(w)) == c["name"]:
                # A shell loop, not a daemon: nothing the daemon's --help could vouch for.
                if c.get("args") or (c.get("command") or [""])[0] != "/bin/sh":
                    out.append(f"{c['name']}: a helper runs /bin/sh with no args, not {c.get('command')} {c.get('args')}")
                continue
            text = help_texts.get(c["name"])
            if text is None:
                out.append(f"container {c['name']}: no daemon binary of that name to check its flags")
                continue
            for a in c.get("args") or []:
                flag = a.split("=", 1)[0]
                if not flag.startswith("--") or not re.search(re.escape(flag) + r"\b", text):
                    out.append(f"{c['name']}: {flag} is not a flag of the daemon (--help)")
    return out


def secret_violations(docs, values):
    """Secrets (issue 24): no rule reads Secrets cluster-wide or without resourceNames, and only
    `get`; reconfig-mgr may get exactly gpuPooling.reconfig.credentialsSecrets in its secret
    namespace (and its caSecrets); no legacy ServiceAccount token Secret; every projected token expires soon."""
    out = []
    granted = set()
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        if kind not in ("Role", "ClusterRole"):
            continue
        for i, rule in enumerate(d.get("rules") or []):
            if "secrets" not in (rule.get("resources") or []) or "" not in (rule.get("apiGroups") or []):
                continue
            if kind == "ClusterRole":
                out.append(f"ClusterRole/{name} rule {i}: Secrets in every namespace")
            if not rule.get("resourceNames"):
                out.append(f"{kind}/{name} rule {i}: Secrets without resourceNames (every Secret of the namespace)")
            if set(rule.get("verbs") or []) - {"get"}:
                out.append(f"{kind}/{name} rule {i}: Secrets with verbs {rule.get('verbs')}, want [get]")
            if app_name(d) == "reconfig-mgr":
                granted |= {(d["metadata"].get("namespace"), n) for n in rule.get("resourceNames") or []}
    r = values["gpuPooling"]["reconfig"]
    want = set()
    if r["enabled"]:
        names = list(r["credentialsSecrets"]) + list(r.get("caSecrets") or [])
        want = {(r["secretNamespace"] or NAMESPACE, n) for n in names}
    if granted != want:
        out.append(f"reconfig-mgr may get Secrets {sorted(granted, key=str)}, want {sorted(want)} "
                   "(credentialsSecrets and caSecrets)")
    for d in docs:
        if d["kind"] == "Secret" and d.get("type") == "kubernetes.io/service-account-token":
            out.append(f"Secret/{d['metadata']['name']}: a never-expiring ServiceAccount token")
        volumes = pod_spec(d).get("volumes") if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet") else None
        for v in volumes or []:
            for src in get(v, "projected", "sources", default=[]) or []:
                if "serviceAccountToken" in src:
                    secs = src["serviceAccountToken"].get("expirationSeconds")
                    if not isinstance(secs, int) or secs > MAX_TOKEN_SECONDS or secs == LEGACY_TOKEN_SECONDS:
                        out.append(f"{d['kind']}/{d['metadata']['name']}: projected token expirationSeconds {secs}")
    return out


def networkpolicy_violations(docs, values):
    """The webhooks Metacontroller calls (no credential): with global.networkPolicy.enabled each
    webhook pod is selected by a NetworkPolicy, and every policy selecting it admits exactly
    Metacontroller's pods and the metrics scraper (as values say) and only to the hook port."""
    out = []
    np = values["global"]["networkPolicy"]
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    if not np["enabled"]:
        return [f"networkPolicy off but NetworkPolicy/{p['metadata']['name']} rendered" for p in policies]
    mc = values["metacontroller"]
    allowed = [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": mc["rbac"]["namespace"]}},
         "podSelector": mc["podSelector"]},
        {"namespaceSelector": np["metricsScraper"]["namespaceSelector"], "podSelector": np["metricsScraper"]["podSelector"]},
    ]
    for w in (d for d in docs if d["kind"] == "Deployment" and app_name(d) in WEBHOOKS):
        labels = get(w, "spec", "template", "metadata", "labels", default={})
        ports = {p.get("containerPort") for c in pod_spec(w)["containers"] for p in c.get("ports") or []}
        mine = [p for p in policies if get(p, "metadata", "namespace") == w["metadata"].get("namespace")
                and (get(p, "spec", "podSelector", "matchLabels", default={}) or {}).items() <= labels.items()
                and not get(p, "spec", "podSelector", "matchExpressions")]
        where = f"{app_name(w)}"
        if not mine:
            out.append(f"{where}: no NetworkPolicy selects its pods (anyone in the cluster can call its hooks)")
        for p in mine:
            pw = f"{where} NetworkPolicy/{p['metadata']['name']}"
            if "Ingress" not in (get(p, "spec", "policyTypes", default=[]) or []):
                out.append(f"{pw}: no Ingress policyType")
            peers = []
            for i, rule in enumerate(get(p, "spec", "ingress", default=[]) or []):
                if not rule.get("from"):
                    out.append(f"{pw} rule {i}: admits every source")
                rule_ports = {x.get("port") for x in rule.get("ports") or []}
                if not rule_ports or not rule_ports <= ports or any(x.get("endPort") for x in rule.get("ports") or []):
                    out.append(f"{pw} rule {i}: ports {rule.get('ports')}, want some of {sorted(ports)}")
                peers += rule.get("from") or []
            for peer in peers:
                if peer not in allowed:
                    out.append(f"{pw}: admits {peer}, not Metacontroller or the metrics scraper")
            if allowed[0] not in peers:
                out.append(f"{pw}: does not admit Metacontroller")
    return out


def node_selector_violations(docs, values):
    """Node daemons run only where a node label selects them (values), never on every node."""
    out = []
    for ds in (d for d in docs if d["kind"] == "DaemonSet"):
        got = pod_spec(ds).get("nodeSelector") or {}
        if not got:
            out.append(f"DaemonSet/{ds['metadata']['name']}: no nodeSelector (every node)")
        path = NODE_SELECTORS.get(app_name(ds))
        if path is None:
            out.append(f"DaemonSet/{ds['metadata']['name']}: not a known node daemon")
        elif got != lookup(values, path):
            out.append(f"DaemonSet/{ds['metadata']['name']}: nodeSelector {got}, want {path} {lookup(values, path)}")
    return out


def expected_admission_policies(values):
    """Policy name -> (component, resource) that global.admissionPolicies must render."""
    if not values["global"]["admissionPolicies"]["enabled"]:
        return {}
    sched, out = values["gpuPooling"]["scheduler"], {}
    if sched["enabled"] and sched["devicePluginPath"] is not False:
        out["kubecomp-sched-pods"] = ("kubecomp-sched", "pods")
    if values["gpuPooling"]["devplugin"]["enabled"]:
        out[f"{RELEASE}-{DEVPLUGIN}-nodes"] = (DEVPLUGIN, "nodes")
    if values["rt"]["shim"]["enabled"]:
        out[f"{RELEASE}-rt-kubelet-shim-pods"] = ("rt-kubelet-shim", "pods")
        out[f"{RELEASE}-rt-kubelet-shim-nodes"] = ("rt-kubelet-shim", "nodes")
    return out


def admission_violations(docs, values):
    """The ValidatingAdmissionPolicies narrowing the daemons' patch (what they admit is
    admission_policy_test.py's): one per component and kind it patches, each bound with Deny,
    matching UPDATE of exactly that kind by exactly the component's ServiceAccount."""
    out = []
    want = expected_admission_policies(values)
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {get(d, "spec", "policyName"): d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    if set(policies) != set(want):
        out.append(f"admission policies {sorted(policies)}, want {sorted(want)}")
    if set(bindings) != set(policies):
        out.append(f"admission policy bindings for {sorted(bindings)}, want one for each of {sorted(policies)}")
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"], app_name(d)) for d in docs if d["kind"] == "ServiceAccount"}
    for name, (component, resource) in want.items():
        p, b = policies.get(name), bindings.get(name)
        if p is None or b is None:
            continue
        if get(b, "spec", "validationActions") != ["Deny"] or get(b, "spec", "matchResources") or get(p, "spec", "failurePolicy") != "Fail":
            out.append(f"admission policy {name}: not bound with Deny and failurePolicy Fail over every namespace")
        rules = get(p, "spec", "matchConstraints", "resourceRules", default=[])
        if rules != [{"apiGroups": [""], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": [resource]}]:
            out.append(f"admission policy {name} matches {rules}, want UPDATE of {resource}")
        users = [re.fullmatch(r"request\.userInfo\.username == 'system:serviceaccount:([^:']+):([^:']+)'", c["expression"])
                 for c in get(p, "spec", "matchConditions", default=[])]
        if len(users) != 1 or not users[0] or (users[0].group(1), users[0].group(2), component) not in accounts:
            out.append(f"admission policy {name} does not match exactly the ServiceAccount of {component}")
    return out


def all_violations(docs, values, help_texts):
    return (rbac_violations(docs) + workload_violations(docs, values) + toggle_violations(docs, values)
            + tls_violations(docs, values) + flag_violations(docs, help_texts) + devplugin_violations(docs, values)
            + secret_violations(docs, values) + networkpolicy_violations(docs, values)
            + node_selector_violations(docs, values) + admission_violations(docs, values))


# ---------------------------------------------------------------------------------------------

def set_text(value):
    """A value as --set reads it back (a YAML scalar, or a flow list of plain names)."""
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def render(renderer, chart, sets, extra=(), expect_ok=True):
    cmd = [renderer, "--namespace", NAMESPACE, "--release-name", RELEASE, *extra]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={set_text(v)}"]
    cmd.append(chart)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not expect_ok:
        return r
    if r.returncode != 0:
        fail(f"render {sets} failed:\n{r.stderr}")
    return r.stdout


def render_matrix(renderer, chart, combos):
    """One chart-render process for many toggle combinations (--set-matrix)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        for sets in combos:
            f.write(" ".join(f"{k}={set_text(v)}" for k, v in sets.items()) + "\n")
        f.flush()
        r = subprocess.run([renderer, "--namespace", NAMESPACE, "--release-name", RELEASE, "--set-matrix", f.name, chart],
                           capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"render of {len(combos)} combinations failed:\n{r.stderr}")
    parts = re.split(r"^# chart-render matrix \d+\n", r.stdout, flags=re.M)
    if parts[0] != "" or len(parts) != len(combos) + 1:
        fail(f"chart-render --set-matrix printed {len(parts) - 1} renderings for {len(combos)} lines")
    return parts[1:]


@functools.lru_cache(maxsize=None)
def chart_values(chart):
    with open(os.path.join(chart, "values.yaml")) as f:
        return yaml.load(f, Loader=LOADER)


def values_for(chart, sets):
    values = copy.deepcopy(chart_values(chart))
    for k, v in sets.items():
        keys = k.split(".")
        lookup(values, ".".join(keys[:-1]))[keys[-1]] = v
    return values


def self_check(base_docs, values, help_texts):
    """Every rule must catch its own breakage on an otherwise clean rendering."""
    def first(docs, kind, app=None):
        return next(d for d in docs if d["kind"] == kind and (app is None or app_name(d) == app))

    def container(docs, app):
        return pod_spec(first(docs, "Deployment" if app != "disaggpu-devplugin" else "DaemonSet", app))["containers"][0]

    mutations = {
        "wildcard verb": lambda ds: first(ds, "ClusterRole")["rules"][0].__setitem__("verbs", ["*"]),
        "wildcard resource": lambda ds: first(ds, "ClusterRole")["rules"][0].__setitem__("resources", ["*"]),
        "cluster-admin binding": lambda ds: first(ds, "ClusterRoleBinding")["roleRef"].__setitem__("name", "cluster-admin"),
        "escalate verb": lambda ds: first(ds, "ClusterRole")["rules"][0]["verbs"].append("escalate"),
        "no liveness": lambda ds: container(ds, "vni-webhook").pop("livenessProbe"),
        "readyz path": lambda ds: container(ds, "bridge-operator")["readinessProbe"]["httpGet"].__setitem__("path", "/healthz"),
        "no memory limit": lambda ds: container(ds, "vni-webhook")["resources"]["limits"].pop("memory"),
        "root pod": lambda ds: pod_spec(first(ds, "Deployment", "vni-webhook"))["securityContext"].__setitem__("runAsNonRoot", False),
        "writable root fs": lambda ds: container(ds, "disaggpu-devplugin")["securityContext"].__setitem__("readOnlyRootFilesystem", False),
        "privileged": lambda ds: container(ds, "disaggpu-devplugin")["securityContext"].__setitem__("privileged", True),
        "extra hostPath": lambda ds: pod_spec(first(ds, "DaemonSet"))["volumes"].append({"name": "x", "hostPath": {"path": "/"}}),
        "no priority class": lambda ds: pod_spec(first(ds, "DaemonSet")).pop("priorityClassName"),
        "no PDB": lambda ds: ds.remove(first(ds, "PodDisruptionBudget", "bridge-operator")),
        "shared account": lambda ds: pod_spec(first(ds, "Deployment", "bridge-operator")).__setitem__(
            "serviceAccountName", pod_spec(first(ds, "Deployment", "vni-webhook"))["serviceAccountName"]),
        "token without role": lambda ds: pod_spec(first(ds, "Deployment", "vni-webhook")).pop("automountServiceAccountToken"),
        "http hook under TLS": lambda ds: first(ds, "DecoratorController")["spec"]["hooks"]["sync"]["webhook"].__setitem__(
            "url", "http://kubecomp-vni-webhook.kubecomp.svc:8842/sync"),
        "hook to a missing Service": lambda ds: ds.remove(first(ds, "Service", "bridge-operator")),
        "unknown flag": lambda ds: container(ds, "bridge-operator")["args"].append("--no-such-flag=1"),
        "toggle ignored": lambda ds: ds.remove(first(ds, "DaemonSet")),
        "shim hostPath beyond its list": lambda ds: pod_spec(first(ds, "DaemonSet", "rt-kubelet-shim"))["volumes"].append(
            {"name": "x", "hostPath": {"path": "/var/lib/kubelet"}}),
    }

    def credentials_role(docs):
        return next(d for d in docs if d["kind"] == "Role" and app_name(d) == "reconfig-mgr"
                    and any("secrets" in r["resources"] for r in d["rules"]))

    def credentials_rule(docs):
        return next(r for r in credentials_role(docs)["rules"] if "secrets" in r["resources"])

    def policy(docs, app):
        return first(docs, "NetworkPolicy", app)

    mutations.update({
        # Secrets: reconfig-mgr gets exactly the credentials Secrets listed, by name.
        "reconfig-mgr Secret rule without resourceNames": lambda ds: credentials_rule(ds).pop("resourceNames"),
        "reconfig-mgr may get a webhook's TLS Secret": lambda ds: credentials_rule(ds)["resourceNames"].append(
            "vni-webhook-tls"),
        "reconfig-mgr may list Secrets": lambda ds: credentials_rule(ds)["verbs"].append("list"),
        "reconfig-mgr credentials in the release namespace": lambda ds: credentials_role(ds)["metadata"].__setitem__(
            "namespace", NAMESPACE),
        "Secrets in a ClusterRole": lambda ds: first(ds, "ClusterRole", "reconfig-mgr")["rules"].append(
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["chassis-a"], "verbs": ["get"]}),
        "a legacy token Secret": lambda ds: ds.append(
            {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "x", "namespace": NAMESPACE, "annotations": {"kubernetes.io/service-account.name": "x"}}}),
        # NetworkPolicies in front of the webhooks.
        "webhook without its NetworkPolicy": lambda ds: ds.remove(policy(ds, "vni-webhook")),
        "NetworkPolicy selecting other pods": lambda ds: policy(ds, "bridge-operator")["spec"]["podSelector"][
            "matchLabels"].__setitem__("app.kubernetes.io/name", "other"),
        "NetworkPolicy admitting every source": lambda ds: policy(ds, "vni-webhook")["spec"]["ingress"][0].pop("from"),
        "NetworkPolicy peer without podSelector": lambda ds: policy(ds, "vni-webhook")["spec"]["ingress"][0]["from"][0].pop(
            "podSelector"),
        "NetworkPolicy peer in any namespace": lambda ds: policy(ds, "bridge-operator")["spec"]["ingress"][0]["from"][0].pop(
            "namespaceSelector"),
        "NetworkPolicy with an ipBlock": lambda ds: policy(ds, "vni-webhook")["spec"]["ingress"][1]["from"].append(
            {"ipBlock": {"cidr": "0.0.0.0/0"}}),
        "NetworkPolicy on every port": lambda ds: policy(ds, "bridge-operator")["spec"]["ingress"][0].pop("ports"),
        "NetworkPolicy on another port": lambda ds: policy(ds, "bridge-operator")["spec"]["ingress"][1]["ports"][0].__setitem__(
            "port", 9999),
        "NetworkPolicy without Metacontroller": lambda ds: policy(ds, "vni-webhook")["spec"]["ingress"].pop(0),
        "a second NetworkPolicy admitting all": lambda ds: ds.append(
            {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "open", "namespace": NAMESPACE},
             "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}}),
        # Node daemons only on labelled nodes.
        "devplugin without nodeSelector": lambda ds: pod_spec(first(ds, "DaemonSet", DEVPLUGIN)).pop("nodeSelector"),
        "shim without nodeSelector": lambda ds: pod_spec(first(ds, "DaemonSet", "rt-kubelet-shim")).pop("nodeSelector"),
        "devplugin nodeSelector not the values'": lambda ds: pod_spec(first(ds, "DaemonSet", DEVPLUGIN)).__setitem__(
            "nodeSelector", {"kubernetes.io/os": "linux"}),
    })
    def vap(docs, app, kind="ValidatingAdmissionPolicy"):
        return first(docs, kind, app)

    mutations.update({
        # The admission policies narrowing the daemons' patch.
        "devplugin Node policy missing": lambda ds: ds.remove(vap(ds, DEVPLUGIN)),
        "sched policy unbound": lambda ds: ds.remove(vap(ds, "kubecomp-sched", "ValidatingAdmissionPolicyBinding")),
        "shim policy only warning": lambda ds: vap(ds, "rt-kubelet-shim", "ValidatingAdmissionPolicyBinding")["spec"].__setitem__(
            "validationActions", ["Warn"]),
        "sched policy for another account": lambda ds: vap(ds, "kubecomp-sched")["spec"]["matchConditions"][0].__setitem__(
            "expression", "request.userInfo.username == 'system:serviceaccount:kubecomp:kubecomp-reconfig-mgr'"),
        "devplugin policy ignoring failures": lambda ds: vap(ds, DEVPLUGIN)["spec"].__setitem__("failurePolicy", "Ignore"),
        "shim policy on the status only": lambda ds: vap(ds, "rt-kubelet-shim")["spec"]["matchConstraints"]["resourceRules"][0].__setitem__(
            "resources", ["nodes/status"]),
    })

    def devplugin_ds(docs):
        return first(docs, "DaemonSet", DEVPLUGIN)

    mutations.update({
        # The default rendering: the host view read-only, no privilege, no DRA rights.
        "devplugin /sys/devices writable by default": lambda ds: set_mount(devplugin_ds(ds), "/sys/devices", readOnly=False),
        "devplugin /sys/bus/pci writable by default": lambda ds: set_mount(devplugin_ds(ds), "/sys/bus/pci", readOnly=False),
        "devplugin all of /proc by default": lambda ds: set_host_path(devplugin_ds(ds), "/proc/driver", "/proc"),
        "devplugin host /dev without CDI": lambda ds: add_host_mount(devplugin_ds(ds), "/dev", "/host/dev"),
        "devplugin host view missing": lambda ds: drop_host_mount(devplugin_ds(ds), "/proc/driver"),
        "devplugin capability by default": lambda ds: container(ds, DEVPLUGIN)["securityContext"]["capabilities"].__setitem__(
            "add", ["SYS_PTRACE"]),
        "devplugin hostPID": lambda ds: pod_spec(devplugin_ds(ds)).__setitem__("hostPID", True),
        "devplugin --sysfs-root missing": lambda ds: drop_arg(devplugin_ds(ds), "--sysfs-root"),
        "devplugin --hot-remove by default": lambda ds: container(ds, DEVPLUGIN)["args"].append("--hot-remove"),
        "devplugin claims in device-plugin mode": lambda ds: first(ds, "ClusterRole", DEVPLUGIN)["rules"].append(
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}),
    })
    expect_caught(base_docs, values, help_texts, mutations)


def set_mount(ds, host_path, **fields):
    spec = pod_spec(ds)
    name = next(v["name"] for v in spec["volumes"] if get(v, "hostPath", "path") == host_path)
    next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == name).update(fields)


def set_host_path(ds, host_path, new_path):
    next(v for v in pod_spec(ds)["volumes"] if get(v, "hostPath", "path") == host_path)["hostPath"]["path"] = new_path


def add_host_mount(ds, host_path, mount_path, read_only=True):
    spec = pod_spec(ds)
    spec["volumes"].append({"name": "added", "hostPath": {"path": host_path, "type": "Directory"}})
    spec["containers"][0]["volumeMounts"].append({"name": "added", "mountPath": mount_path, "readOnly": read_only})


def drop_host_mount(ds, host_path):
    spec = pod_spec(ds)
    name = next(v["name"] for v in spec["volumes"] if get(v, "hostPath", "path") == host_path)
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != name]
    c = spec["containers"][0]
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != name]


def drop_arg(ds, flag):
    c = pod_spec(ds)["containers"][0]
    c["args"] = [a for a in c["args"] if a.split("=", 1)[0] != flag]


def expect_caught(base_docs, values, help_texts, mutations):
    problems = all_violations(base_docs, values, help_texts)
    if problems:
        fail("the self-check's own rendering breaks the rules:\n  " + "\n  ".join(problems))
    for what, mutate in mutations.items():
        docs = copy.deepcopy(base_docs)
        mutate(docs)
        if not all_violations(docs, values, help_texts):
            fail(f"the rule checker misses a broken rendering: {what}")
    print(f"rule checker: all {len(mutations)} broken renderings caught")


# The device plugin in DRA mode with both host actions: the rendering its mutations start from.
DEVPLUGIN_ALL_OPTIONS = {"gpuPooling.devplugin.mode": "dra", "gpuPooling.devplugin.hotRemove": True,
                         "gpuPooling.devplugin.rescanAfterSeconds": 30}


def self_check_devplugin_options(docs, values, help_texts):
    """DRA mode, hotRemove and rescan: exactly their mounts, flags, capabilities and rule."""
    def ds_of(ds):
        return next(d for d in ds if d["kind"] == "DaemonSet" and app_name(d) == DEVPLUGIN)

    def ctr(ds):
        return pod_spec(ds_of(ds))["containers"][0]

    def role(ds):
        return next(d for d in ds if d["kind"] == "ClusterRole" and app_name(d) == DEVPLUGIN)

    def claims_rule(ds):
        return next(r for r in role(ds)["rules"] if "resourceclaims" in r["resources"])

    d = values["gpuPooling"]["devplugin"]
    mutations = {
        "hotRemove without SYS_PTRACE": lambda ds: ctr(ds)["securityContext"]["capabilities"]["add"].remove("SYS_PTRACE"),
        "hotRemove without DAC_READ_SEARCH": lambda ds: ctr(ds)["securityContext"]["capabilities"]["add"].remove(
            "DAC_READ_SEARCH"),
        "hotRemove adding SYS_ADMIN": lambda ds: ctr(ds)["securityContext"]["capabilities"]["add"].append("SYS_ADMIN"),
        "hotRemove privileged": lambda ds: ctr(ds)["securityContext"].__setitem__("privileged", True),
        "hotRemove hostPID": lambda ds: pod_spec(ds_of(ds)).__setitem__("hostPID", True),
        "hotRemove with /sys/devices read-only": lambda ds: set_mount(ds_of(ds), "/sys/devices", readOnly=True),
        "hotRemove with /proc writable": lambda ds: set_mount(ds_of(ds), "/proc", readOnly=False),
        "hotRemove without all of /proc": lambda ds: set_host_path(ds_of(ds), "/proc", "/proc/driver"),
        "hotRemove without --hot-remove": lambda ds: drop_arg(ds_of(ds), "--hot-remove"),
        "rescan with /sys/bus/pci read-only": lambda ds: set_mount(ds_of(ds), "/sys/bus/pci", readOnly=True),
        "rescan without --rescan-after-seconds": lambda ds: drop_arg(ds_of(ds), "--rescan-after-seconds"),
        "host /dev writable": lambda ds: set_mount(ds_of(ds), "/dev", readOnly=False),
        "host /dev elsewhere": lambda ds: set_mount(ds_of(ds), "/dev", mountPath="/dev"),
        "DRA without the resourceclaims rule": lambda ds: role(ds)["rules"].remove(claims_rule(ds)),
        "DRA resourceclaims with list": lambda ds: claims_rule(ds)["verbs"].append("list"),
        "DRA resourceclaims/status": lambda ds: claims_rule(ds)["resources"].append("resourceclaims/status"),
        "DRA with the device-plugins mount": lambda ds: add_host_mount(ds_of(ds), d["devicePluginDir"], d["devicePluginDir"],
                                                                       read_only=False),
        "DRA with the pod-resources mount": lambda ds: add_host_mount(ds_of(ds), d["podResourcesDir"], d["podResourcesDir"]),
        "DRA without plugins_registry": lambda ds: drop_host_mount(ds_of(ds), d["pluginsRegistryDir"]),
        "DRA without its plugin dir": lambda ds: drop_host_mount(ds_of(ds), d["draPluginDir"]),
        "DRA plugin dir elsewhere in the pod": lambda ds: set_mount(ds_of(ds), d["draPluginDir"], mountPath="/plugin"),
        "DRA without the CDI spec dir": lambda ds: drop_host_mount(ds_of(ds), d["cdiSpecDir"]),
        "DRA CDI spec dir read-only": lambda ds: set_mount(ds_of(ds), d["cdiSpecDir"], readOnly=True),
        "DRA run as a device plugin": lambda ds: ctr(ds)["args"].__setitem__(
            ctr(ds)["args"].index("--mode=dra"), "--mode=device-plugin"),
        "DRA without --plugins-registry-dir": lambda ds: drop_arg(ds_of(ds), "--plugins-registry-dir"),
        "DRA with --device-plugin-dir": lambda ds: ctr(ds)["args"].append("--device-plugin-dir=" + d["devicePluginDir"]),
        "DRA without --dev-root": lambda ds: drop_arg(ds_of(ds), "--dev-root"),
    }
    expect_caught(docs, values, help_texts, mutations)


def devplugin_option_sets():
    """Every combination of DEVPLUGIN_OPTIONS, split into those the chart renders and those it
    must refuse (what the plugin would refuse at start: host actions, CDI and DRA mode without
    the host view)."""
    ok, refused = [], []
    for bits in itertools.product(*DEVPLUGIN_OPTIONS.values()):
        sets = dict(zip(DEVPLUGIN_OPTIONS, bits))
        needs_host = (sets["gpuPooling.devplugin.mode"] == "dra" or sets["gpuPooling.devplugin.hotRemove"]
                      or sets["gpuPooling.devplugin.rescanAfterSeconds"] > 0
                      or sets["gpuPooling.devplugin.deviceListStrategy"] == "cdi-cri")
        (refused if needs_host and not sets["gpuPooling.devplugin.hostCheck"] else ok).append(sets)
    return ok, refused


# The chassis credentials Secrets, in a namespace of their own: the renderings that list some.
CREDENTIALS = {"gpuPooling.reconfig.credentialsSecrets": ["chassis-a-credentials", "chassis-b-credentials"],
               "gpuPooling.reconfig.secretNamespace": "kubecomp-fabric"}


def self_check_host_service(docs, values, help_texts):
    """rt.shim.hostService: the shim's API token is a projected one, copied by a token writer on
    the RT nodes; no token Secret."""
    def writer(ds):
        return next(d for d in ds if d["kind"] == "DaemonSet" and app_name(d) == SHIM_TOKEN_WRITER)

    def token(ds):
        return next(s["serviceAccountToken"] for v in pod_spec(writer(ds))["volumes"]
                    for s in get(v, "projected", "sources", default=[]) if "serviceAccountToken" in s)

    def ctr(ds):
        return pod_spec(writer(ds))["containers"][0]

    mutations = {
        "no token writer": lambda ds: ds.remove(writer(ds)),
        "projected token without expiry": lambda ds: token(ds).pop("expirationSeconds"),
        "projected token for a year": lambda ds: token(ds).__setitem__("expirationSeconds", 365 * 86400),
        "projected token of the legacy lifetime": lambda ds: token(ds).__setitem__("expirationSeconds", LEGACY_TOKEN_SECONDS),
        "token writer without the projected token": lambda ds: pod_spec(writer(ds))["volumes"].__setitem__(
            0, {"name": "token", "emptyDir": {}}),
        "token writer without nodeSelector": lambda ds: pod_spec(writer(ds)).pop("nodeSelector"),
        "token writer on every GPU node instead": lambda ds: pod_spec(writer(ds)).__setitem__(
            "nodeSelector", lookup(values, NODE_SELECTORS[DEVPLUGIN])),
        "token writer writes /etc": lambda ds: next(v for v in pod_spec(writer(ds))["volumes"] if "hostPath" in v)[
            "hostPath"].__setitem__("path", "/etc"),
        "token writer under another account": lambda ds: pod_spec(writer(ds)).__setitem__("serviceAccountName", "default"),
        "token writer with daemon args": lambda ds: ctr(ds).__setitem__("args", ["--no-such-flag"]),
        "token writer without a liveness probe": lambda ds: ctr(ds).pop("livenessProbe"),
        "token writer privileged": lambda ds: ctr(ds)["securityContext"].__setitem__("privileged", True),
        "token writer with a token Secret too": lambda ds: ds.append(
            {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "kubecomp-rt-kubelet-shim-token", "namespace": NAMESPACE}}),
    }
    expect_caught(docs, values, help_texts, mutations)


def check_node_selectors(renderer, chart):
    """The node daemons' default nodeSelectors name kubecomp.io/ labels; an override (a values
    file that sets the default label to null, as Helm merges maps) is exactly what renders; an
    empty selector is refused, naming the value."""
    values = chart_values(chart)
    for app, path in NODE_SELECTORS.items():
        sel = lookup(values, path)
        if not sel or not all(k.startswith("kubecomp.io/") for k in sel):
            fail(f"{path} defaults to {sel}, want a kubecomp.io/ node label")
    other = {"example.org/pool": "a"}
    for path in sorted(set(NODE_SELECTORS.values())):
        apps = {app for app, p in NODE_SELECTORS.items() if p == path}
        cleared = dict.fromkeys(lookup(values, path))
        for shim_host in (False, True):
            sets = {"rt.shim.enabled": True, "rt.shim.hostService": shim_host}
            docs = load_docs(render(renderer, chart, sets, ["-f", values_file(path, dict(cleared, **other))]))
            rendered = {app_name(d): pod_spec(d).get("nodeSelector") for d in docs
                        if d["kind"] == "DaemonSet" and app_name(d) in apps}
            if not rendered or any(sel != other for sel in rendered.values()):
                fail(f"{path} set to {other} renders the node daemons with {rendered}")
            r = render(renderer, chart, sets, ["-f", values_file(path, cleared)], expect_ok=False)
            if r.returncode == 0 or path not in r.stderr:
                fail(f"the chart rendered an empty {path} (want a refusal naming it):\n{r.stderr}")
    print("node daemons: kubecomp.io/ node labels by default, overrides render exactly, empty selectors refused")


def values_file(path, value):
    """A temporary values file setting the dotted `path` to `value` (removed at exit)."""
    tree = node = {}
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    with f:
        yaml.safe_dump(tree, f)
    atexit.register(os.unlink, f.name)
    return f.name


def check_apparmor(renderer, chart):
    """gpuPooling.devplugin.appArmorProfile (a map: a values file, not --set) becomes the pod's
    securityContext.appArmorProfile, and nothing else changes."""
    profile = {"type": "Localhost", "localhostProfile": "kubecomp-devplugin"}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump({"gpuPooling": {"devplugin": {"appArmorProfile": profile}}}, f)
        f.flush()
        docs = load_docs(render(renderer, chart, {}, ["-f", f.name]))
    plain = load_docs(render(renderer, chart, {}))
    ds = [next(d for d in ds if d["kind"] == "DaemonSet" and app_name(d) == DEVPLUGIN) for ds in (docs, plain)]
    got = copy.deepcopy(ds[0])
    if pod_spec(got)["securityContext"].pop("appArmorProfile", None) != profile or got != ds[1]:
        fail(f"gpuPooling.devplugin.appArmorProfile {profile} is not the pod's appArmorProfile, alone")
    if "appArmorProfile" in pod_spec(ds[1])["securityContext"]:
        fail("appArmorProfile rendered although gpuPooling.devplugin.appArmorProfile is empty")


def check_refusals(renderer, chart):
    """Values the chart must refuse at render time, each with a message naming the value."""
    _, refused = devplugin_option_sets()
    cases = [(sets, "gpuPooling.devplugin.hostCheck") for sets in refused]
    cases += [
        ({"gpuPooling.devplugin.mode": "kubelet"}, "gpuPooling.devplugin.mode"),
        ({"gpuPooling.devplugin.mode": "DRA"}, "gpuPooling.devplugin.mode"),
        ({"gpuPooling.devplugin.deviceListStrategy": "volume-mounts"}, "gpuPooling.devplugin.deviceListStrategy"),
        ({"gpuPooling.devplugin.mode": "dra", "gpuPooling.dra.enabled": False}, "gpuPooling.dra.enabled"),
    ]
    for sets, needle in cases:
        r = render(renderer, chart, sets, expect_ok=False)
        if r.returncode == 0 or needle not in r.stderr:
            fail(f"the chart rendered {sets} (want a refusal naming {needle}):\n{r.stderr}")
    # Turning the device plugin off turns its checks off too: nothing is refused then.
    off = {"gpuPooling.devplugin.enabled": False, "gpuPooling.devplugin.mode": "kubelet"}
    if render(renderer, chart, off, expect_ok=False).returncode != 0:
        fail("a bad gpuPooling.devplugin.mode is refused with the device plugin off")
    print(f"refused {len(cases)} bad device-plugin value sets, each naming the value")


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def parse_document(text):
    # Parsed once per distinct document (thousands of renderings share a few dozen); the
    # rules only read the objects, and the self-check mutates deep copies.
    return yaml.load(text, Loader=LOADER)


def load_docs(text):
    return [d for d in (parse_document(part) for part in docSeparator.split(text)) if d is not None]


def run_render(args, help_texts):
    names = COMPONENT_TOGGLES + OPTION_TOGGLES
    lint_dir = tempfile.mkdtemp(prefix="chart-lint-")
    unique = {}
    try:
        combos = [dict(zip(names, bits)) for bits in itertools.product([False, True], repeat=len(names))]
        # The shim as a host service: every other component combination, options all off and all on.
        others = [t for t in COMPONENT_TOGGLES if t != "rt.shim.enabled"]
        for bits in itertools.product([False, True], repeat=len(others)):
            for opt in (False, True):
                sets = dict(zip(others, bits), **dict.fromkeys(OPTION_TOGGLES, opt))
                sets.update({"rt.shim.enabled": True, "rt.shim.hostService": True, "global.networkPolicy.enabled": opt},
                            **CREDENTIALS)
                combos.append(sets)
        # The device plugin's options: every valid combination, with everything else on and with
        # the device plugin alone.
        alone = dict(dict.fromkeys(names, False), **{"gpuPooling.devplugin.enabled": True})
        for opts in devplugin_option_sets()[0]:
            combos.append(dict(dict.fromkeys(names, True), **opts))
            combos.append(dict(alone, **opts))
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            chunks = [combos[i:i + 512] for i in range(0, len(combos), 512)]
            texts = [t for chunk in pool.map(lambda c: render_matrix(args.renderer, args.chart, c), chunks) for t in chunk]
        count = 0
        for sets, text in zip(combos, texts):
            problems = all_violations(load_docs(text), values_for(args.chart, sets), help_texts)
            if problems:
                fail(f"rendering with {sets}:\n  " + "\n  ".join(problems))
            # yamllint's rules hold per document: lint each distinct document once.
            for doc in docSeparator.split(text):
                if doc.strip():
                    unique.setdefault(hashlib.sha256(doc.encode()).hexdigest(), doc)
            count += 1
        with open(os.path.join(lint_dir, "documents.yaml"), "w") as f:
            f.write("".join("---\n" + doc.strip("\n") + "\n" for doc in unique.values()))
        print(f"rendered {count} toggle combinations ({len(unique)} distinct documents), every rule holds")

        everything = dict(dict.fromkeys(names, True), **CREDENTIALS)
        self_check(load_docs(render(args.renderer, args.chart, everything)), values_for(args.chart, everything), help_texts)
        host = dict(everything, **{"rt.shim.hostService": True})
        self_check_host_service(load_docs(render(args.renderer, args.chart, host)), values_for(args.chart, host), help_texts)
        # global.admissionPolicies off (clusters before 1.30): no policy, everything else as before.
        off = dict(everything, **{"global.admissionPolicies.enabled": False})
        off_docs = load_docs(render(args.renderer, args.chart, off))
        problems = all_violations(off_docs, values_for(args.chart, off), help_texts)
        kinds = {d["kind"] for d in off_docs}
        on_kinds = {d["kind"] for d in load_docs(render(args.renderer, args.chart, everything))}
        if problems or on_kinds - kinds != {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}:
            fail(f"global.admissionPolicies.enabled=false: removes {sorted(on_kinds - kinds)}; {problems}")
        print("global.admissionPolicies.enabled=false removes exactly the admission policies and their bindings")
        check_node_selectors(args.renderer, args.chart)
        options = dict(everything, **DEVPLUGIN_ALL_OPTIONS)
        self_check_devplugin_options(load_docs(render(args.renderer, args.chart, options)),
                                     values_for(args.chart, options), help_texts)
        check_refusals(args.renderer, args.chart)
        check_apparmor(args.renderer, args.chart)

        # yamllint over each distinct rendering, the chart's own YAML files and the CRDs.
        own = [os.path.join(args.chart, f) for f in ("Chart.yaml", "values.yaml")]
        own += [os.path.join(args.chart, "crds", f) for f in sorted(os.listdir(os.path.join(args.chart, "crds")))]
        own += [os.path.join(args.chart, "examples", f) for f in sorted(os.listdir(os.path.join(args.chart, "examples")))]
        r = subprocess.run(["yamllint", "-f", "parsable", "-d", YAMLLINT_CONFIG, lint_dir, *own],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("yamllint:\n" + r.stdout + r.stderr)
        print(f"yamllint clean: {len(unique)} distinct rendered documents and {len(own)} chart files")

        # The renderer refuses what Helm would silently accept here.
        bad = subprocess.run([args.renderer, "--set", "vni.nosuchkey=1", args.chart], capture_output=True, text=True)
        if bad.returncode == 0 or "nosuchkey" not in bad.stderr:
            fail("chart-render accepted --set of an undeclared value")
    finally:
        shutil.rmtree(lint_dir, ignore_errors=True)


def run_apply(args):
    tmp = tempfile.mkdtemp(prefix="chart-apply-")
    server = None
    try:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        log = open(os.path.join(tmp, "server.log"), "w")
        server = subprocess.Popen([args.apiserver, "--port", "0", "--token", "chart-test-token",
                                   "--kubeconfig-out", kubeconfig], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not (os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0):
            if server.poll() is not None or time.monotonic() > deadline:
                fail("the API test double did not start")
            time.sleep(0.05)
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=tmp)

        def kubectl(*a, stdin=None):
            r = subprocess.run(["kubectl", "--request-timeout=30s", *a], input=stdin, capture_output=True,
                               text=True, env=env)
            if r.returncode != 0:
                fail(f"kubectl {' '.join(a)}:\n{r.stdout}{r.stderr}\n--- server log\n" +
                     open(os.path.join(tmp, "server.log")).read()[-4000:])
            return r.stdout

        # The API test double serves no admissionregistration.k8s.io (docs/apiserver-double.md):
        # the admission policies are left out here; admission_policy_test.py decides requests with them.
        everything = dict(dict.fromkeys(COMPONENT_TOGGLES + OPTION_TOGGLES, True), **CREDENTIALS,
                          **{"global.admissionPolicies.enabled": False})
        rendered = render(args.renderer, args.chart, everything, ["--include-crds"])
        kubectl("apply", "-f", args.fixtures)
        kubectl("create", "namespace", NAMESPACE)
        kubectl("create", "namespace", CREDENTIALS["gpuPooling.reconfig.secretNamespace"])
        crds = [d for d in load_docs(rendered) if d["kind"] == "CustomResourceDefinition"]
        # CRDs first and served before the objects of their kinds (as helm install does).
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
        for c in crds:
            kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{c['metadata']['name']}")
        out = kubectl("apply", "-f", "-", stdin=rendered)
        docs = load_docs(rendered)
        created = out.count(" created")
        if created != len(docs) - len(crds) or len(out.splitlines()) != len(docs):
            fail(f"apply created {created} objects for {len(docs) - len(crds)} rendered (CRDs apart):\n{out}")

        def read_back():
            versions = {}
            for d in docs:
                ns = d["metadata"].get("namespace")
                api = d["apiVersion"]
                group = api.split("/")[0] if "/" in api else ""
                res = d["kind"].lower() + ("." + group if group else "")
                got = yaml.safe_load(kubectl("get", res, d["metadata"]["name"], *(["-n", ns] if ns else []), "-o", "yaml"))
                if got.get("kind") != d["kind"] or get(got, "metadata", "labels") != get(d, "metadata", "labels"):
                    fail(f"{d['kind']}/{d['metadata']['name']} read back differs")
                versions[(d["kind"], ns, d["metadata"]["name"])] = got["metadata"]["resourceVersion"]
            return versions

        first = read_back()
        # A second apply must change nothing. (kubectl still says "configured" for a
        # PodDisruptionBudget: its selector's patch strategy is replace, so the client always
        # sends it; the object's resourceVersion is what tells whether anything changed.)
        kubectl("apply", "-f", "-", stdin=rendered)
        changed = [k for k, v in read_back().items() if first[k] != v]
        if changed:
            fail(f"a second apply changed {changed}")
        # The shim as a host service: its token writer (a projected, expiring token) instead of
        # the shim's DaemonSet, and no token Secret.
        host_docs = load_docs(render(args.renderer, args.chart, dict(everything, **{"rt.shim.hostService": True})))
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(host_docs))
        if any(d["kind"] == "Secret" for d in host_docs):
            fail("the host-service rendering has a Secret")
        want = next(d for d in host_docs if d["kind"] == "DaemonSet" and app_name(d) == SHIM_TOKEN_WRITER)
        got = yaml.safe_load(kubectl("get", "daemonset.apps", want["metadata"]["name"], "-n", NAMESPACE, "-o", "yaml"))
        for key in ("volumes", "nodeSelector", "serviceAccountName", "automountServiceAccountToken"):
            if pod_spec(got).get(key) != pod_spec(want).get(key):
                fail(f"the shim's token writer reads back {key} as {pod_spec(got).get(key)}, want {pod_spec(want).get(key)}")
        # The device plugin in DRA mode with both host actions: its mounts, capabilities and
        # ResourceClaim rule as the API server keeps them.
        options = load_docs(render(args.renderer, args.chart, dict(everything, **DEVPLUGIN_ALL_OPTIONS)))
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(options))
        for kind, res in (("DaemonSet", "daemonset.apps"), ("ClusterRole", "clusterrole.rbac.authorization.k8s.io")):
            want = next(d for d in options if d["kind"] == kind and app_name(d) == DEVPLUGIN)
            ns = want["metadata"].get("namespace")
            got = yaml.safe_load(kubectl("get", res, want["metadata"]["name"], *(["-n", ns] if ns else []), "-o", "yaml"))
            for path in (("spec", "template", "spec", "volumes"), ("spec", "template", "spec", "containers", 0, "securityContext"),
                         ("spec", "template", "spec", "containers", 0, "volumeMounts"), ("rules",)):
                w, g = want, got
                for key in path:
                    w = w[key] if isinstance(w, list) or (isinstance(w, dict) and key in w) else None
                    g = g[key] if isinstance(g, list) or (isinstance(g, dict) and key in g) else None
                # Strategic merge keeps the earlier apply's list items in place (volumes by
                # name, mounts by path): the same items, in any order.
                if isinstance(w, list) and isinstance(g, list):
                    w, g = (sorted(x, key=lambda i: json.dumps(i, sort_keys=True)) for x in (w, g))
                if w != g:
                    fail(f"{kind} {DEVPLUGIN} in DRA mode with hotRemove reads back {'.'.join(map(str, path))} as {g}, want {w}")
        print(f"kubectl applied {len(docs)} objects ({len(crds)} CRDs) to the API test double; "
              "a second apply changed nothing; every object reads back; so does the device plugin in DRA mode")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["render", "apply"])
    p.add_argument("--renderer", required=True)
    p.add_argument("--chart", required=True)
    p.add_argument("--daemon", action="append", default=[], help="name=path of a daemon binary")
    p.add_argument("--apiserver")
    p.add_argument("--fixtures")
    args = p.parse_args()
    if not os.access(args.renderer, os.X_OK):
        fail(f"no renderer at {args.renderer} (tools/setup-deps.sh installs golang-go and sprig)")
    if args.mode == "render":
        help_texts = {}
        for spec in args.daemon:
            name, path = spec.split("=", 1)
            r = subprocess.run([path, "--help"], capture_output=True, text=True)
            if r.returncode != 0 or "--" not in r.stdout:
                fail(f"{path} --help failed")
            help_texts[name] = r.stdout
        run_render(args, help_texts)
    else:
        run_apply(args)


if __name__ == "__main__":
    main()
