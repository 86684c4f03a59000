#!/usr/bin/env python3
"""The chart's ValidatingAdmissionPolicies (global.admissionPolicies), evaluated on requests.

No API server that evaluates admission policies runs here (the API test double has no
admission, and no CEL library is packaged for Debian), so this test renders the chart, takes
its policies and bindings as rendered, and decides each request as the API server's
ValidatingAdmissionPolicy plugin does (admission.k8s.io, "Validating Admission Policy"): a
binding selects its policy; the policy applies when matchConstraints match the request's
resource and operation and every matchCondition is true; the request is refused when a
validation is false or fails (failurePolicy Fail). The CEL is evaluated by cel_subset.py, which
is first checked against the CEL language definition's own answers.

Table: what kubecomp-sched, rt-kubelet-shim and disaggpu-devplugin write (libcore/api/names.hpp)
passes; an image change, another annotation or label, another node, a token without a node
name, another daemon's keys are refused; other users are not judged by these policies.
"""
import argparse
import copy
import subprocess
import sys

import yaml

import cel_subset as cel

NAMESPACE = "kubecomp"
RELEASE = "kubecomp"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# The evaluator against the CEL language definition (langdef.md): answers it gives, including
# the error cases, so an evaluator that judged everything true (or false) fails here.

CEL_SPEC_CASES = [
    ("1 == 1", True), ("1 == true", False), ("'a' == 'a'", True), ("[1, 'a'] == [1, 'a']", True),
    ("[1] == [true]", False), ("null == null", True), ("x == 1", "error"), ("{'a': 1} == m", "syntax"),
    ("m == n", True), ("m == o", False), ("'a' in m", True), ("'z' in m", False),
    ("1 in [1, 2]", True), ("true in [1]", False), ("m.a == 1", True), ("m.z == 1", "error"),
    ("has(m.a)", True), ("has(m.z)", False), ("has(m.a.b)", "error"), ("m['a'] == 1", True),
    ("false && m.z == 1", False), ("m.z == 1 && false", False), ("true || m.z == 1", True),
    ("m.z == 1 || true", True), ("m.z == 1 && true", "error"), ("m.z == 1 || false", "error"),
    ("1 && true", "error"), ("!true", False), ("!1", "error"), ("true ? 1 == 1 : m.z", True),
    ("false ? m.z : 2 == 2", True), ("m.filter(k, k != 'a') == ['b']", True),
    ("[1, 2, 3].filter(x, x != 2) == [1, 3]", True), ("m.all(k, k in n)", True),
    ("[1, 2].all(x, x == 1)", False), ("[].all(x, false)", True), ("[].exists(x, true)", False),
    ("[1, 2].exists(x, x == 2)", True), ("[m.z, 1].exists(x, x == 1)", "error"),
    ("[0, 1].exists(x, [m][x].z == 1 || x == 1)", True), ("[0, 1].all(x, [m][x].z == 1 && x == 5)", False),
    ("size(m) == 2", True), ("m.size() == 2", True), ("size('añb') == 3", True), ("size(1) == 1", "error"),
    ("[1, 2][2] == 1", "error"), ("'it''s'", "syntax"), ("1 < 2", "syntax"), ("m.map(k, k)", "syntax"),
    ("matches('a', 'b')", "syntax"), ("1.5 == 1.5", "syntax"), ("'a\\x'", "syntax"),
]
CEL_SPEC_ACTIVATION = {"m": {"a": 1, "b": 2}, "n": {"b": 2, "a": 1}, "o": {"a": 1, "b": True}}


def check_evaluator():
    for text, want in CEL_SPEC_CASES:
        try:
            program = cel.compile_expression(text)
        except cel.CelSyntaxError:
            if want != "syntax":
                fail(f"CEL {text!r}: refused as outside the subset, want {want}")
            continue
        if want == "syntax":
            fail(f"CEL {text!r}: accepted, want it refused as outside the subset")
        try:
            got = cel.evaluate(program, CEL_SPEC_ACTIVATION)
        except cel.CelError:
            got = "error"
        if not (got == want or (got == "error" and str(want).startswith("error"))) or (
                isinstance(want, bool) and not isinstance(got, bool)):
            fail(f"CEL {text!r} evaluates to {got!r}, want {want!r}")
    print(f"the CEL evaluator gives the language definition's answer in {len(CEL_SPEC_CASES)} cases")


# ---------------------------------------------------------------------------------------------
# The admission plugin's decision, from the rendered policies and bindings.

class Admission:
    def __init__(self, docs):
        policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
        self.bound = []
        for b in (d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"):
            name = b["spec"]["policyName"]
            if name not in policies:
                fail(f"binding {b['metadata']['name']} names no rendered policy ({name})")
            if b["spec"].get("validationActions") != ["Deny"]:
                fail(f"binding {name}: validationActions {b['spec'].get('validationActions')}, want [Deny]")
            if "matchResources" in b["spec"] or "paramRef" in b["spec"]:
                fail(f"binding {name} narrows or parametrises its policy; this test does not model that")
            self.bound.append(self.compiled(policies[name]))
        if len(self.bound) != len(policies):
            fail(f"{len(policies)} policies but {len(self.bound)} bindings")

    @staticmethod
    def compiled(policy):
        spec = policy["spec"]
        if spec.get("failurePolicy") != "Fail":
            fail(f"{policy['metadata']['name']}: failurePolicy {spec.get('failurePolicy')}, want Fail")
        try:
            return {
                "name": policy["metadata"]["name"],
                "rules": spec["matchConstraints"]["resourceRules"],
                "conditions": [cel.compile_expression(c["expression"]) for c in spec.get("matchConditions", [])],
                "variables": {v["name"]: cel.compile_expression(v["expression"]) for v in spec.get("variables", [])},
                "validations": [(cel.compile_expression(v["expression"]), v.get("message", "")) for v in spec["validations"]],
            }
        except cel.CelSyntaxError as e:
            fail(f"{policy['metadata']['name']}: CEL outside what this test can evaluate: {e}")

    @staticmethod
    def matches(rules, resource, operation):
        return any("" in r["apiGroups"] and resource in r["resources"] and operation in r["operations"]
                   and ("*" in r["apiVersions"] or "v1" in r["apiVersions"]) for r in rules)

    def decide(self, user, extra, resource, old, new, operation="UPDATE"):
        """None when admitted, else the refusing policy and message."""
        request = {"operation": operation, "resource": {"group": "", "version": "v1", "resource": resource},
                   "userInfo": {"username": user, "groups": ["system:serviceaccounts"]}}
        if extra:
            request["userInfo"]["extra"] = extra
        activation = {"request": request, "object": new, "oldObject": old}
        for p in self.bound:
            if not self.matches(p["rules"], resource, operation):
                continue
            try:
                if not all(cel.evaluate(c, activation) is True for c in p["conditions"]):
                    continue
            except cel.CelError as e:
                return f"{p['name']}: matchCondition error {e}"
            for program, message in p["validations"]:
                try:
                    ok = cel.evaluate(program, activation, p["variables"])
                except cel.CelError as e:
                    return f"{p['name']}: {message} (error: {e})"
                if ok is not True:
                    return f"{p['name']}: {message}"
        return None


# ---------------------------------------------------------------------------------------------
# Builders and the table.

def sa(name):
    return f"system:serviceaccount:{NAMESPACE}:{name}"


# The ServiceAccounts the chart renders (<release>-<component>, kubecomp-sched as it is).
SCHED, SHIM, DEVPLUGIN = sa("kubecomp-sched"), sa("kubecomp-rt-kubelet-shim"), sa("kubecomp-disaggpu-devplugin")
POLICIES = ["kubecomp-disaggpu-devplugin-nodes", "kubecomp-rt-kubelet-shim-nodes", "kubecomp-rt-kubelet-shim-pods",
            "kubecomp-sched-pods"]
OTHER = "system:serviceaccount:default:someone"


def make_pod(node="node-1", annotations=None, labels=None):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                        "labels": {"app": "train"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u0", "controller": True}],
                        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}]},
           "spec": {"schedulerName": "kubecomp-sched", "nodeName": node,
                    "containers": [{"name": "c", "image": "registry.example.com/train:1",
                                    "resources": {"limits": {"kubecomp.io/gpu": "2"}}}]},
           "status": {"phase": "Pending"}}
    if node is None:
        del pod["spec"]["nodeName"]
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    if labels is not None:
        pod["metadata"]["labels"] = labels
    return pod


def make_node(name="node-1", annotations=None, labels=None):
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": "n1", "resourceVersion": "9",
                         "labels": {"kubernetes.io/hostname": name, "kubecomp.io/gpu-node": "true"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"podCIDR": "10.0.1.0/24"},
            "status": {"capacity": {"cpu": "96"}}}
    if annotations is not None:
        node["metadata"]["annotations"] = annotations
    if labels is not None:
        node["metadata"]["labels"] = labels
    return node


def changed(obj, fn):
    """A copy of obj after fn(copy), as the API server hands `object` to admission: the
    status and managedFields the server itself maintains are changed too, and must not matter."""
    new = copy.deepcopy(obj)
    fn(new)
    new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    new["metadata"]["managedFields"] = [{"manager": "whoever", "operation": "Update", "time": "now"}]
    return new


def set_path(*path, value):
    def fn(o):
        for key in path[:-1]:
            o = o.setdefault(key, {})
        if value is None:
            o.pop(path[-1], None)
        else:
            o[path[-1]] = value
    return fn


def node_of(name):
    return {NODE_NAME_KEY: [name], "authentication.kubernetes.io/pod-name": ["x"]}


REQUEST = {"kubecomp.io/dst-node": "node-2", "kubecomp.io/demand": "2", "kubecomp.io/reserved-at": "2026-11-28T21:00:00.000Z"}
RT_NODE = {"rt.kubecomp.io/cores": "2-7", "rt.kubecomp.io/bound": "950000/1000000", "rt.kubecomp.io/kernel": "rt-group"}
OTHERS = {"team": "vision"}
POD, NODE = make_pod(), make_node()
POD_ANN = make_pod(annotations=dict(OTHERS, **REQUEST))
NODE_USAGE = make_node(annotations={"node.alpha.kubernetes.io/ttl": "0", "kubecomp.io/gpu-usage": "{}"})
ann = ("metadata", "annotations")
lab = ("metadata", "labels")


def cases():
    """(what, user, extra, resource, old, new, admitted)."""
    image = set_path("spec", "containers", value=[{"name": "c", "image": "evil:1"}])
    yield "sched writes its request on a pod without annotations", SCHED, None, "pods", POD, changed(POD, set_path(*ann, value=dict(REQUEST))), True
    yield "sched rewrites its request beside other annotations", SCHED, None, "pods", POD_ANN, \
        changed(POD_ANN, set_path(*ann, "kubecomp.io/demand", value="3")), True
    yield "sched clears its request", SCHED, None, "pods", POD_ANN, changed(POD_ANN, set_path(*ann, value=dict(OTHERS))), True
    yield "sched clears its request, the last annotations", SCHED, None, "pods", make_pod(annotations=dict(REQUEST)), \
        changed(make_pod(annotations=dict(REQUEST)), set_path(*ann, value=None)), True
    yield "sched swaps the image", SCHED, None, "pods", POD, changed(POD, image), False
    yield "sched swaps the image while writing its request", SCHED, None, "pods", POD, \
        changed(POD, lambda o: (image(o), set_path(*ann, value=dict(REQUEST))(o))), False
    yield "sched adds a toleration", SCHED, None, "pods", POD, \
        changed(POD, set_path("spec", "tolerations", value=[{"operator": "Exists"}])), False
    yield "sched adds another annotation", SCHED, None, "pods", POD_ANN, changed(POD_ANN, set_path(*ann, "x", value="1")), False
    yield "sched changes another annotation", SCHED, None, "pods", POD_ANN, changed(POD_ANN, set_path(*ann, "team", value="nlp")), False
    yield "sched removes another annotation", SCHED, None, "pods", POD_ANN, changed(POD_ANN, set_path(*ann, "team", value=None)), False
    yield "sched writes the shim's annotation", SCHED, None, "pods", POD, \
        changed(POD, set_path(*ann, value={"rt.kubecomp.io/assigned": "c=2"})), False
    yield "sched relabels the pod", SCHED, None, "pods", POD, changed(POD, set_path(*lab, "app", value="web")), False
    yield "sched adds a label", SCHED, None, "pods", POD, changed(POD, set_path(*lab, "kubecomp.io/dst-node", value="x")), False
    yield "sched removes every label", SCHED, None, "pods", POD, changed(POD, set_path(*lab, value=None)), False
    yield "sched drops the owner", SCHED, None, "pods", POD, changed(POD, set_path("metadata", "ownerReferences", value=None)), False
    yield "sched adds a finalizer", SCHED, None, "pods", POD, changed(POD, set_path("metadata", "finalizers", value=["x/y"])), False
    yield "someone else swaps the image (not these policies' business)", OTHER, None, "pods", POD, changed(POD, image), True
    yield "the device plugin swaps the image (RBAC refuses; no policy on its pods)", DEVPLUGIN, node_of("node-1"), "pods", POD, \
        changed(POD, image), True
    assigned = set_path(*ann, value={"rt.kubecomp.io/assigned": "c=2-3"})
    yield "shim annotates an RT pod on its node", SHIM, node_of("node-1"), "pods", POD, changed(POD, assigned), True
    yield "shim clears the annotation", SHIM, node_of("node-1"), "pods", changed(POD, assigned), changed(POD, set_path(*ann, value=None)), True
    yield "shim annotates a pod on another node", SHIM, node_of("node-2"), "pods", POD, changed(POD, assigned), False
    yield "shim annotates an unscheduled pod", SHIM, node_of("node-1"), "pods", make_pod(node=None), \
        changed(make_pod(node=None), assigned), False
    yield "shim with a token naming no node", SHIM, None, "pods", POD, changed(POD, assigned), False
    yield "shim with a token naming other fields only", SHIM, {"authentication.kubernetes.io/pod-name": ["x"]}, "pods", POD, \
        changed(POD, assigned), False
    yield "shim writes the scheduler's request", SHIM, node_of("node-1"), "pods", POD, changed(POD, set_path(*ann, value=dict(REQUEST))), False
    yield "shim swaps the image of a pod on its node", SHIM, node_of("node-1"), "pods", POD, changed(POD, image), False
    usage = set_path(*ann, "kubecomp.io/gpu-usage", value='{"inUse":{}}')
    yield "device plugin reports usage on its Node", DEVPLUGIN, node_of("node-1"), "nodes", NODE, changed(NODE, usage), True
    yield "device plugin updates its report", DEVPLUGIN, node_of("node-1"), "nodes", NODE_USAGE, changed(NODE_USAGE, usage), True
    yield "device plugin reports on another Node", DEVPLUGIN, node_of("node-2"), "nodes", NODE, changed(NODE, usage), False
    yield "device plugin with a token naming no node", DEVPLUGIN, None, "nodes", NODE, changed(NODE, usage), False
    yield "device plugin sets a label on its Node", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, set_path(*lab, "node-role.kubernetes.io/control-plane", value="")), False
    yield "device plugin removes the node selector label", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, set_path(*lab, "kubecomp.io/gpu-node", value=None)), False
    yield "device plugin taints its Node", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, set_path("spec", "taints", value=[{"key": "k", "effect": "NoSchedule"}])), False
    yield "device plugin cordons its Node", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, set_path("spec", "unschedulable", value=True)), False
    yield "device plugin changes another annotation", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, set_path(*ann, "node.alpha.kubernetes.io/ttl", value="30")), False
    yield "device plugin writes the shim's annotations", DEVPLUGIN, node_of("node-1"), "nodes", NODE, \
        changed(NODE, lambda o: o["metadata"]["annotations"].update(RT_NODE)), False
    rt = set_path("metadata", value=dict(NODE["metadata"], labels=dict(NODE["metadata"]["labels"], **{"rt.kubecomp.io/capable": "true"}),
                                        annotations=dict(NODE["metadata"]["annotations"], **RT_NODE)))
    yield "shim advertises RT on its Node", SHIM, node_of("node-1"), "nodes", NODE, changed(NODE, rt), True
    yield "shim withdraws RT from its Node", SHIM, node_of("node-1"), "nodes", changed(NODE, rt), changed(NODE, lambda o: None), True
    yield "shim advertises RT on another Node", SHIM, node_of("node-2"), "nodes", NODE, changed(NODE, rt), False
    yield "shim cordons its Node", SHIM, node_of("node-1"), "nodes", NODE, changed(NODE, set_path("spec", "unschedulable", value=True)), False
    yield "shim sets another label", SHIM, node_of("node-1"), "nodes", NODE, changed(NODE, set_path(*lab, "rt", value="x")), False
    yield "shim writes the device plugin's report", SHIM, node_of("node-1"), "nodes", NODE, changed(NODE, usage), False
    # Every writer, on each kind it writes: the metadata it must leave alone.
    for who, user, resource, obj in (("sched", SCHED, "pods", POD), ("shim", SHIM, "pods", POD),
                                     ("shim", SHIM, "nodes", NODE), ("device plugin", DEVPLUGIN, "nodes", NODE)):
        extra = node_of("node-1")
        owner = [{"apiVersion": "v1", "kind": "Namespace", "name": "x", "uid": "u9"}]
        for what, fn in (("sets an owner", set_path("metadata", "ownerReferences", value=owner)),
                         ("adds a finalizer", set_path("metadata", "finalizers", value=["x/y"])),
                         ("sets label team", set_path(*lab, "team", value="x")),
                         ("sets label app", set_path(*lab, "app", value="x")),
                         ("sets annotation team", set_path(*ann, "team", value="x"))):
            yield f"{who} {what} on a {resource[:-1]}", user, extra, resource, obj, changed(obj, fn), False
    yield "someone else taints a Node", OTHER, None, "nodes", NODE, \
        changed(NODE, set_path("spec", "taints", value=[{"key": "k", "effect": "NoSchedule"}])), True


def misjudged(admission, table):
    out = []
    for what, user, extra, resource, old, new, admitted in table:
        refusal = admission.decide(user, extra, resource, old, new)
        if (refusal is None) != admitted:
            out.append(f"{what}: {'refused: ' + refusal if refusal else 'admitted'}, want {'admitted' if admitted else 'refused'}")
    return out


def weakened(docs):
    """Each rendered policy with one part taken out or loosened: (what, docs)."""
    for i, d in enumerate(docs):
        if d["kind"] != "ValidatingAdmissionPolicy":
            continue
        name, spec = d["metadata"]["name"], d["spec"]
        for j, v in enumerate(spec["validations"]):
            w = copy.deepcopy(docs)
            del w[i]["spec"]["validations"][j]
            yield f"{name} without validation {j} ({v.get('message')})", w
        for j, v in enumerate(spec["variables"]):
            if v["name"].startswith("own"):
                w = copy.deepcopy(docs)
                w[i]["spec"]["variables"][j]["expression"] = v["expression"][:-1] + \
                    (", " if v["expression"] != "[]" else "") + "'team', 'app', 'node.alpha.kubernetes.io/ttl']"
                yield f"{name} with more keys in {v['name']}", w
        w = copy.deepcopy(docs)
        w[i]["spec"]["matchConditions"][0]["expression"] += " && false"
        yield f"{name} matching no request", w


def run(args):
    check_evaluator()
    base = [args.renderer, "--namespace", NAMESPACE, "--release-name", RELEASE]
    r = subprocess.run(base + ["--set", "rt.shim.enabled=true", args.chart], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"chart-render: {r.stderr}")
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    admission = Admission(docs)
    names = sorted(p["name"] for p in admission.bound)
    want = POLICIES
    if names != want:
        fail(f"rendered policies {names}, want {want}")
    table = list(cases())
    wrong = misjudged(admission, table)
    if wrong:
        fail("\n  ".join(wrong))
    refused = sum(1 for c in table if not c[-1])
    print(f"{len(table)} requests decided as expected by the {len(names)} rendered policies "
          f"({len(table) - refused} admitted, {refused} refused)")
    # Every part of every policy matters: taking it out (or widening its keys) lets some
    # request of the table through that must be refused.
    count = 0
    for what, w in weakened(docs):
        if not misjudged(Admission(w), table):
            fail(f"{what} still decides every request of the table as the policy does: the table misses it")
        count += 1
    print(f"each of {count} weakened policies admits a request the rendered one refuses")
    # The policies with global.admissionPolicies off: none, nothing judged.
    r = subprocess.run(base + ["--set", "rt.shim.enabled=true", "--set", "global.admissionPolicies.enabled=false", args.chart],
                       capture_output=True, text=True)
    off = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"].startswith("ValidatingAdmissionPolicy")]
    if r.returncode != 0 or off:
        fail(f"global.admissionPolicies.enabled=false still renders {[d['metadata']['name'] for d in off]} {r.stderr}")
    print("global.admissionPolicies.enabled=false renders no policy")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--renderer", required=True)
    p.add_argument("--chart", required=True)
    run(p.parse_args())


if __name__ == "__main__":
    main()
