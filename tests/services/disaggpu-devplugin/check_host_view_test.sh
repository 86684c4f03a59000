#!/usr/bin/env bash
# tools/check-host-view.sh (the comparison with nvidia-smi run on machines with NVIDIA GPUs)
# against a fake host and a stand-in nvidia-smi: agreeing views pass, a UUID at another PCI
# address and a GPU nvidia-smi does not list fail.
# usage: check_host_view_test.sh SOURCE_DIR DEVPLUGIN FAKE_HOST
set -euo pipefail
src=$1 plugin=$2 fakehost=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
"$fakehost" --root "$work/host" init
"$fakehost" --root "$work/host" add --bdf 0000:3b:00.0 --uuid GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f --minor 0
"$fakehost" --root "$work/host" add --bdf 0000:5e:00.0 --uuid GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e60 --minor 1
smi() {  # a stand-in nvidia-smi printing $1 for --query-gpu
  printf '#!/bin/sh\nprintf "%%b" "%s"\n' "$1" > "$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
}
run() {
  PATH="$work/bin:$PATH" bash "$src/tools/check-host-view.sh" "$plugin" \
    --sysfs-root "$work/host/sys" --procfs-root "$work/host/proc" > "$work/out" 2>&1
}
smi 'GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f, 00000000:3B:00.0, 0\nGPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e60, 00000000:5E:00.0, 1\n'
run || { cat "$work/out"; echo "FAIL: agreeing views refused"; exit 1; }
grep -q "same: GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e60 at 0000:5e:00.0, minor 1" "$work/out" || { cat "$work/out"; echo "FAIL: no match line"; exit 1; }
echo "ok: views that agree pass"
smi 'GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f, 00000000:5E:00.0, 0\nGPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e60, 00000000:3B:00.0, 1\n'
if run; then cat "$work/out"; echo "FAIL: swapped addresses accepted"; exit 1; fi
grep -q "DIFFERENT: GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f: host view says 0000:3b:00.0" "$work/out" || { cat "$work/out"; exit 1; }
echo "ok: a UUID at another PCI address is a difference"
smi 'GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f, 00000000:3B:00.0, 0\n'
if run; then cat "$work/out"; echo "FAIL: an extra usable GPU accepted"; exit 1; fi
grep -q "usable in the host view but not listed by nvidia-smi" "$work/out" || { cat "$work/out"; exit 1; }
echo "ok: a GPU nvidia-smi does not list is a difference"
echo PASS
