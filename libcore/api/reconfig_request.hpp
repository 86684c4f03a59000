#pragma once
// The reconfiguration request (docs/sched.md "Contract with reconfig-mgr"):
// kubecomp-sched writes three annotations on a pod it reserved a node for, in one merge patch,
// and removes them together; reconfig-mgr reads kubecomp.io/dst-node to move GPUs there, and a
// kubecomp-sched replica that adopts the request after a restart or failover reads all three.
//   kubecomp.io/dst-node     the node (an RFC 1123 subdomain)
//   kubecomp.io/demand       the GPUs asked for, decimal 0..65535
//   kubecomp.io/reserved-at  when the request was made (RFC 3339 UTC, milliseconds); optional:
//                            a request of an older writer has none

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::api {

struct ReconfigRequest {
  std::string dstNode;
  std::uint32_t demand = 0;
  std::optional<std::chrono::system_clock::time_point> reservedAt;  // whole milliseconds

  friend bool operator==(const ReconfigRequest&, const ReconfigRequest&) = default;
};

// The three annotations as a pod shows them (raw text; a value that is not a JSON string, which
// a real API server never stores, is given as its JSON text and named in `notString`). All
// empty: no request.
struct ReconfigRequestText {
  std::optional<std::string> dstNode;
  std::optional<std::string> demand;
  std::optional<std::string> reservedAt;
  std::optional<std::string> notString;  // the first of the three whose value is not a string

  bool present() const {
    return dstNode.has_value() || demand.has_value() || reservedAt.has_value();
  }
  friend bool operator==(const ReconfigRequestText&, const ReconfigRequestText&) = default;
};

// Reads the three annotations of a Pod object (metadata.annotations). Never throws.
ReconfigRequestText reconfigRequestText(const nlohmann::json& pod);

// Strict: every value a string, dst-node a node name, demand a whole number 0..65535, reserved-at
// (when set) an RFC 3339 time. Error "invalid" naming the annotation and its value.
Result<ReconfigRequest> parseReconfigRequest(const ReconfigRequestText& text);

// A node name as Kubernetes accepts it: an RFC 1123 subdomain (lower-case alphanumerics, '-'
// and '.', starting and ending alphanumeric, at most 253 characters).
bool isValidNodeName(std::string_view name);

// metadata.annotations of the merge patch that writes `request` (all three annotations).
nlohmann::json reconfigRequestAnnotations(const ReconfigRequest& request);
// metadata.annotations of the merge patch that removes the request (all three, as null).
nlohmann::json clearReconfigRequestAnnotations();

}  // namespace kc::api
