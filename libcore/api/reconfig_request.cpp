#include "libcore/api/reconfig_request.hpp"

#include <algorithm>
#include <charconv>

#include "libcore/base/rfc3339.hpp"

namespace kc::api {

using nlohmann::json;

namespace {

std::optional<std::uint32_t> parseDemand(std::string_view s) {
  std::uint32_t v = 0;
  if (s.empty() || s.size() > 5) {
    return std::nullopt;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v > 65535) {
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> annotationText(const json& annotations, std::string_view key,
                                          std::optional<std::string>* notString) {
  const auto v = annotations.find(std::string(key));
  if (v == annotations.end()) {
    return std::nullopt;
  }
  if (v->is_string()) {
    return v->get<std::string>();
  }
  if (!*notString) {
    *notString = std::string(key);
  }
  return v->dump();
}

}  // namespace

bool isValidNodeName(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

ReconfigRequestText reconfigRequestText(const json& pod) {
  ReconfigRequestText t;
  if (!pod.is_object()) {
    return t;
  }
  const auto m = pod.find("metadata");
  if (m == pod.end() || !m->is_object()) {
    return t;
  }
  const auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) {
    return t;
  }
  t.dstNode = annotationText(*a, kDstNodeAnnotation, &t.notString);
  t.demand = annotationText(*a, kDemandAnnotation, &t.notString);
  t.reservedAt = annotationText(*a, kReservedAtAnnotation, &t.notString);
  return t;
}

Result<ReconfigRequest> parseReconfigRequest(const ReconfigRequestText& text) {
  ReconfigRequest r;
  if (text.notString) {
    return makeError(kc::errc::kInvalid, "annotation " + *text.notString + " is not a string");
  }
  const std::string dst = text.dstNode.value_or("");
  if (!isValidNodeName(dst)) {
    return makeError(kc::errc::kInvalid, "annotation " + std::string(kDstNodeAnnotation) + " '" +
                                             dst + "' is not a node name");
  }
  r.dstNode = dst;
  const auto demand = text.demand ? parseDemand(*text.demand) : std::nullopt;
  if (!demand) {
    return makeError(kc::errc::kInvalid, "annotation " + std::string(kDemandAnnotation) + " '" +
                                             text.demand.value_or("") +
                                             "' is not a whole number of GPUs (0-65535)");
  }
  r.demand = *demand;
  if (text.reservedAt) {
    auto at = parseRfc3339(*text.reservedAt);
    if (!at) {
      return makeError(kc::errc::kInvalid, "annotation " + std::string(kReservedAtAnnotation) +
                                               " '" + *text.reservedAt +
                                               "' is not an RFC 3339 time (" + at.error().message +
                                               ")");
    }
    r.reservedAt = *at;
  }
  return r;
}

json reconfigRequestAnnotations(const ReconfigRequest& request) {
  json ann = json::object();
  ann[std::string(kDstNodeAnnotation)] = request.dstNode;
  ann[std::string(kDemandAnnotation)] = std::to_string(request.demand);
  if (request.reservedAt) {
    ann[std::string(kReservedAtAnnotation)] =
        formatRfc3339(std::chrono::floor<std::chrono::milliseconds>(*request.reservedAt),
                      Rfc3339Precision::kMillis);
  }
  return ann;
}

json clearReconfigRequestAnnotations() {
  json ann = json::object();
  ann[std::string(kDstNodeAnnotation)] = nullptr;
  ann[std::string(kDemandAnnotation)] = nullptr;
  ann[std::string(kReservedAtAnnotation)] = nullptr;
  return ann;
}

}  // namespace kc::api
