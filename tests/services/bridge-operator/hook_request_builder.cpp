#include "tests/services/bridge-operator/hook_request_builder.hpp"

#include <catch2/catch.hpp>

namespace kc::bridge::testing {

Desired run(const RequestBuilder& b, const DecisionConfig& config) {
  auto request =
      parseHookRequest(b.finalizing ? HookKind::kFinalize : HookKind::kSync, b.body().dump());
  if (!request) {
    FAIL("request did not parse: " << request.error().message);
  }
  return decide(*request, config, testNow());
}

std::map<std::string, std::string> startedConfigMap(const RequestBuilder& b,
                                                    std::map<std::string, std::string> podKeys) {
  RequestBuilder fresh = b;
  fresh.configMap.reset();
  fresh.pods.clear();
  fresh.status = nullptr;
  fresh.finalizing = false;
  Desired d = run(fresh);
  const json* cm = findChild(d, "ConfigMap", b.name + "-bridge");
  REQUIRE(cm != nullptr);
  auto data = (*cm)["data"].get<std::map<std::string, std::string>>();
  for (auto& [k, v] : podKeys) {
    data[k] = v;
  }
  return data;
}

const json* findChild(const Desired& d, const std::string& kind, const std::string& name) {
  for (const json& c : d.children) {
    if (c.value("kind", "") == kind && c["metadata"].value("name", "") == name) {
      return &c;
    }
  }
  return nullptr;
}

std::vector<std::string> podNames(const Desired& d) {
  std::vector<std::string> out;
  for (const json& c : d.children) {
    if (c.value("kind", "") == "Pod") {
      out.push_back(c["metadata"].value("name", ""));
    }
  }
  return out;
}

std::string conditionStatus(const json& status, const std::string& type) {
  if (!status.contains("conditions")) {
    return "";
  }
  for (const json& c : status["conditions"]) {
    if (c.value("type", "") == type) {
      return c.value("status", "");
    }
  }
  return "";
}

}  // namespace kc::bridge::testing
