#!/usr/bin/env bash
# The contract package's two house rules (docs/architecture.md, "Contracts"), checked over the
# tree; the test command runs this (CTest api_contract_rules).
#  1. Every name one process tells another (group, kind, resource, annotation, label, driver
#     name) is written as a string literal only in libcore/api/. Prose that mentions a name
#     (--help text, messages, comments) is not a literal of the name alone, and recorded wire
#     payloads (raw strings) are data, so neither counts.
#  2. No service includes another service's headers.
# Usage: tools/check-contracts.sh [repository root]   Exit 0 clean, 1 with the offending lines.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0

names="$(grep -rnE --include='*.cpp' --include='*.hpp' \
  '"((rt|vni|bridge|gpu)\.)?kubecomp\.io(/[A-Za-z0-9._-]*)?"' libcore services tools \
  | grep -v '^libcore/api/' | grep -vE '^[^:]+:[0-9]+: *//' | grep -v 'R"(' || true)"
if [ -n "$names" ]; then
  echo "contract names written outside libcore/api (use the constant from libcore/api/names.hpp):"
  echo "$names"
  status=1
fi

cross=""
for dir in services/*/; do
  svc="$(basename "$dir")"
  found="$(grep -rnE '#include "services/' "$dir" --include='*.cpp' --include='*.hpp' \
    | grep -v "#include \"services/$svc/" || true)"
  [ -n "$found" ] && cross+="$found"$'\n'
done
if [ -n "$cross" ]; then
  echo "a service includes another service's headers (move the shared part to libcore):"
  printf '%s' "$cross"
  status=1
fi

[ "$status" -eq 0 ] && echo "check-contracts: every contract name in libcore/api, no cross-service include"
exit "$status"
