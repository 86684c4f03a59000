#!/usr/bin/env bash
# Installs every Debian bookworm package the build, the tests and the benchmarks need.
# Idempotent: when everything is present it only checks and returns.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # libraries
  libboost-dev libboost-system-dev libssl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libsqlitecpp-dev libsqlite3-dev sqlite3
  libfmt-dev catch2 libspdlog-dev libcli11-dev libyaml-cpp-dev prometheus-cpp-dev libpugixml-dev libzip-dev
  # real peers and tools used by tests and benchmarks
  python3 python3-kubernetes python3-yaml python3-grpcio python3-protobuf python3-matplotlib python3-sushy python3-jsonschema wrk curl openssl procps
  # the DMTF Redfish Interface Emulator and Mockup Server (../shared/peers/redfish) run on these
  python3-flask python3-flask-restful python3-flask-httpauth python3-aniso8601 python3-tz python3-six python3-requests
  # the formatting check of the test command (tools/check-format.sh): Debian's clang-format 14
  clang-format
  # bridge: a real single-node Slurm (slurmctld, slurmd, slurmrestd 22.05, munge, the JWT auth plugin) for the bridge pod's tests
  slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin
  # rt-kubelet-shim's real-peer tests: a real containerd 1.6 with runc, test image from busybox-static
  containerd runc busybox-static
  # deployment: the offline chart renderer (Go text/template + sprig), YAML lint of the chart
  golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev yamllint
  # images: Debian bases from mmdebstrap, built with buildah, run by runc (tools/build-images.sh, deploy_images)
  mmdebstrap buildah
  # monitoring: promtool (check rules, test rules) for the chart's alerts (docs/monitoring.md)
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# kubectl: the machine image may already have one; otherwise Debian's kubernetes-client.
if ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

# bridge: node and npm run the S3 test server (s3rver) of the bridge pod's tests; the machine
# image may already have them (a nodejs with npm built in), otherwise Debian's.
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

# bridge: npm's s3rver (S3 test server) into a cache dir outside the repository; the tests
# find it at $KC_NPM_PREFIX/node_modules/.bin/s3rver.
install_s3rver() {
  local prefix="${KC_NPM_PREFIX:-$HOME/.cache/kubecomp/npm}"
  if [ ! -x "$prefix/node_modules/.bin/s3rver" ]; then
    echo "setup-deps: npm install s3rver@3.7.1 into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --silent s3rver@3.7.1 >/dev/null
  fi
}

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-deps: all packages present"
  install_s3rver
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_s3rver
echo "setup-deps: done"
