#!/usr/bin/env bash
# Checks the README's two commands on a fresh Debian bookworm: builds a minimal bookworm root
# with mmdebstrap (from deb.debian.org), clones this repository's HEAD into it, then runs
# `bash tools/run-main.sh` and `bash tools/test.sh` inside it through chroot, printing the wall
# time of each. The way to check a change to the set-up (tools/setup-deps.sh, a new tool a test
# needs); not part of the test command. Needs root, about 3 GiB of disk and an hour on 2 cores.
#
# Inside the root: /proc, /sys (with the host's cgroup hierarchies: the rt-kubelet-shim tests
# need cgroup v1 RT group scheduling and skip without it) and /dev are bound from the host, so
# the real-peer tests (containerd, slurmctld) run as on a machine; the host's ../shared is bound
# read-only beside the clone when present; a policy-rc.d keeps the packages' postinst scripts
# from starting daemons (munge, containerd, slurmctld), as a systemd-less chroot must. Everything
# is unmounted on exit, on failure too, and processes left running inside the root are ended.
#
# Usage: sudo bash tools/check-fresh.sh [--only-test] [--deps-only] [--worktree] [--keep] [--dir DIR]
#   --only-test  skip command 1 (tools/run-main.sh)
#   --deps-only  only run tools/setup-deps.sh inside the root, then print the tools' versions
#                (kubectl, node, npm, go, cmake, s3rver)
#   --worktree   also copy the working tree's uncommitted changes and untracked, not ignored
#                files over the clone (default: HEAD only)
#   --keep       keep the root afterwards (unmounted) instead of removing it
#   --dir DIR    build the root in DIR (default: a new directory under /var/tmp); DIR must be absent
#                or empty
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

only_test=0 deps_only=0 worktree=0 keep=0 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only-test) only_test=1 ;;
    --deps-only) deps_only=1 ;;
    --worktree) worktree=1 ;;
    --keep) keep=1 ;;
    --dir) [ $# -ge 2 ] || { echo "check-fresh: --dir needs a directory" >&2; exit 2; }; dir="$2"; shift ;;
    --dir=*) dir="${1#--dir=}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "check-fresh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$(id -u)" -ne 0 ]; then
  echo "check-fresh: needs root (mmdebstrap, mounts, chroot); run it with sudo" >&2
  exit 2
fi

repo="$(cd "$(dirname "$0")/.." && pwd -P)"
# The repository may belong to another user than root: git would refuse it as "dubious".
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
name="$(basename "$repo")"
shared="$(dirname "$repo")/shared"

if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "check-fresh: mmdebstrap is missing; installing it with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

if [ -z "$dir" ]; then
  dir="$(mktemp -d /var/tmp/kubecomp-fresh.XXXXXX)"
else
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    echo "check-fresh: $dir exists and is not empty" >&2
    exit 2
  fi
  mkdir -p "$dir"
fi
root="$(cd "$dir" && pwd -P)"
if [ "$root" = / ]; then echo "check-fresh: refusing / as the root" >&2; exit 2; fi
chmod 755 "$root"  # mktemp's 0700 would shut the packages' system users (munge, slurm) out of /

# Mounts made under the root, in order; cleanup unmounts them in reverse.
mounts=()
cleanup() {
  local rc=$? pid p i left
  set +e
  # Processes still running inside the root (daemons a test left behind) keep mounts busy.
  for sig in TERM KILL; do
    left=0
    for p in /proc/[0-9]*; do
      pid="${p#/proc/}"
      if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then
        kill -s "$sig" "$pid" 2>/dev/null && left=1
      fi
    done
    [ "$left" -eq 1 ] && sleep 2
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" \
      || echo "check-fresh: could not unmount ${mounts[i]}" >&2
  done
  # Mounts a test made inside the root (containerd's snapshots), deepest first.
  findmnt -rn -o TARGET | grep "^$root/" | sort -r | while read -r t; do
    umount "$t" 2>/dev/null || umount -l "$t" 2>/dev/null
  done
  if findmnt -rn -o TARGET | grep -q "^$root\(/\|\$\)"; then
    echo "check-fresh: mounts remain under $root; not removing it:" >&2
    findmnt -rn -o TARGET | grep "^$root\(/\|\$\)" >&2
  elif [ "$keep" -eq 1 ]; then
    echo "check-fresh: kept the root at $root"
  else
    rm -rf --one-file-system "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bind() {  # bind SRC DST [ro]: recursive bind, not propagating back to the host
  mkdir -p "$2"
  mount --rbind "$1" "$2"
  mounts+=("$2")
  mount --make-rslave "$2"
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

echo "check-fresh: building a minimal bookworm root in $root"
t=$(date +%s)
mmdebstrap --quiet --variant=minbase --include=git,ca-certificates bookworm "$root" \
  "deb http://deb.debian.org/debian bookworm main" \
  "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main"
echo "check-fresh: mmdebstrap took $(elapsed "$t")"

cp -L /etc/resolv.conf "$root/etc/resolv.conf"
grep -q localhost "$root/etc/hosts" 2>/dev/null || printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >>"$root/etc/hosts"
# A machine behind a TLS-intercepting proxy trusts the proxy's CA: carry the host's local CAs
# (/usr/local/share/ca-certificates) so that npm can reach its registry (node's own CA list
# ignores the system's, hence NODE_EXTRA_CA_CERTS). Without local CAs nothing is added.
extra_ca=0
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  echo "check-fresh: carrying the host's local CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
  extra_ca=1
fi
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

bind /proc "$root/proc"
bind /sys "$root/sys"
bind /dev "$root/dev"
if ! mountpoint -q /sys/fs/cgroup && grep -qw cgroup2 /proc/filesystems; then
  mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
  mounts+=("$root/sys/fs/cgroup")
fi

dest="/work/$name"
echo "check-fresh: cloning $repo (HEAD $(git -C "$repo" rev-parse --short HEAD)) to $dest in the root"
mkdir -p "$root/work"
git clone --quiet --no-local "$repo" "$root$dest"
if [ "$worktree" -eq 1 ]; then
  echo "check-fresh: copying the working tree's changes over the clone"
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$root$dest"
  (cd "$repo" && git ls-files -z --deleted) | (cd "$root$dest" && xargs -0 -r rm -f --)
elif [ -n "$(git -C "$repo" status --porcelain)" ]; then
  echo "check-fresh: note: the working tree has uncommitted changes; they are not in the clone (--worktree copies them)"
fi
if [ -d "$shared" ]; then
  bind "$shared" "$root/work/shared" ro
else
  echo "check-fresh: no $shared; the tests that need it skip"
fi

in_root() {  # in_root COMMAND: runs COMMAND in the clone inside the root, with a clean environment
  local ca=()
  [ "$extra_ca" -eq 0 ] || ca=(NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
  env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "${ca[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$root" bash -c "cd $dest && $1"
}

rc=0
run_step() {  # run_step LABEL COMMAND
  local t0 r=0
  echo "check-fresh: === $1: $2"
  t0=$(date +%s)
  in_root "$2" || r=$?
  echo "check-fresh: === $1: exit $r, wall time $(elapsed "$t0")"
  [ "$r" -eq 0 ] || rc=1
}

if [ "$deps_only" -eq 1 ]; then
  run_step setup-deps "bash tools/setup-deps.sh && kubectl version --client && echo node \$(node --version), npm \$(npm --version) \
    && go version && cmake --version | head -1 && /root/.cache/kubecomp/npm/node_modules/.bin/s3rver --version"
else
  [ "$only_test" -eq 1 ] || run_step "command 1" "bash tools/run-main.sh"
  run_step "command 2" "bash tools/test.sh"
fi
exit "$rc"
