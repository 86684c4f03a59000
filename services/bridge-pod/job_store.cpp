#include "services/bridge-pod/job_store.hpp"

namespace kc::bridge::pod {

namespace {

Error apiToError(const kc::kube::ApiError& e) {
  return e.toError();
}

Result<Data> dataOf(const nlohmann::json& cm, const std::string& name) {
  Data out;
  if (!cm.contains("data")) {
    return out;
  }
  if (!cm["data"].is_object()) {
    return makeError(errc::kProtocol, "ConfigMap " + name + ": data is not an object");
  }
  for (const auto& [k, v] : cm["data"].items()) {
    if (!v.is_string()) {
      return makeError(errc::kProtocol, "ConfigMap " + name + ": data." + k + " is not a string");
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

Result<Data> ConfigMapStore::read() {
  auto cm = kube_.get(kc::kube::gvr::configMaps(), ns_, name_);
  if (!cm.ok()) {
    return apiToError(cm.error());
  }
  return dataOf(*cm, name_);
}

Status ConfigMapStore::write(const Data& keys) {
  for (int attempt = 0;; ++attempt) {
    auto cm = kube_.get(kc::kube::gvr::configMaps(), ns_, name_);
    if (!cm.ok()) {
      return apiToError(cm.error());
    }
    nlohmann::json updated = *cm;
    bool changed = false;
    for (const auto& [k, v] : keys) {
      if (!updated["data"].contains(k) || updated["data"][k] != v) {
        updated["data"][k] = v;
        changed = true;
      }
    }
    if (!changed) {
      return okStatus();
    }
    auto r = kube_.update(kc::kube::gvr::configMaps(), ns_, updated);
    if (r.ok()) {
      return okStatus();
    }
    if (!r.error().isConflict() || attempt >= maxConflicts_) {
      return apiToError(r.error());
    }
    ++conflicts_;
  }
}

}  // namespace kc::bridge::pod
