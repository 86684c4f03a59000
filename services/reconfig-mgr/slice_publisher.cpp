#include "services/reconfig-mgr/slice_publisher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"

namespace kc::reconfig {

using nlohmann::json;

namespace {

struct Existing {
  json object;
  std::optional<api::ResourceSlice> slice;  // nullopt: not a slice our writer would write
};

// Same devices, pools and nodes; the generation aside.
bool sameContent(api::ResourceSlice a, const api::ResourceSlice& b) {
  a.generation = b.generation;
  return a == b;
}

}  // namespace

Result<bool> SlicePublisher::sync(bool dra, const std::vector<std::string>& nodes,
                                  const std::vector<api::PoolGpu>& gpus,
                                  const api::HeldDevices& held) {
  kube::ListOptions opts;
  opts.labelSelector = std::string(api::kSlicePoolLabel) + "=" + gpuPool_;
  auto listed = client_.listAll(api::gvr::resourceSlices(), "", opts);
  if (!listed && !dra && listed.error().isNotFound()) {
    return false;  // a cluster without resource.k8s.io/v1 has no slices to remove
  }
  if (!listed) {
    if (listed.error().isNotFound()) {
      return makeError(errc::kUnavailable,
                       "the API server does not serve resource.k8s.io/v1 ResourceSlices "
                       "(Kubernetes 1.34 or later); allocationPath DRA needs them");
    }
    return listed.error().toError();
  }
  std::map<std::string, Existing> existing;
  std::int64_t generation = 0;
  for (json& item : listed->items) {
    const std::string name = item["metadata"].value("name", "");
    auto parsed = api::parseResourceSlice(item);
    if (parsed) {
      generation = std::max(generation, parsed->generation);
    } else {
      spdlog::warn("pool {}: {}; it is replaced", gpuPool_, parsed.error().message);
    }
    existing[name] =
        Existing{std::move(item), parsed ? std::optional(std::move(*parsed)) : std::nullopt};
  }
  auto desired = dra ? api::buildPoolSlices(gpuPool_, nodes, gpus, generation, held)
                     : std::vector<api::ResourceSlice>{};
  bool same = desired.size() == existing.size();
  for (const auto& s : desired) {
    auto it = existing.find(s.name);
    same = same && it != existing.end() && it->second.slice && sameContent(*it->second.slice, s);
  }
  if (same) {
    return false;
  }
  // A new generation for the whole pool: written first, leftovers deleted last.
  for (auto& s : desired) {
    s.generation = generation + 1;
    json body = api::toJson(s);
    auto it = existing.find(s.name);
    if (it == existing.end()) {
      if (auto r = client_.create(api::gvr::resourceSlices(), "", body); !r) {
        return r.error().toError();
      }
      continue;
    }
    body["metadata"]["resourceVersion"] =
        it->second.object["metadata"].value("resourceVersion", "");
    if (auto r = client_.update(api::gvr::resourceSlices(), "", body); !r) {
      return r.error().toError();
    }
    existing.erase(it);
  }
  for (const auto& [name, e] : existing) {
    auto r = client_.remove(api::gvr::resourceSlices(), "", name);
    if (!r && !r.error().isNotFound()) {
      return r.error().toError();
    }
  }
  return true;
}

}  // namespace kc::reconfig
