#!/usr/bin/env bash
# Compares the node agent's host view (sysfs + /proc/driver/nvidia, no NVML) with what NVIDIA's
# own tool says, on a machine with NVIDIA GPUs and their driver:
#   bash tools/check-host-view.sh [path/to/disaggpu-devplugin]
# Every GPU nvidia-smi lists must be in the host view, usable, at the same PCI address with the
# same UUID, and the host view must hold no usable GPU nvidia-smi does not list. Prints both and
# exits 1 on a difference. Needs python3 (any) for the comparison.
set -euo pipefail
plugin=${1:-build/release/services/disaggpu-devplugin/disaggpu-devplugin}
shift || true  # more arguments go to the plugin (--sysfs-root, --procfs-root: the self-test)
command -v nvidia-smi >/dev/null || { echo "check-host-view: no nvidia-smi on this machine" >&2; exit 2; }
smi=$(nvidia-smi --query-gpu=uuid,pci.bus_id,index --format=csv,noheader)
view=$("$plugin" --print-host-view "$@")
echo "nvidia-smi --query-gpu=uuid,pci.bus_id,index:"
echo "$smi"
echo "disaggpu-devplugin --print-host-view:"
echo "$view"
SMI="$smi" VIEW="$view" python3 - <<'PY'
import json, os, sys
view = json.loads(os.environ["VIEW"])
usable = {g["uuid"]: g for g in view["gpus"] if g["usable"]}
bad = []
seen = set()
for line in os.environ["SMI"].strip().splitlines():
    uuid, bus, index = [x.strip() for x in line.split(",")]
    # nvidia-smi writes the domain with 8 hex digits ("00000000:3B:00.0"), sysfs with 4.
    dom, rest = bus.split(":", 1)
    bdf = (dom[-4:] + ":" + rest).lower()
    seen.add(uuid)
    g = usable.get(uuid)
    if g is None:
        bad.append(f"{uuid} at {bdf} (index {index}) is not a usable GPU of the host view")
    elif g["bdf"] != bdf:
        bad.append(f"{uuid}: host view says {g['bdf']}, nvidia-smi {bdf}")
    else:
        print(f"same: {uuid} at {bdf}, minor {g['minor']}, NUMA node {g['numaNode']} (nvidia-smi index {index})")
for uuid, g in usable.items():
    if uuid not in seen:
        bad.append(f"{uuid} at {g['bdf']} is usable in the host view but not listed by nvidia-smi")
for b in bad:
    print("DIFFERENT:", b)
sys.exit(1 if bad else 0)
PY
