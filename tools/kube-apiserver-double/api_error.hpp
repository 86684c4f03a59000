#pragma once
// ApiError: a failure the double reports to its client as a Kubernetes Status body.
// Inside the double, request handling throws ApiError and ONE boundary
// (ApiServer::handle) turns it into the HTTP response, so every path answers with the
// same Status shape the real kube-apiserver uses (apimachinery api/errors).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kc::apiserver {

class ApiError : public std::runtime_error {
 public:
  ApiError(int code, std::string reason, std::string message, nlohmann::json details = nullptr)
      : std::runtime_error(message),
        code_(code),
        reason_(std::move(reason)),
        details_(std::move(details)) {}

  int code() const noexcept { return code_; }
  const std::string& reason() const noexcept { return reason_; }
  const nlohmann::json& details() const noexcept { return details_; }

  // The Status object (kind Status, apiVersion v1) for this failure.
  nlohmann::json toStatus() const;

 private:
  int code_;
  std::string reason_;
  nlohmann::json details_;
};

// Builders matching the real server's messages (api/errors/errors.go).
ApiError notFound(const std::string& group, const std::string& resource, const std::string& name);
ApiError alreadyExists(const std::string& group, const std::string& resource,
                       const std::string& name);
ApiError conflict(const std::string& group, const std::string& resource, const std::string& name,
                  const std::string& why);
ApiError optimisticLockConflict(const std::string& group, const std::string& resource,
                                const std::string& name);
ApiError badRequest(const std::string& message);
ApiError invalid(const std::string& group, const std::string& kind, const std::string& name,
                 const std::string& field, const std::string& detail);
ApiError expired(const std::string& message);
ApiError unsupportedMediaType(const std::string& message);
ApiError methodNotAllowed(const std::string& message);
ApiError internalError(const std::string& message);

// "pods" or "deployments.apps": the qualified resource as the real server prints it.
std::string qualifiedResource(const std::string& group, const std::string& resource);

}  // namespace kc::apiserver
