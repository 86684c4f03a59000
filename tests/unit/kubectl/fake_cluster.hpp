#pragma once
// A Cluster over recorded objects (cluster.json: resource plural -> objects), for the golden
// tests: LIST with namespace and spec.nodeName selection, GET, conditional status PUT (409 on
// a stale resourceVersion), CREATE recorded, WATCH replaying scripted events, and an error
// per resource to answer every call on it with.

#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/kubectl-kubecomp/cluster.hpp"

namespace kc::kubectl::testing {

class FakeCluster final : public Cluster {
 public:
  explicit FakeCluster(nlohmann::json objects) : objects_(std::move(objects)) {}

  std::map<std::string, kube::ApiError> errors;       // resource -> answer to every call
  std::deque<std::vector<kube::WatchEvent>> watches;  // one script per WATCH call
  int conflictsToAnswer = 0;                          // status PUTs answered 409 first
  std::vector<nlohmann::json> statusWrites;           // what was written
  std::vector<nlohmann::json> created;                // objects created
  std::vector<std::string> calls;                     // "list pods ns=default", ...

  kube::ApiResult<kube::ObjectList> list(const kube::GroupVersionResource& r, const std::string& ns,
                                         const kube::ListOptions& opts) override {
    calls.push_back("list " + r.resource + " ns=" + ns);
    if (auto e = errors.find(r.resource); e != errors.end()) {
      return e->second;
    }
    kube::ObjectList out;
    out.resourceVersion = std::to_string(rv_);
    std::string node;
    if (opts.fieldSelector.rfind("spec.nodeName=", 0) == 0) {
      node = opts.fieldSelector.substr(14);
    }
    for (const auto& obj : items(r.resource)) {
      const auto meta = obj.value("metadata", nlohmann::json::object());
      if (!ns.empty() && meta.value("namespace", "") != ns) {
        continue;
      }
      if (!node.empty() &&
          obj.value("spec", nlohmann::json::object()).value("nodeName", "") != node) {
        continue;
      }
      out.items.push_back(obj);
    }
    return out;
  }

  kube::ApiResult<nlohmann::json> get(const kube::GroupVersionResource& r, const std::string& ns,
                                      const std::string& name) override {
    calls.push_back("get " + r.resource + " " + name);
    if (auto e = errors.find(r.resource); e != errors.end()) {
      return e->second;
    }
    if (const auto* obj = find(r.resource, ns, name)) {
      return *obj;
    }
    return notFound(r.resource, name);
  }

  kube::ApiResult<nlohmann::json> updateStatus(const kube::GroupVersionResource& r,
                                               const nlohmann::json& obj) override {
    const std::string name = obj["metadata"].value("name", "");
    calls.push_back("update-status " + r.resource + " " + name);
    auto* stored = find(r.resource, obj["metadata"].value("namespace", ""), name);
    if (stored == nullptr) {
      return notFound(r.resource, name);
    }
    if (conflictsToAnswer > 0 || obj["metadata"].value("resourceVersion", "") !=
                                     (*stored)["metadata"].value("resourceVersion", "")) {
      if (conflictsToAnswer > 0) {
        --conflictsToAnswer;
        (*stored)["metadata"]["resourceVersion"] = std::to_string(++rv_);  // someone else wrote
      }
      kube::ApiError e;
      e.httpCode = 409;
      e.reason = "Conflict";
      e.message = "the object has been modified; please apply your changes to the latest version";
      return e;
    }
    (*stored)["status"] = obj["status"];
    (*stored)["metadata"]["resourceVersion"] = std::to_string(++rv_);
    statusWrites.push_back(*stored);
    return *stored;
  }

  kube::ApiResult<nlohmann::json> create(const kube::GroupVersionResource& r, const std::string& ns,
                                         const nlohmann::json& obj) override {
    calls.push_back("create " + r.resource + " ns=" + ns);
    created.push_back(obj);
    return obj;
  }

  kube::ApiStatus watch(const kube::GroupVersionResource& r, const std::string& ns,
                        const kube::ListOptions& opts,
                        const std::function<bool(kube::WatchEvent&&)>& onEvent) override {
    calls.push_back("watch " + r.resource + " ns=" + ns +
                    " rv=" + opts.resourceVersion.value_or(""));
    if (watches.empty()) {
      kube::ApiError e;
      e.httpCode = 500;
      e.reason = "InternalError";
      e.message = "the test scripted no more watches";
      return e;
    }
    auto script = std::move(watches.front());
    watches.pop_front();
    for (auto& ev : script) {
      if (!onEvent(std::move(ev))) {
        break;
      }
    }
    return kc::Ok{};
  }

  std::string server() const override { return "https://fake.test:6443"; }
  std::string defaultNamespace() const override { return "default"; }

 private:
  std::vector<nlohmann::json>& items(const std::string& resource) {
    auto& arr = objects_[resource];
    if (!arr.is_array()) {
      arr = nlohmann::json::array();
    }
    return arr.get_ref<nlohmann::json::array_t&>();
  }
  nlohmann::json* find(const std::string& resource, const std::string& ns,
                       const std::string& name) {
    for (auto& obj : items(resource)) {
      const auto meta = obj.value("metadata", nlohmann::json::object());
      if (meta.value("name", "") == name && (ns.empty() || meta.value("namespace", "") == ns)) {
        return &obj;
      }
    }
    return nullptr;
  }
  static kube::ApiError notFound(const std::string& resource, const std::string& name) {
    kube::ApiError e;
    e.httpCode = 404;
    e.reason = "NotFound";
    e.message = resource + " \"" + name + "\" not found";
    e.details = {{"name", name}, {"kind", resource}};
    return e;
  }

  nlohmann::json objects_;
  std::int64_t rv_ = 200;
};

}  // namespace kc::kubectl::testing
