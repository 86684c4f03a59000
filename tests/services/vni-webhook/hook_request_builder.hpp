#pragma once
// Builds Metacontroller DecoratorController hook request bodies as Metacontroller v4 sends
// them (pkg/controller/decorator/api/v1 DecoratorHookRequest): controller, object,
// attachments grouped "<Kind>.<group>/<version>" then keyed by name (hook v1) or
// "namespace/name" (hook v2), related, finalizing.
//   makeParent("Job", "train").ns("ml").uid("u1").optIn().vniObserved(1024).body(kSync)

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "services/vni-webhook/hook_decision.hpp"

namespace kc::vni::testing {

using nlohmann::json;

inline std::string apiVersionOfKind(const std::string& kind) {
  return kind == "Job" ? "batch/v1" : "apps/v1";
}

class ParentBuilder {
 public:
  ParentBuilder(std::string kind, std::string name)
      : kind_(std::move(kind)), name_(std::move(name)) {
    uid_ = "0f1e6c2a-0000-4000-8000-" + name_;
  }
  ParentBuilder& ns(std::string v) {
    ns_ = std::move(v);
    return *this;
  }
  ParentBuilder& uid(std::string v) {
    uid_ = std::move(v);
    return *this;
  }
  ParentBuilder& optIn(std::string value = "true") {
    annotations_[kOptInAnnotation] = value;
    return *this;
  }
  ParentBuilder& annotate(const std::string& k, const std::string& v) {
    annotations_[k] = v;
    return *this;
  }
  ParentBuilder& hookVersion(std::string v) {
    version_ = std::move(v);
    return *this;
  }
  ParentBuilder& deleting(std::string rfc3339) {
    deletion_ = std::move(rfc3339);
    return *this;
  }
  ParentBuilder& ownedByDeployment(std::string name, std::string uid) {
    owner_ = json{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", std::move(name)},
                  {"uid", std::move(uid)},   {"controller", true},   {"blockOwnerDeletion", true}};
    return *this;
  }
  ParentBuilder& selector(json s) {
    selector_ = std::move(s);
    return *this;
  }
  // Our VNI object as Metacontroller observes it after creating it.
  ParentBuilder& vniObserved(std::int64_t vni) {
    observed_ = vni;
    return *this;
  }
  ParentBuilder& pod(const std::string& name, const std::string& phase, bool terminating = false) {
    pods_.push_back({name, phase, terminating});
    return *this;
  }
  ParentBuilder& finalizingFlag(bool f) {
    finalizing_ = f;
    return *this;
  }

  const std::string& uidValue() const { return uid_; }
  const std::string& nsValue() const { return ns_; }
  OwnerKey key() const { return OwnerKey{uid_, ns_}; }

  json object() const {
    json meta{
        {"name", name_},
        {"namespace", ns_},
        {"uid", uid_},
        {"resourceVersion", "4711"},
        {"generation", 1},
        {"creationTimestamp", "2026-11-22T20:00:00Z"},
        {"finalizers", json::array({"metacontroller.io/decoratorcontroller-vni-controller"})}};
    if (!annotations_.empty()) {
      meta["annotations"] = annotations_;
    }
    if (owner_) {
      meta["ownerReferences"] = json::array({*owner_});
    }
    if (deletion_) {
      meta["deletionTimestamp"] = *deletion_;
      meta["deletionGracePeriodSeconds"] = 0;
    }
    json spec = json::object();
    if (kind_ == "Job") {
      spec = {{"parallelism", 2},
              {"completions", 2},
              {"backoffLimit", 6},
              {"template", {{"spec", {{"containers", json::array()}}}}}};
      if (!selector_.is_null()) {  // as the job controller fills it in
        spec["selector"] = selector_;
      }
    } else {
      spec = {
          {"replicas", 2},
          {"selector", selector_.is_null() ? json{{"matchLabels", {{"app", name_}}}} : selector_}};
    }
    return json{{"apiVersion", apiVersionOfKind(kind_)},
                {"kind", kind_},
                {"metadata", meta},
                {"spec", spec},
                {"status", json::object()}};
  }

  json controller() const {
    json hook = {
        {"webhook", {{"url", "http://vni-webhook.vni-system:8842/sync"}, {"timeout", "10s"}}}};
    if (version_) {
      hook["version"] = *version_;
    }
    return json{
        {"apiVersion", "metacontroller.k8s.io/v1alpha1"},
        {"kind", "DecoratorController"},
        {"metadata", {{"name", "vni-controller"}, {"uid", "dc-uid"}}},
        {"spec",
         {{"resources", json::array({{{"apiVersion", "batch/v1"}, {"resource", "jobs"}}})},
          {"attachments", json::array({{{"apiVersion", "kubecomp.io/v1"}, {"resource", "vnis"}}})},
          {"hooks", {{"sync", hook}, {"finalize", hook}, {"customize", hook}}}}},
        {"status", json::object()}};
  }

  std::string mapKey(const std::string& name) const {
    return version_ && *version_ == "v2" ? ns_ + "/" + name : name;
  }

  json request(HookKind kind) const {
    if (kind == HookKind::kCustomize) {
      return json{{"controller", controller()}, {"parent", object()}};
    }
    json vnis = json::object();
    if (observed_) {
      const std::string name = "vni-" + uid_;
      vnis[mapKey(name)] = json{
          {"apiVersion", "kubecomp.io/v1"},
          {"kind", "VNI"},
          {"metadata",
           {{"name", name},
            {"namespace", ns_},
            {"uid", "vni-obj-" + uid_},
            {"annotations", {{"metacontroller.k8s.io/decorator-controller", "vni-controller"}}},
            {"ownerReferences", json::array({{{"apiVersion", apiVersionOfKind(kind_)},
                                              {"kind", kind_},
                                              {"name", name_},
                                              {"uid", uid_},
                                              {"controller", true},
                                              {"blockOwnerDeletion", true}}})}}},
          {"spec", {{"vni", *observed_}}}};
    }
    json related = json::object();
    if (!pods_.empty()) {
      json pods = json::object();
      for (const auto& p : pods_) {
        json meta{{"name", p.name},
                  {"namespace", ns_},
                  {"labels", {{"batch.kubernetes.io/controller-uid", uid_}}},
                  {"ownerReferences", json::array({{{"apiVersion", apiVersionOfKind(kind_)},
                                                    {"kind", kind_},
                                                    {"name", name_},
                                                    {"uid", uid_},
                                                    {"controller", true}}})}};
        if (p.terminating) {
          meta["deletionTimestamp"] = "2026-11-22T21:00:00Z";
        }
        pods[mapKey(p.name)] = json{{"apiVersion", "v1"},
                                    {"kind", "Pod"},
                                    {"metadata", meta},
                                    {"status", {{"phase", p.phase}}}};
      }
      related["Pod.v1"] = pods;
    }
    return json{{"controller", controller()},
                {"object", object()},
                {"attachments", {{"VNI.kubecomp.io/v1", vnis}}},
                {"related", related},
                {"finalizing", finalizing_.value_or(kind == HookKind::kFinalize)}};
  }
  std::string body(HookKind kind) const { return request(kind).dump(); }

 private:
  struct PodSpec {
    std::string name;
    std::string phase;
    bool terminating;
  };
  std::string kind_;
  std::string name_;
  std::string ns_ = "vnitest";
  std::string uid_;
  json annotations_ = json::object();
  std::optional<std::string> version_;
  std::optional<std::string> deletion_;
  std::optional<json> owner_;
  json selector_;
  std::optional<std::int64_t> observed_;
  std::vector<PodSpec> pods_;
  std::optional<bool> finalizing_;
};

inline ParentBuilder makeParent(std::string kind, std::string name) {
  return ParentBuilder(std::move(kind), std::move(name));
}

}  // namespace kc::vni::testing
