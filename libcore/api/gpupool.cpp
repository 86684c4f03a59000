#include "libcore/api/gpupool.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace kc::api {

using nlohmann::json;

bool isValidGpuId(std::string_view id) {
  if (id.empty() || id.size() > kMaxDeviceIdLength) {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
  });
}

json toJson(const PoolGpu& g) {
  json e = {{"id", g.id},
            {"uuid", g.uuid},
            {"model", g.model},
            {"chassis", g.chassis},
            {"node", g.node},
            {"hostPort", g.hostPort},
            {"health", g.healthy ? kHealthy : kUnhealthy},
            {"draining", g.draining},
            {"inUseBy", g.inUseBy}};
  if (!g.healthDetail.empty()) {
    e["healthDetail"] = g.healthDetail;
  }
  return e;
}

namespace {

struct EntryReader {
  const json& entry;
  std::string where;  // "GPUPool p: status.gpus[3]"
  std::vector<std::string>* problems;

  std::string string(const char* key) const {
    const auto it = entry.find(key);
    if (it == entry.end() || it->is_null()) {
      return {};
    }
    if (!it->is_string()) {
      problems->push_back(where + "." + key + " is not a string; read as empty");
      return {};
    }
    return it->get<std::string>();
  }

  bool boolean(const char* key) const {
    const auto it = entry.find(key);
    if (it == entry.end() || it->is_null()) {
      return false;
    }
    if (!it->is_boolean()) {
      problems->push_back(where + "." + key + " is not a boolean; read as false");
      return false;
    }
    return it->get<bool>();
  }

  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    const auto it = entry.find(key);
    if (it == entry.end() || it->is_null()) {
      return out;
    }
    if (!it->is_array()) {
      problems->push_back(where + "." + key + " is not a list; read as empty");
      return out;
    }
    for (const json& v : *it) {
      if (!v.is_string()) {
        problems->push_back(where + "." + key + " holds a value that is not a string; skipped");
        continue;
      }
      out.push_back(v.get<std::string>());
    }
    return out;
  }
};

}  // namespace

PoolGpus parsePoolGpus(const json& pool) {
  PoolGpus out;
  if (!pool.is_object()) {
    return out;  // not an object at all: nothing any store would hold
  }
  if (const auto m = pool.find("metadata"); m != pool.end() && m->is_object()) {
    if (const auto n = m->find("name"); n != m->end() && n->is_string()) {
      out.pool = n->get<std::string>();
    }
  }
  const std::string prefix =
      "GPUPool " + (out.pool.empty() ? std::string("(no name)") : out.pool) + ": ";
  const auto status = pool.find("status");
  if (status == pool.end() || status->is_null()) {
    return out;  // reconfig-mgr has not written an inventory yet
  }
  if (!status->is_object()) {
    out.problems.push_back(prefix + "status is not an object");
    return out;
  }
  const auto gpus = status->find("gpus");
  if (gpus == status->end() || gpus->is_null()) {
    return out;
  }
  if (!gpus->is_array()) {
    out.problems.push_back(prefix + "status.gpus is not an array");
    return out;
  }
  std::map<std::string, std::size_t> seen;  // id -> entries with it
  for (std::size_t i = 0; i < gpus->size(); ++i) {
    const json& g = (*gpus)[i];
    const std::string where = prefix + "status.gpus[" + std::to_string(i) + "]";
    if (!g.is_object()) {
      out.problems.push_back(where + " is not an object; dropped");
      continue;
    }
    const EntryReader r{g, where, &out.problems};
    PoolGpu gpu;
    const auto id = g.find("id");
    if (id == g.end() || !id->is_string() || !isValidGpuId(id->get<std::string>())) {
      out.problems.push_back(where + ".id " +
                             (id == g.end()
                                  ? std::string("is missing")
                                  : "'" + (id->is_string() ? id->get<std::string>() : id->dump()) +
                                        "' is not a GPU id (1-63 of [A-Za-z0-9._:-])") +
                             "; dropped");
      continue;
    }
    gpu.id = id->get<std::string>();
    gpu.uuid = r.string("uuid");
    gpu.model = r.string("model");
    gpu.chassis = r.string("chassis");
    gpu.node = r.string("node");
    gpu.hostPort = r.string("hostPort");
    gpu.healthDetail = r.string("healthDetail");
    gpu.draining = r.boolean("draining");
    gpu.inUseBy = r.strings("inUseBy");
    if (const auto h = g.find("health"); h != g.end() && !h->is_null()) {
      const std::string health = h->is_string() ? h->get<std::string>() : h->dump();
      if (health == kHealthy) {
        gpu.healthy = true;
      } else if (health == kUnhealthy) {
        gpu.healthy = false;
      } else {
        gpu.healthy = false;
        gpu.healthDetail = "unknown health value";
        out.problems.push_back(prefix + "GPU " + gpu.id + " has health '" + health +
                               "' (want Healthy or Unhealthy); read as Unhealthy");
      }
    }
    ++seen[gpu.id];
    out.gpus.push_back(std::move(gpu));
  }
  std::set<std::string> repeated;
  for (const auto& [id, n] : seen) {
    if (n > 1) {
      repeated.insert(id);
      out.problems.push_back(prefix + "GPU id " + id + " appears " + std::to_string(n) +
                             " times in status.gpus; every entry of it dropped");
    }
  }
  if (!repeated.empty()) {
    std::erase_if(out.gpus, [&](const PoolGpu& g) { return repeated.count(g.id) != 0; });
  }
  return out;
}

bool servesDevicePlugin(const nlohmann::json& pool) {
  if (!pool.is_object()) {
    return true;
  }
  const auto spec = pool.find("spec");
  if (spec == pool.end() || !spec->is_object()) {
    return true;
  }
  const auto path = spec->find("allocationPath");
  return path == spec->end() || !path->is_string() || *path != kPathDra;
}

}  // namespace kc::api
