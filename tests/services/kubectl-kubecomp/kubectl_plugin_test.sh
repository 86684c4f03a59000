#!/usr/bin/env bash
# `kubectl kubecomp ...` through the real kubectl (its plugin mechanism: kubectl-kubecomp on
# PATH) against the API test double with the chart's CRDs: CRDs absent -> a clear error; every
# command on objects written the way the daemons write them; -o json parses; moves --watch
# prints a phase change and stops after N changes, or at --watch-timeout; gpu quarantine and
# release change status.quarantine and record Events; --context, $KUBECONFIG lists, the
# context's namespace, refused credentials; completion through `kubectl __complete`.
# Usage: kubectl_plugin_test.sh <kube-apiserver-double> <kubectl-kubecomp>
# Pipes into grep read the whole output (no -q): with pipefail, a grep ending the pipe early
# would fail the writer with SIGPIPE.
set -euo pipefail
DOUBLE="$1"
PLUGIN="$2"
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
fail() { echo "FAIL: $*"; echo "--- server log"; tail -50 "$TMP/server.log" || true; exit 1; }
step() { echo "== $*"; }

# The plugin as an operator installs it: a file named kubectl-kubecomp on PATH (and the
# completion helper next to it).
mkdir -p "$TMP/bin"
cp "$PLUGIN" "$TMP/bin/kubectl-kubecomp"
cp "$REPO/tools/kubectl-kubecomp/kubectl_complete-kubecomp" "$TMP/bin/"
export PATH="$TMP/bin:$PATH"
export HOME="$TMP"  # kubectl's discovery cache

TOKEN="token-$RANDOM$RANDOM"
"$DOUBLE" --port 0 --token "$TOKEN" --kubeconfig-out "$TMP/kubeconfig" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  [ -s "$TMP/kubeconfig" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "the double exited"
  sleep 0.1
done
[ -s "$TMP/kubeconfig" ] || fail "no kubeconfig written"
export KUBECONFIG="$TMP/kubeconfig"
k() { kubectl --request-timeout=30s "$@"; }
kk() { kubectl kubecomp "$@"; }

step "kubectl finds the plugin"
kubectl plugin list 2>/dev/null | grep "$TMP/bin/kubectl-kubecomp" || fail "kubectl plugin list: $(kubectl plugin list 2>&1)"
kk --version | grep -E '^kubectl-kubecomp [0-9]+\.[0-9]+\.[0-9]+' || fail "--version: $(kk --version 2>&1)"
kk pools --help | grep -- "--output" || fail "pools --help"

step "CRDs not installed: a clear error, exit 1"
set +e
kk pools >"$TMP/out" 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 1 ] || fail "pools without CRDs exited $rc"
grep -q "does not serve gpupools.kubecomp.io/v1alpha1 (404 Not Found); install the kubecomp CRDs" "$TMP/err" \
  || fail "CRDs-absent message: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "stdout not empty: $(cat "$TMP/out")"

step "apply the chart's CRDs and objects as the daemons write them"
k apply -f "$REPO/charts/kubecomp/crds/" >/dev/null
k create namespace team-b >/dev/null
cat >"$TMP/objects.yaml" <<'YAML'
apiVersion: kubecomp.io/v1alpha1
kind: GPUPool
metadata: {name: pool-a}
spec:
  chassis: [{name: c0, driver: h3, endpoint: "http://127.0.0.1:9"}]
  nodes: [{name: host01, hostPort: "c0/1"}, {name: host02, hostPort: "c0/2"}]
---
apiVersion: v1
kind: Node
metadata:
  name: host01
  labels: {rt.kubecomp.io/capable: "true"}
  annotations: {rt.kubecomp.io/cores: "0-1", rt.kubecomp.io/bound: "950000/1000000", rt.kubecomp.io/kernel: hcbs}
---
apiVersion: v1
kind: Pod
metadata:
  name: big
  namespace: default
  annotations: {kubecomp.io/dst-node: host01}
spec:
  schedulerName: kubecomp-sched
  containers: [{name: main, image: cuda, resources: {limits: {kubecomp.io/gpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: ctrl
  namespace: default
  annotations: {rt.kubecomp.io/runtime-us: "3000", rt.kubecomp.io/period-us: "10000", rt.kubecomp.io/assigned: "app=1"}
spec:
  nodeName: host01
  containers: [{name: app, image: rt}]
---
apiVersion: kubecomp.io/v1
kind: VNI
metadata:
  name: vni-u-mpi
  namespace: team-b
  labels: {vni.kubecomp.io/owner-uid: u-mpi}
spec: {vni: 1024}
---
apiVersion: bridge.kubecomp.io/v1alpha1
kind: BridgeJob
metadata: {name: slurm-job-1, namespace: default}
spec:
  resourceURL: "http://slurm.example:6820"
  resourcesecret: slurm-secret
  image: kubecomp/bridge-pod-slurm:0.1.0
  jobdata: {jobscript: "#!/bin/sh\necho hi"}
YAML
k apply -f "$TMP/objects.yaml" >/dev/null
cat >"$TMP/pool-status.json" <<'JSON'
{"status": {"gpus": [
   {"id": "c0.01", "uuid": "GPU-1", "model": "A100", "chassis": "c0", "node": "host01", "hostPort": "c0/1", "health": "Healthy", "inUseBy": ["default/train"]},
   {"id": "c0.02", "uuid": "GPU-2", "model": "A100", "chassis": "c0", "node": "host01", "hostPort": "c0/1", "health": "Healthy"},
   {"id": "c0.06", "uuid": "GPU-6", "model": "A100", "chassis": "c0", "node": "host02", "hostPort": "c0/2", "health": "Healthy", "draining": true}],
 "moves": [{"gpu": "c0.06", "fromNode": "host02", "fromHost": "c0/2", "toNode": "host01", "toHost": "c0/1",
            "pod": "default/big", "podUID": "u", "phase": "Detaching", "attempts": 0,
            "startedAt": "2026-11-28T11:59:20Z", "phaseSince": "2026-11-28T11:59:45Z", "message": "withdrawn"}],
 "quarantine": []}}
JSON
k patch gpupool pool-a --subresource=status --type merge --patch-file "$TMP/pool-status.json" >/dev/null
k patch pod big --subresource=status --type merge -p \
  '{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"WaitingForReconfiguration","message":"waiting for 1 kubecomp.io/gpu to be attached to node host01"}]}}' >/dev/null
k patch bridgejob slurm-job-1 --subresource=status --type merge -p \
  '{"status":{"jobStatus":"RUNNING","remoteJobId":"4242"}}' >/dev/null

step "pools"
kk pools >"$TMP/out"
cat "$TMP/out"
head -1 "$TMP/out" | grep -E '^POOL +GPU +MODEL +NODE +POD +HEALTH +QUARANTINE +MOVE$' || fail "pools header"
grep -Eq '^pool-a +c0\.01 +A100 +host01 +default/train +Healthy +<none> +<none>$' "$TMP/out" || fail "pools c0.01 row"
grep -Eq '^pool-a +c0\.06 +A100 +host02 +<none> +Healthy,Draining +<none> +Detaching to host01 for default/big$' "$TMP/out" || fail "pools c0.06 row"
kk pools -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["kind"]=="PoolGPUList" and len(d["items"])==3, d' \
  || fail "pools -o json"
kk pools -o yaml | python3 -c 'import sys,yaml; d=yaml.safe_load(sys.stdin); assert d["items"][2]["move"]["phase"]=="Detaching", d' \
  || fail "pools -o yaml"

step "moves"
kk moves -o wide >"$TMP/out"
cat "$TMP/out"
grep -Eq '^pool-a +c0\.06 +default/big +host02 +host01 +Detaching ' "$TMP/out" || fail "moves row"

step "moves --watch: one phase change, then exit"
kk moves --watch --max-changes 1 --watch-timeout 120s >"$TMP/watch.out" 2>&1 &
WATCH_PID=$!
# The journal is printed before the watch starts from the list's resourceVersion: a change
# made after the header shows is delivered even if it lands before the watch connects.
for _ in $(seq 1 300); do
  grep -q '^POOL' "$TMP/watch.out" 2>/dev/null && break
  kill -0 "$WATCH_PID" 2>/dev/null || fail "the watch exited early: $(cat "$TMP/watch.out")"
  sleep 0.1
done
k patch gpupool pool-a --subresource=status --type json -p \
  '[{"op":"replace","path":"/status/moves/0/phase","value":"Attaching"},{"op":"replace","path":"/status/moves/0/phaseSince","value":"2026-11-28T12:00:09Z"}]' >/dev/null
wait "$WATCH_PID" || fail "the watch failed: $(cat "$TMP/watch.out")"
WATCH_PID=""
cat "$TMP/watch.out"
grep -q '^pool-a  c0.06  default/big -> host01  Detaching -> Attaching (Detaching took 24s)' "$TMP/watch.out" \
  || fail "no phase change line"

step "moves --watch --watch-timeout: stops on time with nothing to report"
start=$(date +%s)
kk moves --watch --watch-timeout 2s -o json >"$TMP/watch.json"
took=$(( $(date +%s) - start ))
[ "$took" -ge 1 ] && [ "$took" -le 10 ] || fail "--watch-timeout 2s took ${took}s"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"]=="MoveList"' "$TMP/watch.json" \
  || fail "watch -o json: $(cat "$TMP/watch.json")"

step "pending"
kk pending >"$TMP/out"
cat "$TMP/out"
grep -Eq '^big +2 gpu +host01 +WaitingForReconfiguration +c0\.06 Attaching ' "$TMP/out" || fail "pending row"

step "gpu quarantine and release"
kk gpu quarantine c0.02 --reason "fan failure" | grep -x "GPU c0.02 of pool pool-a quarantined: fan failure" || fail "quarantine"
[ "$(k get gpupool pool-a -o jsonpath='{.status.quarantine[0].gpu}')" = c0.02 ] || fail "status.quarantine not written"
[ "$(k get gpupool pool-a -o jsonpath='{.status.quarantine[0].reason}')" = "fan failure" ] || fail "reason not recorded"
kk pools | grep -E '^pool-a +c0\.02 .* fan failure' || fail "pools does not show the quarantine"
k get events -n default -o json | python3 -c '
import json,sys
evs=[e for e in json.load(sys.stdin)["items"] if e.get("reason")=="GPUQuarantined"]
assert evs and evs[0]["involvedObject"]["name"]=="pool-a" and "fan failure" in evs[0]["message"], evs' || fail "no GPUQuarantined Event"
kk gpu release c0.02 --pool pool-a --reason "fan replaced" | grep "released: fan replaced" || fail "release"
[ -z "$(k get gpupool pool-a -o jsonpath='{.status.quarantine[*].gpu}')" ] || fail "release left the entry"
set +e
kk gpu quarantine c7.77 --reason x 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 1 ] && grep -q "no GPUPool lists GPU c7.77" "$TMP/err" || fail "unknown GPU: rc $rc $(cat "$TMP/err")"

step "vnis, rt, bridgejobs"
kk vnis -A | grep -E '^team-b +vni-u-mpi +1024 ' || fail "vnis -A: $(kk vnis -A 2>&1)"
kk vnis 2>&1 | grep "No VNIs found." || fail "vnis in default"
kk rt host01 >"$TMP/out"
cat "$TMP/out"
grep -q '^Node host01: kernel hcbs, bound 950000/1000000us per core (95.0%), RT cores 0-1$' "$TMP/out" || fail "rt preface"
grep -Eq '^1 +95\.0% +30\.0% +65\.0% +default/ctrl/app 3000/10000us$' "$TMP/out" || fail "rt core 1"
kk bridgejobs | grep -E '^slurm-job-1 +RUNNING +4242 ' || fail "bridgejobs"

step "claims: resource.k8s.io/v1 claims of our driver"
cat >"$TMP/claim.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.kubecomp.io}}]
YAML
if k apply -f "$TMP/claim.yaml" >/dev/null 2>"$TMP/err"; then
  kk claims | grep -E '^gpu-claim +pending ' || fail "claims: $(kk claims 2>&1)"
else
  echo "skipped: the double refused the claim: $(cat "$TMP/err")"
fi

step "namespace from the context, --context, \$KUBECONFIG lists"
cp "$TMP/kubeconfig" "$TMP/kc2"
CTX="$(KUBECONFIG="$TMP/kc2" kubectl config current-context)"
KUBECONFIG="$TMP/kc2" kubectl config set-context --current --namespace=team-b >/dev/null
KUBECONFIG="$TMP/kc2" kk vnis | grep '^vni-u-mpi ' || fail "the context's namespace is not the default"
KUBECONFIG="$TMP/kc2" kubectl config set-cluster nowhere --server=https://127.0.0.1:1 >/dev/null
KUBECONFIG="$TMP/kc2" kubectl config set-context nowhere --cluster=nowhere --user="$(KUBECONFIG="$TMP/kc2" kubectl config view -o jsonpath='{.contexts[0].context.user}')" >/dev/null
KUBECONFIG="$TMP/kc2" kubectl config use-context nowhere >/dev/null
set +e
KUBECONFIG="$TMP/kc2" kk pools --request-timeout 5s 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 1 ] && grep -q "cannot reach the API server at https://127.0.0.1:1" "$TMP/err" || fail "unreachable: rc $rc $(cat "$TMP/err")"
KUBECONFIG="$TMP/kc2" kk --context "$CTX" pools | grep '^pool-a ' || fail "--context"
KUBECONFIG="$TMP/missing:$TMP/kubeconfig" kk pools | grep '^pool-a ' || fail "\$KUBECONFIG list"
kk --kubeconfig "$TMP/kc2" --context "$CTX" moves | grep '^pool-a ' || fail "--kubeconfig"

step "refused credentials"
sed "s/$TOKEN/wrong-token/" "$TMP/kubeconfig" >"$TMP/kc-bad"
set +e
KUBECONFIG="$TMP/kc-bad" kk pools 2>"$TMP/err"; rc=$?
set -e
[ "$rc" = 1 ] && grep -q "refused the credentials (401 Unauthorized)" "$TMP/err" || fail "401: rc $rc $(cat "$TMP/err")"

step "completion through kubectl (kubectl_complete-kubecomp)"
# (Captured first: with pipefail, a grep that ends the pipe early would fail it.)
completions="$(kubectl __complete kubecomp po 2>/dev/null)"
grep -qx pools <<<"$completions" || fail "kubectl __complete: $(kubectl __complete kubecomp po 2>&1)"
kk completion bash | bash -n || fail "completion bash does not parse"

echo "PASS"
