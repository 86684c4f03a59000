#pragma once
// Private to the RedfishDriver units (redfish_driver.cpp, redfish_view.cpp, redfish_move.cpp).

#include <string>

namespace kc::fabric::detail {

// "<method> <target> answered HTTP <status>: <the service's error message>".
std::string statusLine(const std::string& method, const std::string& target, unsigned status,
                       const std::string& body);

}  // namespace kc::fabric::detail
