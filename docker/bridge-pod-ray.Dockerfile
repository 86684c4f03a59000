# bridge-pod-ray: the bridge pod for BridgeJobs on Ray (Ray Jobs API) (docs/bridge.md). The image
# selects the backend: the same bridge-pod binary with --backend ray. bridge-operator creates
# these pods (BridgeJob spec.image), the chart does not run them.
# Build from the repository root:  docker build -f docker/bridge-pod-ray.Dockerfile -t <registry>/bridge-pod-ray:<tag> .
# Stage 1 builds on Debian bookworm with the toolchain and library packages of
# tools/setup-deps.sh; stage 2 is bookworm-slim with only the runtime libraries the binary
# links (tests/deploy/docker_test.py checks both lists against the build and the binary).

# BINARIES: where the installed program comes from. `build` (the default) is the stage below; an
# image that holds the same `cmake --install --component` tree under /out (what
# tools/build-images.sh --prebuilt makes from an existing build) skips compiling.
ARG BINARIES=build

FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ccache pkg-config git libboost-dev \
      libboost-system-dev libssl-dev libgrpc++-dev protobuf-compiler-grpc \
      libprotobuf-dev protobuf-compiler nlohmann-json3-dev libsqlitecpp-dev \
      libsqlite3-dev sqlite3 libfmt-dev catch2 libspdlog-dev libcli11-dev \
      libyaml-cpp-dev prometheus-cpp-dev libpugixml-dev libzip-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset release \
 && cmake --build --preset release --target bridge-pod \
 && cmake --install build/release --component bridge-pod --prefix /out --strip

FROM ${BINARIES} AS binaries

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates libbz2-1.0 libfmt9 libprometheus-cpp-core1.0 libpugixml1v5 libspdlog1.10 libssl3 \
      libyaml-cpp0.7 libzip4 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=binaries /out/bin/bridge-pod /usr/local/bin/bridge-pod
USER 65532:65532
# ca-certificates: with no --ca-file the backend and S3 endpoints are verified against the system CAs.
ENTRYPOINT ["/usr/local/bin/bridge-pod", "--backend", "ray"]
