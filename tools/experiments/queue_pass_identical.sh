#!/usr/bin/env bash
# Proves that two kubecomp-sim binaries decide the same under the queue policies that plan ahead
# (easy-backfill, slack-backfill, each alone and with idle-gather): runs both on Workloads 1-4,
# the Fig. 11 mixes, the Fig. 13 setup and the Alibaba v2023 trace (1 and 4 pools), the setups of
# tools/experiments/beyond.py, and compares the summaries (wall time left out) and the per-job
# CSVs byte for byte. For a change to libcore/alloc's queue pass or backfill that must not change
# any decision (e.g. a faster pass): build the binary before and after, then
#   tools/experiments/queue_pass_identical.sh OLD_SIM NEW_SIM [OUT_DIR]
# Exit 0 when every output is identical, 1 with the differing runs listed otherwise.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 OLD_KUBECOMP_SIM NEW_KUBECOMP_SIM [OUT_DIR]" >&2
  exit 2
fi
old=$1
new=$2
out=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
traces=${KC_TRACE_DIR:-$here/traces/alibaba-gpu-v2023}
pods=$traces/openb_pod_list_default.csv
[[ -f $pods ]] || { echo "Alibaba trace not found at $pods (set KC_TRACE_DIR)" >&2; exit 2; }
mkdir -p "$out/old" "$out/new"

testbed="--jobs 25 --lambda 60 --node-cpu 192 --layout 4+4 --mode composable"
fig11="--jobs 100 --lambda 60 --node-cpu 192 --mode composable --layout 6+6+6+6"
fig13="--workload fig13 --jobs 50 --layout 6+6+6+6+6 --node-cpu 192 --mode composable"
alibaba="--alibaba-pods $pods --alibaba-completed-only --time-scale 0.01 --layout 4+4+8+8 --node-cpu 96 --node-memory-mib 786432 --mode composable"
setups=()
for w in w1 w2 w3 w4; do
  for s in 1 2 3 4 5; do setups+=("$w-s$s|$testbed --workload $w --seed $s"); done
done
for a in 90 70 50 30 10; do
  for s in 1 2 3; do setups+=("fig11-a$a-s$s|$fig11 --workload ae:$a --seed $s"); done
done
for l in 30 60 120; do
  for s in 1 2 3 4 5; do setups+=("fig13-l$l-s$s|$fig13 --lambda $l --seed $s"); done
done
for p in 1 4; do setups+=("alibaba-p$p|$alibaba --pools $p --seed 1"); done

runs=0
differ=()
for setup in "${setups[@]}"; do
  name=${setup%%|*}
  args=${setup#*|}
  for q in easy-backfill slack-backfill; do
    for rc in none idle-gather; do
      key=$name-$q-$rc
      for side in old new; do
        bin=$old
        [[ $side == new ]] && bin=$new
        # shellcheck disable=SC2086
        "$bin" $args --queue "$q" --recompose "$rc" --quiet --jobs-out "$out/$side/$key.csv" \
          --summary-out "$out/$side/$key.full.json"
        grep -v '"wall_s"' "$out/$side/$key.full.json" >"$out/$side/$key.json"
      done
      runs=$((runs + 1))
      if ! cmp -s "$out/old/$key.json" "$out/new/$key.json" || ! cmp -s "$out/old/$key.csv" "$out/new/$key.csv"; then
        differ+=("$key")
      fi
    done
  done
done
if [[ ${#differ[@]} -gt 0 ]]; then
  echo "queue_pass_identical: ${#differ[@]} of $runs runs differ (outputs in $out): ${differ[*]}"
  exit 1
fi
echo "queue_pass_identical: all $runs runs identical (summaries without wall_s, per-job CSVs; outputs in $out)"
