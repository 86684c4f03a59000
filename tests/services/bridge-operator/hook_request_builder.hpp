#pragma once
// Builds Metacontroller CompositeController hook requests for a BridgeJob, in the shape
// Metacontroller sends (controller, parent, children keyed "<Kind>.<apiVersion>" then by
// name (v1) or "namespace/name" (v2), related, finalizing), and runs the decision on them.

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/metacontroller/hook_body.hpp"
#include "services/bridge-operator/hook_decision.hpp"

namespace kc::bridge::testing {

using nlohmann::json;

// A valid Slurm spec with an inline script and S3 upload.
inline json validSpec() {
  return json{
      {"resourceURL", "http://slurm-head:6820/slurm/v0.0.38/"},
      {"resourcesecret", "slurm-jwt"},
      {"image", "ghcr.io/kubecomp/bridge-pod-slurm:0.1"},
      {"jobproperties", R"({"name": "hello", "environment": {"PATH": "/bin"}})"},
      {"jobdata", {{"jobscript", "#!/bin/sh\necho \"hi\"\n"}, {"scriptlocation", "inline"}}},
      {"s3storage", {{"s3secret", "s3-creds"}, {"endpoint", "s3.example:9000"}}},
      {"s3upload", {{"bucket", "results"}, {"files", "hello.out"}}}};
}

struct PodState {
  std::int32_t attempt = 0;
  std::string phase = "Running";
  bool terminating = false;
};

struct RequestBuilder {
  std::string name = "job1";
  std::string ns = "team";
  std::string uid = "0b9c7e2a-1111-4222-8333-444455556666";
  json spec = validSpec();
  json status;  // null: never synced
  bool deleting = false;
  bool finalizing = false;
  metacontroller::HookVersion version = metacontroller::HookVersion::kV1;
  std::optional<std::map<std::string, std::string>> configMap;
  std::vector<PodState> pods;

  RequestBuilder& withSpec(const std::string& field, json value) {
    spec[field] = std::move(value);
    return *this;
  }
  RequestBuilder& withPod(std::int32_t attempt, std::string phase) {
    pods.push_back({attempt, std::move(phase), false});
    return *this;
  }
  RequestBuilder& withAttempts(std::int32_t n) {
    if (!status.is_object()) {
      status = json::object();
    }
    status["attempts"] = n;
    return *this;
  }

  std::string key(const std::string& childName) const {
    return metacontroller::objectKey(version, ns, childName);
  }

  json body() const {
    const char* v = version == metacontroller::HookVersion::kV2 ? "v2" : "v1";
    json controller{
        {"apiVersion", "metacontroller.k8s.io/v1alpha1"},
        {"kind", "CompositeController"},
        {"metadata", {{"name", "bridge-operator"}}},
        {"spec",
         {{"parentResource",
           {{"apiVersion", "bridge.kubecomp.io/v1alpha1"}, {"resource", "bridgejobs"}}},
          {"hooks",
           {{"sync", {{"version", v}, {"webhook", {{"url", "http://bo/sync"}}}}},
            {"finalize", {{"version", v}, {"webhook", {{"url", "http://bo/finalize"}}}}}}}}},
        {"status", json::object()}};
    json meta{{"name", name}, {"namespace", ns}, {"uid", uid}, {"generation", 1}};
    if (deleting) {
      meta["deletionTimestamp"] = "2026-11-24T12:00:00Z";
    }
    json parent{{"apiVersion", "bridge.kubecomp.io/v1alpha1"},
                {"kind", "BridgeJob"},
                {"metadata", meta},
                {"spec", spec}};
    if (!status.is_null()) {
      parent["status"] = status;
    }
    json ownerRef = json::array({{{"apiVersion", "bridge.kubecomp.io/v1alpha1"},
                                  {"kind", "BridgeJob"},
                                  {"name", name},
                                  {"uid", uid},
                                  {"controller", true},
                                  {"blockOwnerDeletion", true}}});
    json children{{"ConfigMap.v1", json::object()},
                  {"Pod.v1", json::object()},
                  {"ServiceAccount.v1", json::object()},
                  {"Role.rbac.authorization.k8s.io/v1", json::object()},
                  {"RoleBinding.rbac.authorization.k8s.io/v1", json::object()}};
    if (configMap) {
      const std::string cmName = name + "-bridge";
      children["ConfigMap.v1"][key(cmName)] = {
          {"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", cmName}, {"namespace", ns}, {"ownerReferences", ownerRef}}},
          {"data", *configMap}};
    }
    for (const PodState& p : pods) {
      const std::string podName = name + "-bridge-" + std::to_string(p.attempt);
      json pm{{"name", podName}, {"namespace", ns}, {"ownerReferences", ownerRef}};
      if (p.terminating) {
        pm["deletionTimestamp"] = "2026-11-24T12:00:00Z";
      }
      children["Pod.v1"][key(podName)] = {{"apiVersion", "v1"},
                                          {"kind", "Pod"},
                                          {"metadata", pm},
                                          {"spec", {{"restartPolicy", "Never"}}},
                                          {"status", {{"phase", p.phase}}}};
    }
    return json{{"controller", controller},
                {"parent", parent},
                {"children", children},
                {"related", json::object()},
                {"finalizing", finalizing}};
  }
};

inline std::chrono::system_clock::time_point testNow() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1'795'000'000));
}

// The ConfigMap data a first sync of `b` asks for (what Metacontroller then creates), plus
// the keys a bridge pod wrote.
std::map<std::string, std::string> startedConfigMap(
    const RequestBuilder& b, std::map<std::string, std::string> podKeys = {});

// parse + decide; fails the test when the body does not parse.
Desired run(const RequestBuilder& b, const DecisionConfig& config = {});

const json* findChild(const Desired& d, const std::string& kind, const std::string& name);
std::vector<std::string> podNames(const Desired& d);
std::string conditionStatus(const json& status, const std::string& type);

}  // namespace kc::bridge::testing
