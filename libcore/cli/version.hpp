#pragma once
// The version every binary answers --version with (flags.hpp): the project version from
// CMakeLists.txt and the git revision the build was made from (cmake/WriteVersion.cmake).

#include <string>
#include <string_view>

namespace kc::cli {

std::string_view projectVersion();  // "0.1.0"
std::string_view gitRevision();     // "16a9900c1d2e", "16a9900c1d2e-dirty" or "unknown"
// "<binary> <version> (git <revision>)"
std::string versionLine(std::string_view binary);

}  // namespace kc::cli
