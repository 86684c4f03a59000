#pragma once
// Private to the RedfishDriver units (redfish_driver.cpp, redfish_view.cpp, redfish_move.cpp,
// redfish_fabric.cpp).

#include <cstddef>
#include <functional>
#include <string>

#include "libcore/fabric/types.hpp"
#include "libcore/fabric/verified_move.hpp"

namespace kc::fabric::detail {

// "<method> <target> answered HTTP <status>: <the service's error message>".
std::string statusLine(const std::string& method, const std::string& target, unsigned status,
                       const std::string& body);

// Runs work(0) .. work(n-1), at most `width` at once; the calling thread is one of them.
void runBounded(std::size_t n, std::size_t width, const std::function<void(std::size_t)>& work);

// What the service's answer (HTTP status `st`) to a move request amounts to, before the
// re-read shows whether the move happened; 405/501 are kUnsupported.
Result<MoveClaim> claimOf(const std::string& chassis, const std::string& verb,
                          const std::string& method, const std::string& target, unsigned st,
                          const std::string& body);

// A UUID two GPUs report identifies neither: both become Unhealthy with the reason.
void markDuplicateUuids(std::vector<GpuInfo>& gpus);

}  // namespace kc::fabric::detail
