# bridge-operator: BridgeJob hooks for a Metacontroller CompositeController (docs/bridge.md).
# Build from the repository root:  docker build -f docker/bridge-operator.Dockerfile -t <registry>/bridge-operator:<tag> .
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
 && cmake --build --preset release --target bridge-operator \
 && cmake --install build/release --component bridge-operator --prefix /out --strip

FROM ${BINARIES} AS binaries

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libfmt9 libprometheus-cpp-core1.0 libspdlog1.10 libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=binaries /out/bin/bridge-operator /usr/local/bin/bridge-operator
USER 65532:65532
EXPOSE 8843
ENTRYPOINT ["/usr/local/bin/bridge-operator"]
