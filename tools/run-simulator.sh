#!/usr/bin/env bash
# The simulator-only reproduction of the KubeComp paper's evaluation (Fig. 8-13), run locally
# with no cluster. Installs what it needs, builds the release preset, then runs the
# trace-driven simulator, which runs the scheduler's own libcore/alloc policies. Tables and
# plots are written under docs/results/ (see docs/results.md).
# Extra arguments are passed to tools/experiments/run-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
bash tools/experiments/run-all.sh "$@"
