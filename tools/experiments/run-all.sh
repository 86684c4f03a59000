#!/usr/bin/env bash
# Reproduces the paper's evaluation (paper 001, Fig. 8-13) with kubecomp-sim and writes every
# table and plot under docs/results/. Builds nothing: it expects the release build
# (cmake --preset release && cmake --build --preset release --target kubecomp-sim).
# Runs two simulations at a time (KC_EXPERIMENT_JOBS to change); about 15 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM="${KUBECOMP_SIM:-build/release/tools/kubecomp-sim/kubecomp-sim}"
if [ ! -x "$SIM" ]; then
  echo "run-all: $SIM not found; build the release preset first" >&2
  exit 1
fi
# Debian's python3 has matplotlib (python3-matplotlib); a pyenv python may not.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
start=$(date +%s)
for fig in fig08_10 fig09 fig11 fig12 fig13 parallel_moves gangs; do
  echo "run-all: $fig ..." >&2
  "$PY" "tools/experiments/$fig.py"
done
echo "run-all: done in $(( $(date +%s) - start )) s; results in docs/results/ (see docs/results.md)" >&2
