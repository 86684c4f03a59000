#!/usr/bin/env bash
# `kubectl kubecomp gpu quarantine|release` against a running reconfig-mgr: the API test double,
# chassis-sim (the testbed topology, no latency) and reconfig-mgr polling the pool every second.
# The quarantine written by the plugin must make reconfig-mgr show the GPU Unhealthy and must
# survive reconfig-mgr's own status writes that follow (each poll writes one); the release must
# make it Healthy again and stay released. Waits are kubectl's own watches (kubectl wait,
# kubectl get -w), never sleeps.
# Usage: reconfig_quarantine_test.sh <kube-apiserver-double> <chassis-sim> <reconfig-mgr> <kubectl-kubecomp>
set -euo pipefail
DOUBLE="$1"
SIM="$2"
RECONFIG="$3"
PLUGIN="$4"
REPO="$(cd "$(dirname "$0")/../../.." && pwd)"
command -v kubectl >/dev/null || { echo "kubectl not installed (tools/setup-deps.sh installs it)"; exit 1; }
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in server sim reconfig; do echo "--- $f log"; tail -30 "$TMP/$f.log" || true; done
  exit 1
}
step() { echo "== $*"; }
wait_file() {  # FILE PID WHAT: the process writes FILE once it serves
  for _ in $(seq 1 200); do
    [ -s "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || fail "$3 exited"
    sleep 0.1
  done
  fail "$3 did not start"
}

mkdir -p "$TMP/bin"
cp "$PLUGIN" "$TMP/bin/kubectl-kubecomp"
export PATH="$TMP/bin:$PATH"
export HOME="$TMP"

"$DOUBLE" --port 0 --token t0k3n --kubeconfig-out "$TMP/kubeconfig" >"$TMP/server.log" 2>&1 &
PIDS+=($!)
wait_file "$TMP/kubeconfig" "${PIDS[-1]}" "the API double"
export KUBECONFIG="$TMP/kubeconfig"
k() { kubectl --request-timeout=30s "$@"; }

"$SIM" --topology "$REPO/tools/chassis-sim/testbed.yaml" --port 0 --latency-scale 0 >"$TMP/sim.log" 2>&1 &
PIDS+=($!)
SIM_PID="${PIDS[-1]}"
for _ in $(seq 1 200); do
  grep -q "listening on" "$TMP/sim.log" 2>/dev/null && break
  kill -0 "$SIM_PID" 2>/dev/null || fail "chassis-sim exited"
  sleep 0.1
done
SIM_URL="$(sed -n 's/^chassis-sim listening on \(http:[^ ]*\).*/\1/p' "$TMP/sim.log")"
[ -n "$SIM_URL" ] || fail "no chassis-sim URL"

step "a GPUPool of chassis falcon-0, reconfig-mgr reading it"
k apply -f "$REPO/charts/kubecomp/crds/" >/dev/null
k create namespace kubecomp >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: kubecomp.io/v1alpha1
kind: GPUPool
metadata: {name: pool-a}
spec:
  pollIntervalSeconds: 1
  chassis: [{name: falcon-0, driver: h3, endpoint: "$SIM_URL/chassis/falcon-0", gpuModel: V100}]
  nodes: [{name: css-host-128, hostPort: "48"}, {name: css-host-129, hostPort: "0"}]
YAML
"$RECONFIG" --kubeconfig "$TMP/kubeconfig" --leader-elect=false --port 0 \
  --port-file "$TMP/reconfig.port" >"$TMP/reconfig.log" 2>&1 &
PIDS+=($!)
wait_file "$TMP/reconfig.port" "${PIDS[-1]}" "reconfig-mgr"
k wait gpupool/pool-a --for=jsonpath='{.status.totalGPUs}'=4 --timeout=60s >/dev/null || fail "no inventory in the status"
# status.gpus is sorted by id: falcon-0.000500, falcon-0.000C00, falcon-0.001300, falcon-0.001800.
GPU=falcon-0.001800
[ "$(k get gpupool pool-a -o jsonpath='{.status.gpus[3].id}')" = "$GPU" ] || fail "GPU order"
[ "$(k get gpupool pool-a -o jsonpath='{.status.gpus[3].health}')" = Healthy ] || fail "not healthy at first"

# The next N status versions of the pool (reconfig-mgr writes one per poll): "<quarantined> <health>".
next_versions() {
  timeout 60 kubectl get gpupool pool-a -w -o jsonpath='{.status.quarantine[*].gpu}|{.status.gpus[3].health}{"\n"}' \
    | head -n "$1" || true
}

step "quarantine through the plugin: reconfig-mgr shows it Unhealthy and keeps it"
kubectl kubecomp gpu quarantine "$GPU" --reason "fan failure" | grep -x "GPU $GPU of pool pool-a quarantined: fan failure" \
  || fail "quarantine command"
k wait gpupool/pool-a --for=jsonpath='{.status.gpus[3].health}'=Unhealthy --timeout=30s >/dev/null \
  || fail "reconfig-mgr did not show the GPU Unhealthy: $(k get gpupool pool-a -o jsonpath='{.status}')"
versions="$(next_versions 4)"
echo "$versions"
[ "$(echo "$versions" | wc -l)" = 4 ] || fail "fewer than 4 status versions"
[ "$(echo "$versions" | sort -u)" = "$GPU|Unhealthy" ] || fail "reconfig-mgr's writes dropped the quarantine"
[ "$(k get gpupool pool-a -o jsonpath='{.status.freeGPUs}')" -lt 4 ] || fail "a quarantined GPU counted free"
kubectl kubecomp pools -o wide | grep -E "^pool-a +$GPU .* Unhealthy +fan failure .*fan failure$" >/dev/null \
  || fail "pools: $(kubectl kubecomp pools -o wide)"

step "release through the plugin: Healthy again, and stays released"
kubectl kubecomp gpu release "$GPU" --reason "fan replaced" | grep "released: fan replaced" || fail "release command"
k wait gpupool/pool-a --for=jsonpath='{.status.gpus[3].health}'=Healthy --timeout=30s >/dev/null \
  || fail "reconfig-mgr kept the GPU Unhealthy"
versions="$(next_versions 4)"
echo "$versions"
[ "$(echo "$versions" | sort -u)" = "|Healthy" ] || fail "the quarantine came back"

echo "PASS"
