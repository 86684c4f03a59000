# Every external dependency, found once. All are Debian bookworm packages installed by
# tools/setup-deps.sh; nothing is downloaded by the build.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS system)
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(SQLiteCpp REQUIRED)
find_package(prometheus-cpp REQUIRED COMPONENTS core)
find_package(pugixml REQUIRED)
# libzip through pkg-config: bookworm's libzip-dev CMake config names the zipcmp, zipmerge and
# ziptool programs of other packages and fails without them.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
find_package(Catch2 2 REQUIRED)
include(Catch)
# protobuf ships no CMake config on bookworm: module mode + protobuf_generate.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
