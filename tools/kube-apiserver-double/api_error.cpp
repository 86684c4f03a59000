#include "tools/kube-apiserver-double/api_error.hpp"

namespace kc::apiserver {

nlohmann::json ApiError::toStatus() const {
  nlohmann::json s = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", what()},  {"reason", reason_},
      {"code", code_}};
  if (!details_.is_null()) {
    s["details"] = details_;
  }
  if (reason_.empty()) {
    s.erase("reason");
  }
  return s;
}

std::string qualifiedResource(const std::string& group, const std::string& resource) {
  return group.empty() ? resource : resource + "." + group;
}

namespace {
nlohmann::json nameDetails(const std::string& group, const std::string& resource,
                           const std::string& name) {
  nlohmann::json d = {{"name", name}, {"kind", resource}};
  if (!group.empty()) {
    d["group"] = group;
  }
  return d;
}
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}
}  // namespace

ApiError notFound(const std::string& group, const std::string& resource, const std::string& name) {
  return {404, "NotFound", qualifiedResource(group, resource) + " " + quoted(name) + " not found",
          nameDetails(group, resource, name)};
}

ApiError alreadyExists(const std::string& group, const std::string& resource,
                       const std::string& name) {
  return {409, "AlreadyExists",
          qualifiedResource(group, resource) + " " + quoted(name) + " already exists",
          nameDetails(group, resource, name)};
}

ApiError conflict(const std::string& group, const std::string& resource, const std::string& name,
                  const std::string& why) {
  return {409, "Conflict",
          "Operation cannot be fulfilled on " + qualifiedResource(group, resource) + " " +
              quoted(name) + ": " + why,
          nameDetails(group, resource, name)};
}

ApiError optimisticLockConflict(const std::string& group, const std::string& resource,
                                const std::string& name) {
  return conflict(group, resource, name,
                  "the object has been modified; please apply your changes to the latest version "
                  "and try again");
}

ApiError badRequest(const std::string& message) {
  return {400, "BadRequest", message};
}

ApiError invalid(const std::string& group, const std::string& kind, const std::string& name,
                 const std::string& field, const std::string& detail) {
  nlohmann::json d = {
      {"name", name},
      {"kind", kind},
      {"causes", nlohmann::json::array(
                     {{{"reason", "FieldValueInvalid"}, {"message", detail}, {"field", field}}})}};
  if (!group.empty()) {
    d["group"] = group;
  }
  std::string groupKind = group.empty() ? kind : kind + "." + group;
  return {422, "Invalid", groupKind + " " + quoted(name) + " is invalid: " + field + ": " + detail,
          d};
}

ApiError expired(const std::string& message) {
  return {410, "Expired", message};
}

ApiError unsupportedMediaType(const std::string& message) {
  return {415, "UnsupportedMediaType", message};
}

ApiError methodNotAllowed(const std::string& message) {
  return {405, "MethodNotAllowed", message};
}

ApiError internalError(const std::string& message) {
  return {500, "InternalError", message};
}

}  // namespace kc::apiserver
