#!/usr/bin/env bash
# Runs every test of the suite: installs the Debian packages it needs, configures and
# builds the release preset, then runs ctest (which prints its summary).
# Usage: bash tools/test.sh [extra ctest arguments, e.g. -L alloc]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup-deps.sh
jobs="$(nproc)"
cmake --preset release >/dev/null
cmake --build --preset release -j "${jobs}"
# Many tests wait on sockets and child processes rather than on the CPU, so ctest runs
# more of them at once than there are cores.
ctest --preset release -j "$((jobs * 2))" "$@"
