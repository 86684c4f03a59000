#include "tools/kube-apiserver-double/object_defaults.hpp"

#include <regex>

#include "libcore/base/base64.hpp"
#include "tools/kube-apiserver-double/dra_validation.hpp"
#include "tools/kube-apiserver-double/storage_validation.hpp"
#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

bool isDnsSubdomain(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s, kRe);
}

bool isDnsLabel(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, kRe);
}

const char* const kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const char* const kLabelMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

// Everything but metadata/status/kind/apiVersion: what bumps metadata.generation.
bool specChanged(const json& a, const json& b) {
  auto strip = [](const json& o) {
    json c = json::object();
    if (o.is_object()) {
      for (auto it = o.begin(); it != o.end(); ++it) {
        if (it.key() != "metadata" && it.key() != "status" && it.key() != "kind" &&
            it.key() != "apiVersion") {
          c[it.key()] = *it;
        }
      }
    }
    return c;
  };
  return strip(a) != strip(b);
}

std::string podQosClass(const json& spec) {
  bool any = false;
  bool guaranteed = true;
  auto containers = spec.value("containers", json::array());
  for (const auto& c : containers) {
    json req =
        c.contains("resources") ? c["resources"].value("requests", json::object()) : json::object();
    json lim =
        c.contains("resources") ? c["resources"].value("limits", json::object()) : json::object();
    if (!req.empty() || !lim.empty()) {
      any = true;
    }
    for (const char* r : {"cpu", "memory"}) {
      if (!lim.contains(r) || (req.contains(r) && req[r] != lim[r])) {
        guaranteed = false;
      }
    }
  }
  if (!any) {
    return "BestEffort";
  }
  return guaranteed ? "Guaranteed" : "Burstable";
}

void defaultPod(json& pod) {
  json& spec = pod["spec"];
  if (!spec.is_object()) {
    spec = json::object();
  }
  auto setDefault = [](json& o, const char* k, json v) {
    if (!o.contains(k) || o[k].is_null()) {
      o[k] = std::move(v);
    }
  };
  setDefault(spec, "schedulerName", "default-scheduler");
  setDefault(spec, "restartPolicy", "Always");
  setDefault(spec, "dnsPolicy", "ClusterFirst");
  setDefault(spec, "terminationGracePeriodSeconds", 30);
  setDefault(spec, "securityContext", json::object());
  setDefault(spec, "enableServiceLinks", true);
  setDefault(spec, "priority", 0);
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) {
      continue;
    }
    for (auto& c : spec[list]) {
      if (!c.is_object()) {
        continue;
      }
      std::string image = str(c, "image");
      bool latest = image.find(':') == std::string::npos || image.size() < 7 ||
                    image.substr(image.size() - 7) == ":latest";
      setDefault(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
      setDefault(c, "terminationMessagePath", "/dev/termination-log");
      setDefault(c, "terminationMessagePolicy", "File");
      setDefault(c, "resources", json::object());
    }
  }
  pod["status"] = {{"phase", "Pending"}, {"qosClass", podQosClass(spec)}};
}

void defaultDeployment(json& d) {
  json& spec = d["spec"];
  if (!spec.is_object()) {
    spec = json::object();
  }
  if (!spec.contains("replicas")) {
    spec["replicas"] = 1;
  }
  if (!spec.contains("revisionHistoryLimit")) {
    spec["revisionHistoryLimit"] = 10;
  }
  if (!spec.contains("progressDeadlineSeconds")) {
    spec["progressDeadlineSeconds"] = 600;
  }
  if (!spec.contains("strategy")) {
    spec["strategy"] = {{"type", "RollingUpdate"},
                        {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}};
  }
}

void normalizeSecret(json& secret) {
  if (auto sd = secret.find("stringData"); sd != secret.end()) {
    if (sd->is_object()) {
      if (!secret.contains("data") || !secret["data"].is_object()) {
        secret["data"] = json::object();
      }
      for (const auto& [k, v] : sd->items()) {
        if (v.is_string()) {
          secret["data"][k] = kc::base64Encode(v.get<std::string>());
        }
      }
    }
    secret.erase("stringData");
  }
  if (!secret.contains("type") || !secret["type"].is_string() ||
      secret["type"].get<std::string>().empty()) {
    secret["type"] = "Opaque";
  }
}

void admitOnCreate(const ResourceInfo& res, const std::string& name, json& body) {
  if (res.group.empty() && res.resource == "pods") {
    if (!body.contains("spec") || !body["spec"].is_object() ||
        !body["spec"].contains("containers") || !body["spec"]["containers"].is_array() ||
        body["spec"]["containers"].empty()) {
      throw invalid("", "Pod", name, "spec.containers", "Required value");
    }
    defaultPod(body);
  } else if (res.group.empty() && res.resource == "namespaces") {
    body["spec"] = {{"finalizers", {"kubernetes"}}};
    body["status"] = {{"phase", "Active"}};
    body["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (res.group == "apps" && res.resource == "deployments") {
    defaultDeployment(body);
  } else if (res.group.empty() && res.resource == "secrets") {
    normalizeSecret(body);
  } else if (res.group == "policy" && res.resource == "poddisruptionbudgets") {
    validatePdb(name, body);
  } else if (res.group == dra::kGroup) {
    dra::applyDefaults(res.resource, body);
    dra::admit(res.resource, name, body, nullptr, false);
  } else {
    storage::applyDefaults(res.group, res.resource, body, true);
    storage::admit(res.group, res.resource, name, body, nullptr, false);
  }
}

void admitOnUpdate(const ResourceInfo& res, const std::string& name, const json& oldObj, json& next,
                   bool statusUpdate) {
  if (res.group.empty() && res.resource == "pods") {
    auto nodeOf = [](const json& o) {
      return o.contains("spec") ? str(o["spec"], "nodeName") : std::string();
    };
    if (nodeOf(next) != nodeOf(oldObj)) {
      throw invalid(
          "", "Pod", name, "spec",
          "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
          "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
          "(only "
          "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to "
          "be set "
          "to 1 if it was previously negative)");
    }
  }
  if (res.group.empty() && res.resource == "secrets") {
    normalizeSecret(next);
  }
  if (res.group.empty() && res.resource == "namespaces") {
    // kube-apiserver's namespace strategy sets this label again on every update (Canonicalize):
    // a namespaceSelector on it always matches the namespace's own name.
    json& labels = next["metadata"]["labels"];
    if (labels.is_null() || labels.is_object()) {
      labels["kubernetes.io/metadata.name"] = name;
    }
  }
  if (res.group == dra::kGroup) {
    dra::applyDefaults(res.resource, next);
    dra::admit(res.resource, name, next, &oldObj, statusUpdate);
  }
  storage::applyDefaults(res.group, res.resource, next, false);
  storage::admit(res.group, res.resource, name, next, &oldObj, statusUpdate);
}

}  // namespace kc::apiserver
