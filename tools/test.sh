#!/usr/bin/env bash
# Runs every test of the suite: installs the Debian packages it needs, configures and
# builds the release preset, then runs ctest (which prints its summary).
# Usage: bash tools/test.sh [extra ctest arguments, e.g. -L alloc]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup-deps.sh
# The real peers' versions, so a log says which ones the tests ran against (README, "Set-up").
tool_version() { command -v "$1" >/dev/null 2>&1 && "$@" 2>/dev/null | head -1 || echo "not installed"; }
echo "test.sh: kubectl $(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1)," \
  "$(tool_version python3 --version), node $(tool_version node --version), $(tool_version go version)"
jobs="$(nproc)"
cmake --preset release >/dev/null
cmake --build --preset release -j "${jobs}"
# Many tests wait on sockets and child processes rather than on the CPU, so ctest runs
# more of them at once than there are cores.
ctest --preset release -j "$((jobs * 2))" "$@"
