#!/usr/bin/env bash
# The tree is formatted by its .clang-format (Debian bookworm's clang-format 14, installed by
# tools/setup-deps.sh); the test command runs this (CTest format_check). Exit 0 clean, 1 with
# every file and line that differs. To fix: tools/check-format.sh --fix
# Usage: tools/check-format.sh [--fix] [repository root]
set -euo pipefail
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
cd "${1:-$(dirname "$0")/..}"
command -v clang-format >/dev/null || { echo "clang-format is not installed (tools/setup-deps.sh installs it)"; exit 1; }
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
else
  mapfile -t files < <(find libcore services tools tests -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc')
fi
if [ "$fix" -eq 1 ]; then
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
if ! out="$(clang-format --dry-run --Werror "${files[@]}" 2>&1)"; then
  echo "$out" | grep -E 'warning:|error:' | head -50
  echo "check-format: $(echo "$out" | grep -E 'warning:|error:' | cut -d: -f1 | sort -u | wc -l) file(s) differ from .clang-format; run tools/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format ($(clang-format --version | head -1))"
