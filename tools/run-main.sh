#!/usr/bin/env bash
# The suite's main job, run locally with no cluster. Installs what it needs, builds the
# release preset, and runs the most complete end-to-end run the suite has.
# Today: the allocation benchmarks (paper policies vs baselines), printing comparisons.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
build/release/tools/bench/bench_alloc "$@"
