#include "services/kubecomp-sched/gang_state.hpp"

#include <charconv>

#include "libcore/base/rfc3339.hpp"

namespace kc::sched {
namespace {

using nlohmann::json;

const json* objectAt(const json& obj, const char* a, const char* b) {
  auto ia = obj.find(a);
  if (ia == obj.end() || !ia->is_object()) {
    return nullptr;
  }
  auto ib = ia->find(b);
  return ib != ia->end() && ib->is_object() ? &*ib : nullptr;
}

std::string stringIn(const json* map, std::string_view key) {
  if (map == nullptr) {
    return {};
  }
  auto it = map->find(std::string(key));
  return it != map->end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An int32 field of the spec: absent (nullopt), or its value; `bad` set when it is not a whole
// number in range.
std::optional<std::int64_t> intField(const json& spec, const char* name, std::string& bad) {
  auto it = spec.find(name);
  if (it == spec.end() || it->is_null()) {
    return std::nullopt;
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
      it->get<std::int64_t>() > 2147483647) {
    bad = std::string("spec.") + name + " " + it->dump() + " is not a whole number 0..2147483647";
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

}  // namespace

GangRef readGangRef(const json& pod) {
  GangRef ref;
  const json* labels = objectAt(pod, "metadata", "labels");
  const std::string ns = [&] {
    auto m = pod.find("metadata");
    return m != pod.end() && m->is_object() ? m->value("namespace", std::string()) : std::string();
  }();
  if (std::string pg = stringIn(labels, kPodGroupLabel); !pg.empty()) {
    ref.kind = GangRef::Kind::kPodGroup;
    ref.key = "pg:" + ns + "/" + pg;
    ref.name = std::move(pg);
    return ref;
  }
  std::string kueue = stringIn(labels, kKueuePodGroupNameLabel);
  if (kueue.empty()) {
    return ref;
  }
  ref.kind = GangRef::Kind::kKueue;
  ref.key = "kueue:" + ns + "/" + kueue;
  ref.name = std::move(kueue);
  const std::string total =
      stringIn(objectAt(pod, "metadata", "annotations"), kKueuePodGroupTotalCountAnnotation);
  std::uint32_t n = 0;
  const auto [end, ec] = std::from_chars(total.data(), total.data() + total.size(), n);
  if (total.empty() || ec != std::errc() || end != total.data() + total.size() || n == 0) {
    ref.invalid = "annotation " + std::string(kKueuePodGroupTotalCountAnnotation) + " '" + total +
                  "' of a pod in Kueue pod group " + ref.name + " is not a whole number >= 1";
  }
  ref.kueueTotal = n;
  return ref;
}

std::string gangDraNotice(const GangRef& ref, const std::string& ns) {
  const std::string group =
      (ref.kind == GangRef::Kind::kPodGroup ? "PodGroup " : "Kueue pod group ") + ns + "/" +
      ref.name;
  return "the pod names " + group +
         ", but gang scheduling does not cover pods that use ResourceClaims yet: it is scheduled "
         "on its own, neither waiting for the other members nor counted toward the gang's size";
}

Result<std::pair<std::string, PodGroupSpec>> readPodGroup(const json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object() || !meta->contains("name") ||
      !(*meta)["name"].is_string()) {
    return makeError(kc::errc::kInvalid, "PodGroup without metadata.name");
  }
  const std::string key =
      "pg:" + meta->value("namespace", std::string()) + "/" + (*meta)["name"].get<std::string>();
  PodGroupSpec spec;
  if (auto t = parseRfc3339(meta->value("creationTimestamp", std::string())); t) {
    spec.created = std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
  }
  const json s = obj.value("spec", json::object());
  if (!s.is_object()) {
    spec.invalid = "spec is not an object";
    return std::pair{key, spec};
  }
  if (auto m = intField(s, "minMember", spec.invalid)) {
    spec.minMember = *m == 0 ? 1 : static_cast<std::uint32_t>(*m);  // 0: no gang rule
  }
  if (auto t = intField(s, "scheduleTimeoutSeconds", spec.invalid); t && *t > 0) {
    spec.scheduleTimeout = std::chrono::seconds(*t);
  }
  return std::pair{key, spec};
}

void GangState::setPodGroup(const std::string& key, PodGroupSpec spec) {
  groups_[key] = std::move(spec);
}

void GangState::removePodGroup(const std::string& key) {
  groups_.erase(key);
}

void GangState::setMember(const std::string& podKey, const GangRef& ref) {
  auto old = gangOf_.find(podKey);
  if (old != gangOf_.end()) {
    if (old->second == ref.key) {
      return;
    }
    auto m = members_.find(old->second);
    if (m != members_.end()) {
      m->second.erase(podKey);
      if (m->second.empty()) {
        members_.erase(m);
      }
    }
    gangOf_.erase(old);
  }
  if (ref.member()) {
    members_[ref.key].insert(podKey);
    gangOf_[podKey] = ref.key;
  }
}

void GangState::removeMember(const std::string& podKey) {
  setMember(podKey, GangRef{});
}

std::optional<GangState::Rule> GangState::rule(const GangRef& ref) const {
  if (ref.kind == GangRef::Kind::kKueue) {
    return Rule{ref.kueueTotal, std::nullopt, ref.invalid};
  }
  auto g = groups_.find(ref.key);
  if (g == groups_.end()) {
    return std::nullopt;
  }
  return Rule{g->second.minMember, g->second.scheduleTimeout, g->second.invalid};
}

const std::set<std::string>& GangState::members(const std::string& gangKey) const {
  auto m = members_.find(gangKey);
  return m == members_.end() ? none_ : m->second;
}

}  // namespace kc::sched
