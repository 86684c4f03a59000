#!/usr/bin/env bash
# The suite's main job, run locally with no cluster: the paper's testbed experiment (paper 001,
# Fig. 7 and Fig. 8) through the REAL daemons on the development control plane. Installs what
# it needs, builds the release preset, then runs tools/demo/kubecomp-demo: Workloads 1-4 x
# {pooled, concentrated, even}, every daemon a separate process (API server double, chassis
# simulator, two kubelet stand-ins, two disaggpu-devplugins, reconfig-mgr, kubecomp-sched),
# time scaled. Results go to out/demo/ (ignored by git): a table on stdout, results.json,
# wait.png and every daemon's log. Extra arguments go to kubecomp-demo (see --help).
# The simulator-only reproduction of every figure: tools/run-simulator.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
exec /usr/bin/python3 tools/demo/kubecomp-demo "$@"
