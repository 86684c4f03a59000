#!/usr/bin/env bash
# Builds the images of docker/*.Dockerfile with buildah, from Debian packages only: no registry
# and no Docker engine. The bases the Dockerfiles name (debian:bookworm, debian:bookworm-slim)
# are made here with mmdebstrap from a Debian mirror, cached as tarballs and imported into a
# buildah store of this script's own; `buildah build` then builds each Dockerfile against them
# (--pull=false: nothing is ever pulled).
#
#   sudo bash tools/build-images.sh                       # every image, compiled in its build stage
#   sudo bash tools/build-images.sh --prebuilt build/release vni-webhook kubecomp-sched
#
# Without --prebuilt each Dockerfile's build stage compiles its target (`--target build`, one
# per CMake component) and the runtime stage copies from that image. --prebuilt DIR skips the
# compile: the runtime stage copies `cmake --install DIR --component <component> --strip`, put
# into an image here; either image is passed as the Dockerfiles' BINARIES build argument, and
# only debian:bookworm-slim is needed with --prebuilt. Needs root (mmdebstrap --mode=root,
# buildah's chroot isolation), buildah and mmdebstrap (tools/setup-deps.sh), and the mirror; the
# stages' `apt-get install` reaches it too. Layers are cached in the store (--layers), so a rerun
# only redoes what changed. Prints one line per image: name, size, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: tools/build-images.sh [options] [IMAGE...]
Builds docker/<IMAGE>.Dockerfile (default: every one) with buildah into a store of its own.
  --prebuilt DIR        runtime images from the binaries of the existing CMake build DIR
                        (no build stage, no compiler); default: compile in the build stage
  --work-dir DIR        base tarballs, buildah store and state (default: build/images)
  --registry NAME       image name prefix (default: localhost/kubecomp): NAME/<IMAGE>:TAG
  --tag TAG             image tag (default: the chart's appVersion)
  --mirror URL          Debian mirror (default: http://deb.debian.org/debian)
  --security-mirror URL Debian security mirror (default: http://deb.debian.org/debian-security)
  --storage-driver D    overlay or vfs (default: overlay where it mounts, else vfs)
  --fresh               remake the bases and build every layer anew (no cache)
  --print-buildah       print the buildah command line for this store (to push, inspect) and exit
  -h, --help            this text
After a build: $(tools/build-images.sh --print-buildah) images | push ...
EOF
}

die() {
  echo "build-images: $*" >&2
  exit 1
}

prebuilt=""
work_dir="build/images"
registry="localhost/kubecomp"
tag=""
mirror="http://deb.debian.org/debian"
security_mirror="http://deb.debian.org/debian-security"
driver=""
fresh=0
print_buildah=0
images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt="${2:?--prebuilt needs a build directory}"; shift 2 ;;
    --work-dir) work_dir="${2:?--work-dir needs a directory}"; shift 2 ;;
    --registry) registry="${2:?--registry needs a name}"; shift 2 ;;
    --tag) tag="${2:?--tag needs a value}"; shift 2 ;;
    --mirror) mirror="${2:?--mirror needs a URL}"; shift 2 ;;
    --security-mirror) security_mirror="${2:?--security-mirror needs a URL}"; shift 2 ;;
    --storage-driver) driver="${2:?--storage-driver needs overlay or vfs}"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --print-buildah) print_buildah=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) images+=("$1"); shift ;;
  esac
done

mkdir -p "$work_dir"
work_dir="$(cd "$work_dir" && pwd)"
case "$driver" in
  "" | overlay | vfs) ;;
  *) die "--storage-driver must be overlay or vfs, not $driver" ;;
esac
# The store's driver is fixed when it is created; remember it.
if [ -z "$driver" ] && [ -f "$work_dir/storage-driver" ]; then
  driver="$(cat "$work_dir/storage-driver")"
fi

buildah_cmd() {
  buildah --root "$work_dir/store" --runroot "$work_dir/run" --storage-driver "$1" "${@:2}"
}

# overlay where the kernel and the file system under the work dir allow it (a real mount of a
# scratch container proves it), else vfs (a full copy per layer: slower, more disk).
pick_driver() {
  local c
  if c="$(buildah_cmd overlay from scratch 2>/dev/null)" && buildah_cmd overlay mount "$c" >/dev/null 2>&1; then
    buildah_cmd overlay rm "$c" >/dev/null
    echo overlay
  else
    [ -n "${c:-}" ] && buildah_cmd overlay rm "$c" >/dev/null 2>&1 || true
    rm -rf "$work_dir/store" "$work_dir/run"
    echo vfs
  fi
}

if [ "$print_buildah" -eq 1 ]; then
  echo "buildah --root $work_dir/store --runroot $work_dir/run --storage-driver ${driver:-overlay}"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, buildah's chroot isolation); run it with sudo"
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (bash tools/setup-deps.sh installs it)"
done
if [ -n "$prebuilt" ]; then
  [ -f "$prebuilt/CMakeCache.txt" ] || die "--prebuilt $prebuilt: not a CMake build directory"
  command -v cmake >/dev/null 2>&1 || die "cmake is missing"
fi

if [ -z "$tag" ]; then
  tag="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/kubecomp/Chart.yaml)"
  [ -n "$tag" ] || die "no appVersion in charts/kubecomp/Chart.yaml; pass --tag"
fi

if [ "${#images[@]}" -eq 0 ]; then
  for f in docker/*.Dockerfile; do
    images+=("$(basename "$f" .Dockerfile)")
  done
fi
for name in "${images[@]}"; do
  [ -f "docker/$name.Dockerfile" ] || die "no docker/$name.Dockerfile (images: $(ls docker | sed -n 's/\.Dockerfile$//p' | tr '\n' ' '))"
done

if [ "$fresh" -eq 1 ]; then
  rm -rf "$work_dir/store" "$work_dir/run" "$work_dir/storage-driver" "$work_dir"/bookworm*.tar*
fi
if [ -z "$driver" ]; then
  driver="$(pick_driver)"
fi
echo "$driver" >"$work_dir/storage-driver"
B=(buildah_cmd "$driver")

# One Debian root per base, as Debian's own images are made: minbase (Essential + apt), merged
# /usr without the usrmerge package, and an apt that keeps no package cache (pkgcache.bin,
# srcpkgcache.bin: some 70 MB in every layer that runs `apt-get update`) nor the downloaded
# .debs. The slim one also leaves out man pages, docs (but their copyright files), locales and
# info, and keeps those path filters for later apt-get installs, as debian:bookworm-slim does.
apt_clean='Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\nDPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };\n'
# (mmdebstrap's own clean-up runs after the customize hooks and, reading that file, no longer
# finds the two caches: the hook removes them.)
base_opts=(--customize-hook="printf '$apt_clean' >\"\$1/etc/apt/apt.conf.d/docker-clean\" && rm -f \"\$1\"/var/cache/apt/*.bin")
slim_opts=(--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*')

# make_base NAME [mmdebstrap options...]: $work_dir/NAME.tar, remade only when the command changes.
make_base() {
  local name="$1" tar="$work_dir/$1.tar"
  shift
  local cmd=(mmdebstrap --mode=root --variant=minbase --format=tar
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --aptopt='Acquire::Languages "none"' "$@"
    bookworm "$tar" "deb $mirror bookworm main" "deb $mirror bookworm-updates main"
    "deb $security_mirror bookworm-security main")
  if [ -f "$tar" ] && [ "$(cat "$tar.cmd" 2>/dev/null)" = "${cmd[*]}" ]; then
    return
  fi
  echo "build-images: $name from $mirror with mmdebstrap"
  rm -f "$tar" "$tar.cmd"
  "${cmd[@]}" >"$work_dir/$name.log" 2>&1 || die "mmdebstrap of $name failed (log: $work_dir/$name.log)"
  echo "${cmd[*]}" >"$tar.cmd"
}

# import_base NAME REF: the tarball as image REF, unless REF already holds this very tarball.
import_base() {
  local tar="$work_dir/$1.tar" ref="$2" sum c
  sum="$(sha256sum "$tar" | cut -d' ' -f1)"
  if [ "$("${B[@]}" inspect --type image --format '{{index .ImageAnnotations "io.kubecomp.base-sha256"}}' "$ref" 2>/dev/null)" = "$sum" ]; then
    return
  fi
  c="$("${B[@]}" from scratch)"
  "${B[@]}" add "$c" "$tar" / >/dev/null
  "${B[@]}" config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --annotation "io.kubecomp.base-sha256=$sum" "$c"
  "${B[@]}" commit -q --rm "$c" "$ref" >/dev/null
}

make_base bookworm-slim "${base_opts[@]}" "${slim_opts[@]}"
import_base bookworm-slim docker.io/library/debian:bookworm-slim
if [ -z "$prebuilt" ]; then
  make_base bookworm "${base_opts[@]}"
  import_base bookworm docker.io/library/debian:bookworm
fi

cache=(--layers)
[ "$fresh" -eq 1 ] && cache+=(--no-cache)
ctx="$(mktemp -d "$work_dir/context.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

# The CMake component a Dockerfile installs (bridge-pod for every bridge-pod-<backend>).
component_of() {
  sed -n 's/.*cmake --install build\/release --component \([^ ]*\) .*/\1/p' "docker/$1.Dockerfile" | head -1
}

# binaries_image NAME COMPONENT: sets binaries_ref to an image holding COMPONENT's install tree
# under /out, made once per component. --prebuilt: `cmake --install` of that build. Otherwise
# the Dockerfile's own build stage (`--target build`, which compiles): buildah 1.28 (bookworm)
# takes a stage name that comes from an ARG (`FROM ${BINARIES}` with BINARIES=build) for an
# image to pull, so the build stage is built first and passed in by image name; Docker resolves
# the default to the stage itself.
declare -A made=()
binaries_ref=""
binaries_image() {
  local name="$1" component="$2" c
  if [ -n "$prebuilt" ]; then
    binaries_ref="localhost/kubecomp-binaries/$component:$tag"
  else
    binaries_ref="localhost/kubecomp-build/$component:$tag"
  fi
  [ -n "${made[$component]:-}" ] && return
  if [ -n "$prebuilt" ]; then
    rm -rf "${ctx:?}/$component"
    cmake --install "$prebuilt" --component "$component" --prefix "$ctx/$component" --strip >/dev/null \
      || die "cmake --install $prebuilt --component $component failed"
    [ -n "$(ls -A "$ctx/$component" 2>/dev/null)" ] || die "$prebuilt installs nothing for component $component (not built?)"
    c="$("${B[@]}" from scratch)"
    "${B[@]}" copy "$c" "$ctx/$component/" /out/ >/dev/null
    "${B[@]}" commit -q --rm "$c" "$binaries_ref" >/dev/null
  else
    "${B[@]}" build --isolation chroot --pull=false "${cache[@]}" --target build -f "docker/$name.Dockerfile" \
      -t "$binaries_ref" . >"$work_dir/$component.compile.log" 2>&1 \
      || { tail -20 "$work_dir/$component.compile.log" >&2; die "the build stage of $name failed (log: $work_dir/$component.compile.log)"; }
  fi
  made[$component]=1
}

for name in "${images[@]}"; do
  start=$SECONDS
  ref="$registry/$name:$tag"
  component="$(component_of "$name")"
  [ -n "$component" ] || die "docker/$name.Dockerfile installs no CMake component"
  binaries_image "$name" "$component"
  # The runtime stage reads nothing from the context; an empty one spares copying the tree.
  mkdir -p "$ctx/empty"
  "${B[@]}" build --isolation chroot --pull=false "${cache[@]}" -f "docker/$name.Dockerfile" -t "$ref" \
    --build-arg "BINARIES=$binaries_ref" "$ctx/empty" >"$work_dir/$name.build.log" 2>&1 \
    || { tail -20 "$work_dir/$name.build.log" >&2; die "buildah build of $name failed (log: $work_dir/$name.build.log)"; }
  size="$("${B[@]}" images --format '{{.Size}}' "$ref")"
  size="${size%%$'\n'*}"
  printf '%-22s %-40s %10s %5ss\n' "$name" "$ref" "$size" "$((SECONDS - start))"
done
