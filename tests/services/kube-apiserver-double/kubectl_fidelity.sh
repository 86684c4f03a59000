#!/usr/bin/env bash
# kubectl against the API test double: apply (Deployment, CRD, custom object), get -o json,
# get -w seeing a change, patch (strategic, merge, json), delete blocked by a finalizer,
# describe, server-side Table columns (CRD printer columns, pods, nodes), kubectl drain through
# pods/eviction and a PodDisruptionBudget, events written through core/v1 and events.k8s.io/v1
# shown by kubectl events and describe, resource.k8s.io/v1 (a DeviceClass, a claim template, the
# claim the double's resourceclaim controller makes for a pod, slices and their columns), and
# authentication.
# Works with kubectl 1.20 (Debian) and newer.
# Usage: kubectl_fidelity.sh <path to kube-apiserver-double>
set -euo pipefail
BIN="$1"
REPO="$(cd "$(dirname "$0")/../../.." && pwd)"
command -v kubectl >/dev/null || { echo "kubectl not installed (tools/setup-deps.sh installs it)"; exit 1; }
TMP="$(mktemp -d)"
SERVER_PID=""
WATCH_PID=""
cleanup() {
  [ -n "$WATCH_PID" ] && kill "$WATCH_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- server log"; cat "$TMP/server.log" || true; exit 1; }
step() { echo "== $*"; }

TOKEN="token-$RANDOM$RANDOM"
"$BIN" --port 0 --token "$TOKEN" --kubeconfig-out "$TMP/kubeconfig" --seed 7 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  [ -s "$TMP/kubeconfig" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "the double exited"
  sleep 0.1
done
[ -s "$TMP/kubeconfig" ] || fail "no kubeconfig written"
export KUBECONFIG="$TMP/kubeconfig"
export HOME="$TMP"  # kubectl's discovery cache goes under $HOME/.kube/cache
k() { kubectl --request-timeout=30s "$@"; }
# The kubectl under test, printed so a log says which one ran. Debian bookworm's is 1.20; the
# checks that need a newer kubectl reach the same API another way that 1.20 has (below).
KUBECTL_MINOR="$(kubectl version --client -o json 2>/dev/null \
  | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1)"
[ -n "$KUBECTL_MINOR" ] || fail "cannot read the kubectl version: $(kubectl version --client 2>&1)"
echo "kubectl under test: $(command -v kubectl), $(kubectl version --client -o json 2>/dev/null \
  | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1) (minor $KUBECTL_MINOR)"

# status_merge RESOURCE NAME PATH JSON: a merge patch of the status subresource of object NAME
# (served at PATH, e.g. /api/v1/namespaces/default/pods/p1). kubectl >= 1.24
# sends it as `kubectl patch --subresource=status` (a PATCH); older kubectl has no --subresource,
# so the object is read and the merged status written back with `kubectl replace --raw` (a PUT
# on the same /status path the double serves), the way a controller writes status.
status_merge() {
  local resource="$1" name="$2" path="$3" patch="$4"
  if [ "$KUBECTL_MINOR" -ge 24 ]; then
    k patch "$resource" "$name" --subresource=status --type merge -p "$patch" >/dev/null
  else
    k get --raw "$path" >"$TMP/status.json" || return 1
    python3 - "$TMP/status.json" "$patch" >"$TMP/status.new.json" <<'PY' || return 1
import json, sys
obj = json.load(open(sys.argv[1]))
def merge(dst, src):  # RFC 7386
    for key, value in src.items():
        if value is None:
            dst.pop(key, None)
        elif isinstance(value, dict) and isinstance(dst.get(key), dict):
            merge(dst[key], value)
        else:
            dst[key] = value
merge(obj, json.loads(sys.argv[2]))
json.dump(obj, sys.stdout)
PY
    k replace --raw "$path/status" -f "$TMP/status.new.json" >/dev/null
  fi
}

step "namespaces that exist on a fresh server"
k get namespaces -o name | grep -qx "namespace/kube-system" || fail "kube-system missing"

step "authentication: a wrong token is refused"
if KUBECONFIG= kubectl --server "$(grep server: "$TMP/kubeconfig" | awk '{print $2}')" \
     --insecure-skip-tls-verify --token wrong get pods >"$TMP/unauth.out" 2>&1; then
  fail "a wrong token was accepted"
fi
grep -qiE "unauthorized|must be logged in" "$TMP/unauth.out" || fail "unexpected 401 text: $(cat "$TMP/unauth.out")"

step "kubectl apply -f Deployment (create, no-op, change)"
cat >"$TMP/deploy.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}]
YAML
k apply -f "$TMP/deploy.yaml" | tee "$TMP/out" ; grep -q "deployment.apps/web created" "$TMP/out" || fail "create"
k apply -f "$TMP/deploy.yaml" | tee "$TMP/out" ; grep -q "deployment.apps/web unchanged" "$TMP/out" || fail "no-op apply"
sed -i 's/replicas: 2/replicas: 3/; s/value: "1"/value: "2"/' "$TMP/deploy.yaml"
k apply -f "$TMP/deploy.yaml" | tee "$TMP/out" ; grep -q "deployment.apps/web configured" "$TMP/out" || fail "change apply"
[ "$(k get deploy web -o jsonpath='{.spec.replicas}')" = 3 ] || fail "replicas not 3"
[ "$(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].env[0].value}')" = 2 ] || fail "env not merged"
[ "$(k get deploy web -o jsonpath='{.metadata.generation}')" = 2 ] || fail "generation should be 2"
k get deploy web -o jsonpath='{.metadata.annotations}' | grep -q "last-applied-configuration" || fail "no last-applied"

step "kubectl get -o json"
k get deploy web -o json >"$TMP/web.json"
grep -q '"kind": "Deployment"' "$TMP/web.json" || fail "get -o json kind"
k get deploy -o json | grep -q '"kind": "List"' || fail "list -o json"

step "kubectl apply -f CRD, then a custom object"
cat >"$TMP/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
YAML
k apply -f "$TMP/crd.yaml" | grep -q "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" \
  || fail "crd create"
k wait --for condition=established --timeout=20s crd/widgets.example.com >/dev/null || fail "crd not established"
cat >"$TMP/widget.yaml" <<'YAML'
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 1, color: red}
YAML
k apply -f "$TMP/widget.yaml" | grep -q "widget.example.com/w1 created" || fail "widget create"
sed -i 's/size: 1/size: 5/' "$TMP/widget.yaml"
k apply -f "$TMP/widget.yaml" | grep -q "widget.example.com/w1 configured" || fail "widget apply (merge patch)"
[ "$(k get wd w1 -o jsonpath='{.spec.size}')" = 5 ] || fail "short name / size"

step "kubectl get -w sees a change"
k get deploy web -w -o jsonpath='{.metadata.labels.stage}{"\n"}' >"$TMP/watch.out" 2>&1 &
WATCH_PID=$!
sleep 1
k label deploy web stage=blue >/dev/null || fail "label"
for _ in $(seq 1 100); do grep -qx blue "$TMP/watch.out" && break; sleep 0.1; done
grep -qx blue "$TMP/watch.out" || fail "watch did not see the change: $(cat "$TMP/watch.out")"
kill "$WATCH_PID" 2>/dev/null || true; WATCH_PID=""

step "kubectl patch: strategic (default), merge, json"
k patch deploy web -p '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26"}]}}}}' >/dev/null
[ "$(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].image}')" = nginx:1.26 ] || fail "smp image"
[ "$(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].ports[0].containerPort}')" = 80 ] \
  || fail "smp lost ports"
k patch deploy web --type merge -p '{"metadata":{"labels":{"tier":"front"}}}' >/dev/null
[ "$(k get deploy web -o jsonpath='{.metadata.labels.tier}')" = front ] || fail "merge patch"
k patch deploy web --type json -p '[{"op":"replace","path":"/spec/replicas","value":4}]' >/dev/null
[ "$(k get deploy web -o jsonpath='{.spec.replicas}')" = 4 ] || fail "json patch"
if k patch deploy web --type json -p '[{"op":"test","path":"/spec/replicas","value":9}]' >"$TMP/out" 2>&1; then
  fail "a failing json-patch test op was accepted"
fi
if k patch wd w1 -p '{"spec":{"size":6}}' >"$TMP/out" 2>&1; then
  # kubectl falls back to a merge patch for custom resources; either way size must be 6
  :
fi
k patch wd w1 --type merge -p '{"spec":{"size":6}}' >/dev/null
[ "$(k get wd w1 -o jsonpath='{.spec.size}')" = 6 ] || fail "merge patch on custom object"

step "kubectl delete blocked by a finalizer until it is removed"
cat >"$TMP/held.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  finalizers: [example.com/hold]
data: {a: b}
YAML
k apply -f "$TMP/held.yaml" >/dev/null
k delete cm held --wait=false >/dev/null
[ -n "$(k get cm held -o jsonpath='{.metadata.deletionTimestamp}')" ] || fail "no deletionTimestamp"
k patch cm held --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
if k get cm held >/dev/null 2>&1; then fail "configmap still there after its finalizer was removed"; fi
{ k get cm held 2>&1 || true; } | grep -q 'NotFound\|not found' || fail "expected NotFound"

step "kubectl describe pod"
cat >"$TMP/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: p1, labels: {app: demo}}
spec:
  containers: [{name: c, image: busybox:1.36, resources: {limits: {cpu: 100m, memory: 64Mi}}}]
YAML
k apply -f "$TMP/pod.yaml" >/dev/null
k describe pod p1 >"$TMP/describe.out" || fail "describe failed: $(cat "$TMP/describe.out")"
grep -q "^Name: *p1" "$TMP/describe.out" || fail "describe Name"
grep -q "QoS Class: *Guaranteed" "$TMP/describe.out" || fail "describe QoS: $(cat "$TMP/describe.out")"
k get pods -l app=demo -o name | grep -qx "pod/p1" || fail "label selector"
k get pods --field-selector status.phase=Pending -o name | grep -qx "pod/p1" || fail "field selector"
if k get pods --field-selector spec.bogus=x >"$TMP/out" 2>&1; then fail "unsupported field selector accepted"; fi
grep -q "field label not supported" "$TMP/out" || fail "field selector error text: $(cat "$TMP/out")"

step "kubectl get: server-side Table columns (the GPUPool CRD's printer columns, pods, nodes)"
# The project's own CRD and sample, as an operator applies them.
k apply -f "$REPO/charts/kubecomp/crds/gpupools.kubecomp.io.yaml" >/dev/null
k wait --for condition=established --timeout=20s crd/gpupools.kubecomp.io >/dev/null || fail "gpupools not established"
k apply -f "$REPO/charts/kubecomp/examples/gpupool-sample.yaml" >/dev/null
k get gpupools >"$TMP/out"
# No status yet: the integer columns are empty.
head -1 "$TMP/out" | grep -qE '^NAME +DRIVER +GPUS +FREE +ATTACHED +AGE$' || fail "printer column headers: $(cat "$TMP/out")"
grep -qE '^pool-a +h3 +[0-9]+s$' "$TMP/out" || fail "printer column cells without status: $(cat "$TMP/out")"
# get -w: a Table watch (the first row from the LIST, then one row per event). The watch
# starts at the LIST's resourceVersion, so waiting for the first row is enough.
k get gpupools -w >"$TMP/watch.out" 2>&1 &
WATCH_PID=$!
for _ in $(seq 1 100); do grep -q '^pool-a' "$TMP/watch.out" && break; sleep 0.1; done
status_merge gpupool pool-a /apis/kubecomp.io/v1alpha1/gpupools/pool-a \
  '{"status":{"totalGPUs":8,"freeGPUs":3,"attachedGPUs":5}}' || fail "status patch of the pool"
for _ in $(seq 1 100); do grep -qE '^pool-a +h3 +8 +3 +5 ' "$TMP/watch.out" && break; sleep 0.1; done
grep -qE '^pool-a +h3 +8 +3 +5 ' "$TMP/watch.out" || fail "Table watch did not show the new row: $(cat "$TMP/watch.out")"
kill "$WATCH_PID" 2>/dev/null || true; WATCH_PID=""
k get gpool pool-a >"$TMP/out"
grep -qE '^pool-a +h3 +8 +3 +5 +[0-9]+s$' "$TMP/out" || fail "printer column cells: $(cat "$TMP/out")"
k get gpupools -o wide >"$TMP/out"
grep -qE '^pool-a +h3 +8 +3 +5 +[0-9]+s$' "$TMP/out" || fail "wide cells: $(cat "$TMP/out")"
k get gpupools -o custom-columns=N:.metadata.name,T:.status.totalGPUs --no-headers >"$TMP/out"
grep -qE '^pool-a +8$' "$TMP/out" || fail "custom-columns (client-side, needs the object): $(cat "$TMP/out")"
k get pods >"$TMP/out"
head -1 "$TMP/out" | grep -qE '^NAME +READY +STATUS +RESTARTS +AGE$' || fail "pod columns: $(cat "$TMP/out")"
grep -qE '^p1 +0/1 +Pending +0 +[0-9]+s$' "$TMP/out" || fail "pod row: $(cat "$TMP/out")"
# (Through a file: `| head -1` would end kubectl with SIGPIPE and fail the pipeline.)
k get pods -o wide >"$TMP/out"
head -1 "$TMP/out" | grep -qE '^NAME +READY +STATUS +RESTARTS +AGE +IP +NODE +NOMINATED NODE +READINESS GATES$' \
  || fail "pod wide columns: $(cat "$TMP/out")"
k get pods -A >"$TMP/out"
grep -qE '^default +p1 +0/1 +Pending' "$TMP/out" || fail "pods -A: namespace column from the row's metadata"
cat >"$TMP/node.yaml" <<'YAML'
apiVersion: v1
kind: Node
metadata: {name: gpu-node-1, labels: {node-role.kubernetes.io/worker: ""}}
status:
  conditions: [{type: Ready, status: "True"}]
  nodeInfo: {kubeletVersion: v1.30.0, osImage: Debian GNU/Linux 12, kernelVersion: 6.1.0, containerRuntimeVersion: containerd://1.7}
  addresses: [{type: InternalIP, address: 10.0.0.1}]
YAML
k apply -f "$TMP/node.yaml" >/dev/null
k get nodes >"$TMP/out"
head -1 "$TMP/out" | grep -qE '^NAME +STATUS +ROLES +AGE +VERSION$' || fail "node columns: $(cat "$TMP/out")"
grep -qE '^gpu-node-1 +Ready +worker +[0-9]+s +v1.30.0$' "$TMP/out" || fail "node row: $(cat "$TMP/out")"
k get nodes -o wide >"$TMP/out"
grep -qE '^gpu-node-1 +Ready +worker +[0-9]+s +v1.30.0 +10.0.0.1 +<none> +Debian GNU/Linux 12 +6.1.0 +containerd://1.7$' \
  "$TMP/out" || fail "node wide row: $(cat "$TMP/out")"

step "kubectl drain: pods/eviction, blocked by a PodDisruptionBudget (429), then allowed"
for p in d1 d2; do
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {app: drain}}\nspec:\n  nodeName: gpu-node-1\n  containers: [{name: c, image: busybox}]\n' "$p" \
    | k apply -f - >/dev/null
  status_merge pod "$p" "/api/v1/namespaces/default/pods/$p" \
    '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' || fail "pod $p status"
done
cat >"$TMP/pdb.yaml" <<'YAML'
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: drain-pdb}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: drain}}
YAML
k apply -f "$TMP/pdb.yaml" >/dev/null
k get pdb >"$TMP/out"
grep -qE '^drain-pdb +2 +N/A +0 +[0-9]+s$' "$TMP/out" || fail "pdb columns: $(cat "$TMP/out")"
# Two healthy pods, two required: every eviction answers 429 and drain gives up at its timeout.
if k drain gpu-node-1 --force --timeout=3s >"$TMP/out" 2>&1; then fail "drain went through a PDB: $(cat "$TMP/out")"; fi
grep -q "Cannot evict pod as it would violate the pod's disruption budget" "$TMP/out" \
  || fail "drain did not report the PDB: $(cat "$TMP/out")"
k get pods d1 d2 -o name >"$TMP/out" 2>&1
[ "$(wc -l <"$TMP/out")" = 2 ] || fail "pods went despite the PDB: $(cat "$TMP/out")"
k get node gpu-node-1 >"$TMP/out"
grep -q 'Ready,SchedulingDisabled' "$TMP/out" || fail "drain did not cordon: $(cat "$TMP/out")"
k patch pdb drain-pdb --type merge -p '{"spec":{"minAvailable":1}}' >/dev/null
k get pdb drain-pdb -o jsonpath='{.status.disruptionsAllowed}' >"$TMP/out"
[ "$(cat "$TMP/out")" = 1 ] || fail "pdb status after the change: $(cat "$TMP/out")"
# One disruption allowed: the first eviction passes, the second waits for the budget again.
if k drain gpu-node-1 --force --timeout=3s >"$TMP/out" 2>&1; then fail "drain evicted both pods: $(cat "$TMP/out")"; fi
grep -cE '^pod/d[12] evicted$' "$TMP/out" | grep -qx 1 || fail "expected exactly one eviction: $(cat "$TMP/out")"
k patch pdb drain-pdb --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
k drain gpu-node-1 --force --timeout=30s >"$TMP/out" 2>&1 || fail "drain: $(cat "$TMP/out")"
# kubectl ends with "node/NAME drained" (1.21 and later) or "node/NAME evicted" (1.20).
if [ "$KUBECTL_MINOR" -ge 21 ]; then DRAINED=drained; else DRAINED=evicted; fi
grep -qx "node/gpu-node-1 $DRAINED" "$TMP/out" || fail "drain output: $(cat "$TMP/out")"
k get pods -l app=drain -o name >"$TMP/out"
[ ! -s "$TMP/out" ] || fail "pods left after drain: $(cat "$TMP/out")"

step "events: one store behind core/v1 and events.k8s.io/v1 (kubectl events, describe)"
P1UID="$(k get pod p1 -o jsonpath='{.metadata.uid}')"
cat >"$TMP/events.yaml" <<YAML
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: p1.gpu-attached}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: kubecomp.io/reconfig-mgr
reportingInstance: reconfig-mgr-0
action: Attach
reason: GpuAttached
type: Normal
note: attached falcon-0.3 via events.k8s.io
regarding: {apiVersion: v1, kind: Pod, namespace: default, name: p1, uid: "$P1UID"}
---
apiVersion: v1
kind: Event
metadata: {name: p1.scheduled}
involvedObject: {apiVersion: v1, kind: Pod, namespace: default, name: p1, uid: "$P1UID"}
reason: Scheduled
message: assigned via core v1
source: {component: default-scheduler}
type: Normal
count: 1
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
YAML
k create -f "$TMP/events.yaml" >/dev/null || fail "create events"
if [ "$KUBECTL_MINOR" -ge 26 ]; then
  k events --for pod/p1 >"$TMP/out" 2>&1 || fail "kubectl events: $(cat "$TMP/out")"
  grep -qE 'GpuAttached +Pod/p1 +attached falcon-0.3 via events.k8s.io' "$TMP/out" \
    || fail "kubectl events misses the events.k8s.io event: $(cat "$TMP/out")"
  grep -qE 'Scheduled +Pod/p1 +assigned via core v1' "$TMP/out" || fail "kubectl events misses the core event: $(cat "$TMP/out")"
else
  # No `kubectl events` before 1.26: the same core/v1 list it makes (a field selector on the
  # involved object), through kubectl get.
  k get events --field-selector "involvedObject.kind=Pod,involvedObject.name=p1,involvedObject.uid=$P1UID" \
    -o custom-columns=REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message --no-headers >"$TMP/out" 2>&1 \
    || fail "events of p1: $(cat "$TMP/out")"
  grep -qE '^GpuAttached +p1 +attached falcon-0.3 via events.k8s.io$' "$TMP/out" \
    || fail "the events of p1 miss the events.k8s.io event: $(cat "$TMP/out")"
  grep -qE '^Scheduled +p1 +assigned via core v1$' "$TMP/out" || fail "the events of p1 miss the core event: $(cat "$TMP/out")"
  [ "$(wc -l <"$TMP/out")" = 2 ] || fail "the events of p1: $(cat "$TMP/out")"
fi
k describe pod p1 >"$TMP/out"
grep -qE 'Normal +GpuAttached +.* +kubecomp.io/reconfig-mgr(, reconfig-mgr-0)? +attached falcon-0.3 via events.k8s.io' "$TMP/out" \
  || fail "describe misses the events.k8s.io event: $(sed -n '/^Events:/,$p' "$TMP/out")"
grep -qE 'Normal +Scheduled +.* +default-scheduler +assigned via core v1' "$TMP/out" \
  || fail "describe misses the core event: $(sed -n '/^Events:/,$p' "$TMP/out")"
k get events >"$TMP/out"
head -1 "$TMP/out" | grep -qE '^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$' || fail "event columns: $(cat "$TMP/out")"
grep -qE '^[0-9]+d +Normal +GpuAttached +pod/p1 +attached falcon-0.3 via events.k8s.io$' "$TMP/out" \
  || fail "event row: $(cat "$TMP/out")"
k get events.events.k8s.io -o jsonpath='{range .items[*]}{.note}{"\n"}{end}' >"$TMP/out"
grep -qx 'assigned via core v1' "$TMP/out" || fail "events.k8s.io list misses the core event: $(cat "$TMP/out")"
grep -qx 'attached falcon-0.3 via events.k8s.io' "$TMP/out" || fail "events.k8s.io list: $(cat "$TMP/out")"
k delete events.events.k8s.io p1.scheduled >/dev/null
if k get event p1.scheduled >/dev/null 2>&1; then fail "event deleted through events.k8s.io still in core/v1"; fi

step "resource.k8s.io/v1 (DRA): discovery, a template-generated claim, slices and their columns"
k api-resources --api-group=resource.k8s.io -o name >"$TMP/out" || fail "api-resources: $(cat "$TMP/out")"
for r in deviceclasses resourceclaims resourceclaimtemplates resourceslices; do
  grep -qx "$r.resource.k8s.io" "$TMP/out" || fail "api-resources misses $r: $(cat "$TMP/out")"
done
# kubectl 1.20 knows none of these kinds (nor the pod's resourceClaims): it maps them through
# discovery and sends the objects as written.
cat >"$TMP/dra.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.kubecomp.io}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kubecomp.io"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.kubecomp.io}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - name: c
    image: busybox:1.36
    resources: {claims: [{name: gpu}]}
YAML
k apply -f "$TMP/dra.yaml" >"$TMP/out" 2>&1 || fail "apply the DRA objects: $(cat "$TMP/out")"
grep -qx "deviceclass.resource.k8s.io/gpu.kubecomp.io created" "$TMP/out" || fail "deviceclass: $(cat "$TMP/out")"
grep -qx "resourceclaimtemplate.resource.k8s.io/one-gpu created" "$TMP/out" || fail "template: $(cat "$TMP/out")"
grep -qx "pod/trainer created" "$TMP/out" || fail "pod: $(cat "$TMP/out")"
# The double's resourceclaim controller made the claim from the template (synchronously).
k get resourceclaims >"$TMP/out"
head -1 "$TMP/out" | grep -qE '^NAME +STATE +AGE$' || fail "resourceclaim columns: $(cat "$TMP/out")"
grep -qE '^trainer-gpu-[a-z0-9]{5} +pending +[0-9]+s$' "$TMP/out" || fail "generated claim row: $(cat "$TMP/out")"
[ "$(wc -l <"$TMP/out")" = 2 ] || fail "one claim expected: $(cat "$TMP/out")"
CLAIM="$(k get resourceclaims -o jsonpath='{.items[0].metadata.name}')"
[ "$(k get pod trainer -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')" = "$CLAIM" ] \
  || fail "pod status does not name the claim $CLAIM"
[ "$(k get resourceclaim "$CLAIM" -o jsonpath='{.metadata.ownerReferences[0].name}')" = trainer ] \
  || fail "claim not owned by the pod"
cat >"$TMP/slices.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-1-gpu.kubecomp.io}
spec:
  driver: gpu.kubecomp.io
  nodeName: gpu-node-1
  pool: {name: gpu-node-1, generation: 0, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      model: {string: H100}
      gpu.kubecomp.io/index: {int: 0}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric}
spec:
  driver: gpu.kubecomp.io
  allNodes: true
  pool: {name: fabric, generation: 1, resourceSliceCount: 1}
  devices:
  - name: fgpu-0
    bindsToNode: true
    bindingConditions: [gpu.kubecomp.io/attached]
    bindingFailureConditions: [gpu.kubecomp.io/attach-failed]
YAML
k apply -f "$TMP/slices.yaml" >"$TMP/out" 2>&1 || fail "apply the slices: $(cat "$TMP/out")"
k get resourceslices,resourceclaims >"$TMP/out"
grep -qE '^NAME +NODE +DRIVER +POOL +AGE$' "$TMP/out" || fail "resourceslice columns: $(cat "$TMP/out")"
grep -qE '^resourceslice.resource.k8s.io/gpu-node-1-gpu.kubecomp.io +gpu-node-1 +gpu.kubecomp.io +gpu-node-1 +[0-9]+s$' \
  "$TMP/out" || fail "node-local slice row: $(cat "$TMP/out")"
grep -qE '^resourceslice.resource.k8s.io/fabric +gpu.kubecomp.io +fabric +[0-9]+s$' "$TMP/out" \
  || fail "fabric slice row (no node): $(cat "$TMP/out")"
grep -qE '^NAME +STATE +AGE$' "$TMP/out" || fail "claim columns next to the slices: $(cat "$TMP/out")"
grep -qE "^resourceclaim.resource.k8s.io/$CLAIM +pending +[0-9]+s$" "$TMP/out" || fail "claim row: $(cat "$TMP/out")"
k get resourceslices --field-selector spec.nodeName=gpu-node-1 -o name >"$TMP/out"
[ "$(cat "$TMP/out")" = "resourceslice.resource.k8s.io/gpu-node-1-gpu.kubecomp.io" ] \
  || fail "field selector spec.nodeName: $(cat "$TMP/out")"
sed -i 's|bindingConditions: \[gpu.kubecomp.io/attached\]|bindingConditions: [a.io/1, a.io/2, a.io/3, a.io/4, a.io/5]|' \
  "$TMP/slices.yaml"
if k apply -f "$TMP/slices.yaml" >"$TMP/out" 2>&1; then fail "5 binding conditions accepted"; fi
grep -q 'spec.devices\[0\].bindingConditions: Too many: 5: must have at most 4 items' "$TMP/out" \
  || fail "binding conditions refusal: $(cat "$TMP/out")"
k delete pod trainer >/dev/null
k get resourceclaims -o name >"$TMP/out"
[ ! -s "$TMP/out" ] || fail "the generated claim outlived its pod: $(cat "$TMP/out")"

step "kubectl delete"
k delete deploy web | grep -q 'deployment.apps "web" deleted' || fail "delete deploy"
if k get deploy web >/dev/null 2>&1; then fail "deployment still there"; fi
k delete -f "$TMP/crd.yaml" >/dev/null
if k get widgets >/dev/null 2>&1; then fail "widgets still served after the CRD was deleted"; fi

echo "PASS: kubectl fidelity"
