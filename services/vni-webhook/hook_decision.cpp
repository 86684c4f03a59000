#include "services/vni-webhook/hook_decision.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "libcore/base/rfc3339.hpp"

namespace kc::vni {

namespace {

using nlohmann::json;

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, std::move(message));
}

using metacontroller::member;
using metacontroller::optionalString;
using metacontroller::requiredString;

Result<ObservedParent> parseParent(const json& object) {
  if (!object.is_object()) {
    return invalid("the parent object is missing or not a JSON object");
  }
  ObservedParent p;
  auto apiVersion = requiredString(object, "apiVersion", "object");
  if (!apiVersion) {
    return apiVersion.error();
  }
  auto kind = requiredString(object, "kind", "object");
  if (!kind) {
    return kind.error();
  }
  const json* meta = member(object, "metadata");
  if (meta == nullptr || !meta->is_object()) {
    return invalid("object.metadata must be an object");
  }
  auto name = requiredString(*meta, "name", "object.metadata");
  auto ns = requiredString(*meta, "namespace", "object.metadata");
  auto uid = requiredString(*meta, "uid", "object.metadata");
  for (const auto* r : {&name, &ns, &uid}) {
    if (!*r) {
      return r->error();
    }
  }
  p.apiVersion = *apiVersion;
  p.kind = *kind;
  p.name = *name;
  p.ns = *ns;
  p.uid = *uid;
  if (const json* ann = member(*meta, "annotations"); ann != nullptr && !ann->is_null()) {
    if (!ann->is_object()) {
      return invalid("object.metadata.annotations must be an object");
    }
    for (const auto& [k, v] : ann->items()) {
      if (v.is_string()) {
        p.annotations.emplace(k, v.get<std::string>());
      }
    }
  }
  if (const json* refs = member(*meta, "ownerReferences"); refs != nullptr && !refs->is_null()) {
    if (!refs->is_array()) {
      return invalid("object.metadata.ownerReferences must be an array");
    }
    for (const json& r : *refs) {
      OwnerRef ref;
      ref.apiVersion = optionalString(r, "apiVersion");
      ref.kind = optionalString(r, "kind");
      ref.name = optionalString(r, "name");
      ref.uid = optionalString(r, "uid");
      const json* c = member(r, "controller");
      ref.controller = c != nullptr && c->is_boolean() && c->get<bool>();
      p.ownerReferences.push_back(std::move(ref));
    }
  }
  if (const json* del = member(*meta, "deletionTimestamp"); del != nullptr && !del->is_null()) {
    if (!del->is_string()) {
      return invalid("object.metadata.deletionTimestamp must be an RFC 3339 string");
    }
    auto deleted = kc::parseRfc3339(del->get<std::string>());
    if (!deleted) {
      return invalid("object.metadata.deletionTimestamp is not RFC 3339: " + del->dump());
    }
    p.deletionTimestampSec =
        std::chrono::floor<std::chrono::seconds>(deleted->time_since_epoch()).count();
  }
  if (const json* spec = member(object, "spec"); spec != nullptr) {
    if (const json* sel = member(*spec, "selector"); sel != nullptr && sel->is_object()) {
      p.selector = *sel;
    }
  }
  return p;
}

// Objects of one group of an object map (libcore/metacontroller: v1 name or v2 ns/name keys,
// the values carry their own metadata, which is what we read).
using metacontroller::groupObjects;

bool ownedBy(const ObservedPod& pod, const std::string& uid) {
  return std::find(pod.ownerUids.begin(), pod.ownerUids.end(), uid) != pod.ownerUids.end();
}

// Pods that may still use the VNI: not in a terminal phase, or still being deleted.
std::size_t countRemainingPods(const HookRequest& request) {
  const ObservedParent& p = request.parent;
  std::size_t n = 0;
  for (const ObservedPod& pod : request.pods) {
    const bool terminal = pod.phase == "Succeeded" || pod.phase == "Failed";
    if (terminal && !pod.terminating) {
      continue;
    }
    // Jobs are related by their uid label; ReplicaSets, StatefulSets and DaemonSets own their
    // pods directly (a selector may overlap another controller's pods); a Deployment's pods
    // are owned by its ReplicaSets, so its selector is all we can go by.
    if (p.kind != "Job" && p.kind != "Deployment" && !ownedBy(pod, p.uid)) {
      continue;
    }
    ++n;
  }
  return n;
}

const OwnerRef* controllingDeployment(const ObservedParent& p) {
  if (p.kind != "ReplicaSet") {
    return nullptr;
  }
  for (const OwnerRef& ref : p.ownerReferences) {
    if (ref.controller && ref.kind == "Deployment" && !ref.uid.empty()) {
      return &ref;
    }
  }
  return nullptr;
}

json vniObject(const ObservedParent& p, Vni vni) {
  return api::toJson(api::VniObject{vniObjectName(p.uid), p.ns, p.uid, vni});
}

}  // namespace

const char* hookName(HookKind kind) {
  switch (kind) {
    case HookKind::kSync:
      return "sync";
    case HookKind::kFinalize:
      return "finalize";
    case HookKind::kCustomize:
      return "customize";
  }
  return "unknown";
}

bool isOptedIn(const ObservedParent& parent) {
  auto it = parent.annotations.find(kOptInAnnotation);
  if (it == parent.annotations.end()) {
    return false;
  }
  std::string v = it->second;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "true" || v == "yes";
}

Result<HookRequest> parseHookRequest(HookKind kind, const std::string& body) {
  auto parsed = metacontroller::parseBody(body);
  if (!parsed) {
    return parsed.error();
  }
  const json& doc = *parsed;
  HookRequest r;
  r.kind = kind;
  if (const json* f = member(doc, "finalizing"); f != nullptr && !f->is_null()) {
    if (!f->is_boolean()) {
      return invalid("finalizing must be a boolean");
    }
    r.finalizing = f->get<bool>();
    if (r.finalizing && kind == HookKind::kSync) {
      r.kind = HookKind::kFinalize;  // one URL configured for both hooks
    }
  }
  auto version = metacontroller::declaredHookVersion(doc, hookName(r.kind));
  if (!version) {
    return version.error();
  }
  r.version = *version;
  if (const json* c = member(doc, "controller"); c != nullptr) {
    if (const json* m = member(*c, "metadata"); m != nullptr) {
      r.controllerName = optionalString(*m, "name");
    }
  }
  // sync/finalize send the parent as "object", customize as "parent".
  const json* object = member(doc, kind == HookKind::kCustomize ? "parent" : "object");
  if (object == nullptr) {
    return invalid(kind == HookKind::kCustomize ? "customize request has no \"parent\""
                                                : "hook request has no \"object\"");
  }
  auto parent = parseParent(*object);
  if (!parent) {
    return parent.error();
  }
  r.parent = std::move(parent).value();
  if (kind == HookKind::kCustomize) {
    return r;
  }

  auto vnis = groupObjects(doc, "attachments",
                           std::string(api::kVniKind) + "." + std::string(api::kVniApiVersion));
  if (!vnis) {
    return vnis.error();
  }
  for (const json* o : *vnis) {
    const api::VniObject parsed = api::parseVniObject(*o);
    ObservedVni v;
    v.name = parsed.name;
    v.ns = parsed.ns;
    v.vni = parsed.vni;
    r.vnis.push_back(std::move(v));
  }
  auto pods = groupObjects(doc, "related", "Pod.v1");
  if (!pods) {
    return pods.error();
  }
  for (const json* o : *pods) {
    ObservedPod pod;
    if (const json* m = member(*o, "metadata"); m != nullptr) {
      pod.name = optionalString(*m, "name");
      const json* del = member(*m, "deletionTimestamp");
      pod.terminating = del != nullptr && !del->is_null();
      if (const json* refs = member(*m, "ownerReferences"); refs != nullptr && refs->is_array()) {
        for (const json& ref : *refs) {
          const json* c = member(ref, "controller");
          if (c != nullptr && c->is_boolean() && c->get<bool>()) {
            pod.ownerUids.push_back(optionalString(ref, "uid"));
          }
        }
      }
    }
    if (const json* st = member(*o, "status"); st != nullptr) {
      pod.phase = optionalString(*st, "phase");
    }
    r.pods.push_back(std::move(pod));
  }
  return r;
}

HookPlan planHook(const HookRequest& request, const DecisionConfig& config, std::int64_t nowSec) {
  const ObservedParent& p = request.parent;
  HookPlan plan;
  plan.kind = request.kind;
  plan.optedIn = isOptedIn(p);
  const std::string ownName = vniObjectName(p.uid);
  for (const ObservedVni& v : request.vnis) {
    if (v.name == ownName && (v.ns.empty() || v.ns == p.ns)) {
      plan.ownVniObserved = true;
      plan.op.adopt = v.vni;
    }
  }
  plan.op.owner = OwnerKey{p.uid, p.ns};
  plan.op.ownerKind = p.kind;
  plan.op.ownerName = p.name;

  switch (request.kind) {
    case HookKind::kCustomize:
      plan.op.kind = StoreOp::Kind::kNone;
      break;
    case HookKind::kSync:
      if (plan.optedIn) {
        plan.op.kind = StoreOp::Kind::kAcquire;
        if (const OwnerRef* d = controllingDeployment(p)) {
          plan.op.deferTo = OwnerKey{d->uid, p.ns};
        }
      } else {
        // Never free on sync: a parent that lost its annotation keeps what its pods may use;
        // release is finalize's job, once the pods are gone.
        plan.op.kind = StoreOp::Kind::kLookup;
        plan.op.adopt.reset();
      }
      break;
    case HookKind::kFinalize: {
      plan.op.adopt.reset();
      plan.podsRemaining = countRemainingPods(request);
      bool wait = plan.podsRemaining > 0;
      if (wait && p.deletionTimestampSec &&
          nowSec - *p.deletionTimestampSec >= config.podWaitTimeoutSec) {
        wait = false;
        plan.podWaitTimedOut = true;
      }
      plan.op.kind = wait ? StoreOp::Kind::kLookup : StoreOp::Kind::kRelease;
      break;
    }
  }
  return plan;
}

nlohmann::json renderHookResponse(const HookRequest& request, const HookPlan& plan,
                                  const StoreOutcome& outcome, const DecisionConfig& config) {
  const ObservedParent& p = request.parent;
  json attachments = json::array();
  json labels = json::object();
  json response = json::object();
  if (plan.op.kind == StoreOp::Kind::kRelease) {
    // Released (or nothing was held): let Metacontroller delete the VNI object, and say
    // finalized only once that deletion has been observed, as its docs ask.
    labels[kVniLabel] = nullptr;
    response["finalized"] = !plan.ownVniObserved;
    response["resyncAfterSeconds"] = plan.ownVniObserved ? config.releasedResyncSec : 0.0;
  } else {
    if (outcome.vni) {
      attachments.push_back(vniObject(p, *outcome.vni));
      labels[kVniLabel] = std::to_string(*outcome.vni);
    } else if (outcome.deferredVni) {
      // A ReplicaSet of a Deployment that holds a VNI: no second one, the label shows which.
      labels[kVniLabel] = std::to_string(*outcome.deferredVni);
    }
    if (request.kind == HookKind::kFinalize) {
      response["finalized"] = false;
      response["resyncAfterSeconds"] = config.finalizeResyncSec;
    } else {
      response["resyncAfterSeconds"] = 0.0;
    }
  }
  response["labels"] = std::move(labels);
  response["annotations"] = json::object();
  response["status"] = nullptr;
  response["attachments"] = std::move(attachments);
  return response;
}

nlohmann::json renderCustomizeResponse(const HookRequest& request) {
  const ObservedParent& p = request.parent;
  json related = json::array();
  json selector;
  // The parent's own spec.selector names its pods. A Job's generated selector carries
  // batch.kubernetes.io/controller-uid (Kubernetes >= 1.27) or controller-uid (older), so
  // using it works on both; a Job seen before the controller filled it in falls back to the
  // current label.
  if (p.selector.is_object() && !p.selector.empty()) {
    selector = p.selector;
  } else if (p.kind == "Job") {
    selector = json{{"matchLabels", {{kJobControllerUidLabel, p.uid}}}};
  }
  if (!selector.is_null()) {
    related.push_back(json{{"apiVersion", "v1"},
                           {"resource", "pods"},
                           {"namespace", p.ns},
                           {"labelSelector", selector}});
  }
  return json{{"relatedResources", related}};
}

}  // namespace kc::vni
