#include "services/kubecomp-sched/dra_state.hpp"

#include <algorithm>

#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/error_codes.hpp"

namespace kc::sched {

std::string deviceKey(const std::string& pool, const std::string& device) {
  // The GPUPool part of the DRA pool: a GPU keeps its device name in every DRA pool of its
  // GPUPool, so an allocation that names it in another of them (the fabric pool, before the
  // attach) still holds it.
  return api::splitDraPool(pool).gpuPool + "\n" + device;
}

cel::Device celDevice(const DraCandidate& c) {
  cel::Device d;
  d.driver = std::string(api::kDraDriverName);
  const std::string domain = std::string(api::kDraDriverName) + "/";
  cel::setAttribute(d, domain + "id", c.gpuId);
  cel::setAttribute(d, domain + "gpuPool", c.gpuPool);
  cel::setAttribute(d, domain + "chassis", c.chassis);
  if (!c.model.empty()) {
    cel::setAttribute(d, domain + "model", c.model);
  }
  if (!c.uuid.empty()) {
    cel::setAttribute(d, domain + "uuid", c.uuid);
  }
  return d;
}

bool DraState::setClaim(api::Claim claim) {
  const std::string key = claim.ns + "/" + claim.name;
  auto it = claims_.find(key);
  if (it != claims_.end() && !claim.resourceVersion.empty() &&
      it->second.resourceVersion == claim.resourceVersion) {
    return false;
  }
  removeClaim(key);
  if (claim.allocation) {
    for (const auto& d : claim.allocation->results) {
      ++allocated_[deviceKey(d.pool, d.device)];
    }
  }
  claims_.insert_or_assign(key, std::move(claim));
  return true;
}

bool DraState::removeClaim(const std::string& key) {
  auto it = claims_.find(key);
  if (it == claims_.end()) {
    return false;
  }
  if (it->second.allocation) {
    for (const auto& d : it->second.allocation->results) {
      auto a = allocated_.find(deviceKey(d.pool, d.device));
      if (a != allocated_.end() && --a->second <= 0) {
        allocated_.erase(a);
      }
    }
  }
  claims_.erase(it);
  return true;
}

void DraState::setDeviceClass(const std::string& name, std::vector<std::string> selectors) {
  classes_[name] = Class{std::move(selectors)};
}

void DraState::removeDeviceClass(const std::string& name) {
  classes_.erase(name);
}

const api::Claim* DraState::claim(const std::string& key) const {
  auto it = claims_.find(key);
  return it == claims_.end() ? nullptr : &it->second;
}

bool DraState::allocated(const std::string& pool, const std::string& device) const {
  return allocated_.count(deviceKey(pool, device)) > 0;
}

int DraState::matches(const std::vector<std::string>& selectors, const DraCandidate& c,
                      std::string* why) const {
  if (selectors.empty()) {
    return 1;
  }
  const cel::Device device = celDevice(c);
  for (const std::string& expr : selectors) {
    auto it = programs_.find(expr);
    if (it == programs_.end()) {
      auto compiled = cel::compile(expr);
      if (compiled) {
        it = programs_.emplace(expr, std::move(*compiled)).first;
      } else {
        programErrors_[expr] = compiled.error().toError().message;
        it = programs_.emplace(expr, std::nullopt).first;
      }
    }
    if (!it->second) {
      *why = "selector \"" + expr + "\": " + programErrors_[expr];
      return -1;
    }
    const cel::Outcome out = cel::evaluate(*it->second, device);
    if (!out.matches()) {
      return 0;  // false, or a runtime error (a missing attribute): not this device
    }
  }
  return 1;
}

namespace {

DraDemand verdict(DraDemand::Verdict v, std::string message) {
  DraDemand d;
  d.verdict = v;
  d.message = std::move(message);
  return d;
}

bool reservedFor(const api::Claim& c, const std::string& podUid) {
  return std::any_of(c.reservedFor.begin(), c.reservedFor.end(), [&](const api::ClaimConsumer& r) {
    return r.resource == "pods" && r.uid == podUid;
  });
}

}  // namespace

DraDemand DraState::demand(const std::string& ns, const std::string& podUid,
                           const std::vector<api::PodClaimRef>& refs,
                           const std::vector<DraCandidate>& probes) const {
  using V = DraDemand::Verdict;
  DraDemand out;
  out.verdict = V::kServe;
  std::size_t allocatedCount = 0;
  for (const api::PodClaimRef& ref : refs) {
    if (ref.claimName.empty()) {
      return verdict(V::kWait, "waiting for the ResourceClaim of " + ref.name +
                                   " to be created from its template");
    }
    const api::Claim* c = claim(ns + "/" + ref.claimName);
    if (c == nullptr) {
      return verdict(V::kWait, "ResourceClaim " + ns + "/" + ref.claimName + " not found");
    }
    if (c->deleting) {
      return verdict(V::kWait, "ResourceClaim " + ns + "/" + ref.claimName + " is being deleted");
    }
    const std::string id = "ResourceClaim " + ns + "/" + ref.claimName;
    if (!c->specUnsupported.empty()) {
      return verdict(V::kRefuse, id + ": " + c->specUnsupported + " by kubecomp-sched");
    }
    for (const api::ClaimRequest& r : c->requests) {
      if (!r.unsupported.empty()) {
        return verdict(V::kRefuse, id + ": " + r.unsupported +
                                       ", which kubecomp-sched does not "
                                       "allocate");
      }
      auto cls = classes_.find(r.deviceClassName);
      if (cls == classes_.end()) {
        return verdict(V::kWait, id + ": DeviceClass " + r.deviceClassName + " not found");
      }
      bool ours = false;
      for (const DraCandidate& p : probes) {
        std::string why;
        const int m = matches(cls->second.selectors, p, &why);
        if (m < 0) {
          return verdict(V::kRefuse, id + ": DeviceClass " + r.deviceClassName + ": " + why);
        }
        ours = ours || m == 1;
      }
      if (!ours) {
        return verdict(V::kNotOurs,
                       id + " asks DeviceClass " + r.deviceClassName +
                           ", which selects no device of driver gpu.kubecomp.io: kubecomp-sched "
                           "schedules only pods whose claims all use that driver");
      }
      if (r.all) {
        return verdict(V::kRefuse, id + ": request " + r.name +
                                       " asks allocationMode All, which kubecomp-sched does not "
                                       "allocate from a pool");
      }
      out.gpus += r.count;
    }
    if (c->allocation) {
      if (!reservedFor(*c, podUid)) {
        return verdict(V::kRefuse, id + " is allocated and reserved for another consumer");
      }
      if (!out.node.empty() && out.node != c->allocation->nodeName) {
        return verdict(V::kRefuse, id + " is allocated for another node than the pod's other "
                                        "claims");
      }
      out.node = c->allocation->nodeName;
      ++allocatedCount;
    }
    out.claims.push_back(*c);
  }
  if (allocatedCount == refs.size() && !refs.empty()) {
    out.verdict = V::kAllocated;
  } else if (allocatedCount > 0) {
    out.verdict = V::kServe;  // a part written before a restart: cleared, then placed again
    out.message = "partly allocated";
  }
  return out;
}

std::set<std::string> DraState::freeSoon(
    const std::function<bool(const api::Claim&)>& releasing) const {
  std::map<std::string, int> letGo;  // deviceKey -> releasing claims holding it
  for (const auto& [key, c] : claims_) {
    if (!c.allocation || !releasing(c)) {
      continue;
    }
    for (const auto& d : c.allocation->results) {
      ++letGo[deviceKey(d.pool, d.device)];
    }
  }
  std::set<std::string> out;
  for (const auto& [key, n] : letGo) {
    if (auto a = allocated_.find(key); a != allocated_.end() && a->second == n) {
      out.insert(key);
    }
  }
  return out;
}

Result<std::vector<DraPick>> DraState::pick(const std::vector<api::Claim>& claims,
                                            const std::vector<DraCandidate>& local,
                                            const std::vector<DraCandidate>& remote,
                                            const std::function<bool(const std::string&)>& taken,
                                            const std::set<std::string>* freeSoon) const {
  std::vector<DraPick> out;
  std::set<std::string> used;  // by this pod's earlier requests
  for (const api::Claim& c : claims) {
    for (const api::ClaimRequest& r : c.requests) {
      auto cls = classes_.find(r.deviceClassName);
      const std::vector<std::string> none;
      const auto& classSel = cls == classes_.end() ? none : cls->second.selectors;
      std::int64_t need = r.count;
      for (int fabric = 0; fabric < 2 && need > 0; ++fabric) {
        for (const DraCandidate& d : fabric == 0 ? local : remote) {
          if (need == 0) {
            break;
          }
          const std::string key = deviceKey(d.pool, d.device);
          if (used.count(key) != 0 || taken(key) ||
              (allocated(d.pool, d.device) && (freeSoon == nullptr || freeSoon->count(key) == 0))) {
            continue;
          }
          std::string why;
          const int a = matches(classSel, d, &why);
          const int b = a == 1 ? matches(r.selectors, d, &why) : a;
          if (b < 0) {
            return makeError(errc::kUnsupported,
                             "ResourceClaim " + c.ns + "/" + c.name + ": " + why);
          }
          if (b == 0) {
            continue;
          }
          DraPick p;
          p.claim = c.ns + "/" + c.name;
          p.gpuId = d.gpuId;
          p.device.request = r.name;
          p.device.driver = std::string(api::kDraDriverName);
          p.device.pool = d.pool;
          p.device.device = d.device;
          if (fabric == 1) {
            p.device.bindingConditions = {std::string(api::kAttachedCondition)};
            p.device.bindingFailureConditions = {std::string(api::kAttachFailedCondition)};
          }
          used.insert(key);
          out.push_back(std::move(p));
          --need;
        }
      }
      if (need > 0) {
        return makeError(errc::kUnschedulable,
                         "ResourceClaim " + c.ns + "/" + c.name + " request " + r.name + ": " +
                             std::to_string(need) + " of " + std::to_string(r.count) +
                             " matching gpu.kubecomp.io devices not free for this node");
      }
    }
  }
  return out;
}

}  // namespace kc::sched
