#include "libcore/api/dra_slice.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "libcore/api/json_read.hpp"

namespace kc::api {

using detail::member;
using detail::text;
using nlohmann::json;

namespace {

constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
constexpr std::size_t kMaxDnsLabel = 63;
constexpr std::size_t kMaxObjectName = 253;

// 8 lowercase hex digits.
std::string hex8(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h = (h ^ c) * 16777619u;
  }
  return h;
}

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsLabel || s.front() == '-' || s.back() == '-') {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// "<prefix>-<8 hex of the key>-<index>", the prefix cut so the name stays a valid object name.
std::string sliceName(std::string_view gpuPool, std::string_view part, std::size_t index) {
  const std::string suffix = "-" + hex8(fnv1a(std::string(gpuPool) + '\0' + std::string(part))) +
                             "-" + std::to_string(index);
  std::string prefix = std::string(gpuPool) + "-" + std::string(part);
  for (char& c : prefix) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  prefix.resize(std::min(prefix.size(), kMaxObjectName - suffix.size()));
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) {
    prefix.pop_back();
  }
  return prefix + suffix;
}

SliceDevice deviceOf(const PoolGpu& gpu, std::string_view gpuPool, bool fabric) {
  return SliceDevice{.name = draDeviceName(gpu.id),
                     .id = gpu.id,
                     .uuid = gpu.uuid,
                     .model = gpu.model,
                     .gpuPool = std::string(gpuPool),
                     .chassis = gpu.chassis,
                     .bindsToNode = fabric};
}

// One DRA pool's devices as slices of at most kMaxDevicesPerSlice, sharing generation and count.
void appendPool(std::vector<ResourceSlice>& out, const ResourceSlice& shape,
                std::vector<SliceDevice> devices, std::string_view part) {
  const std::size_t count =
      std::max<std::size_t>(1, (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice);
  for (std::size_t i = 0; i < count; ++i) {
    ResourceSlice s = shape;
    s.name = sliceName(shape.gpuPool, part, i);
    s.sliceCount = static_cast<std::int64_t>(count);
    const std::size_t from = i * kMaxDevicesPerSlice;
    const std::size_t to = std::min(devices.size(), from + kMaxDevicesPerSlice);
    for (std::size_t d = from; d < to; ++d) {
      s.devices.push_back(std::move(devices[d]));
    }
    out.push_back(std::move(s));
  }
}

json attributesOf(const SliceDevice& d) {
  json a = json::object();
  a["id"] = {{"string", d.id}};
  a["gpuPool"] = {{"string", d.gpuPool}};
  a["chassis"] = {{"string", d.chassis}};
  if (!d.uuid.empty()) {
    a["uuid"] = {{"string", d.uuid}};
  }
  if (!d.model.empty()) {
    a["model"] = {{"string", d.model}};
  }
  return a;
}

json deviceJson(const SliceDevice& d) {
  json out{{"name", d.name}, {"attributes", attributesOf(d)}};
  if (d.bindsToNode) {
    out["bindsToNode"] = true;
    out["bindingConditions"] = json::array({std::string(kAttachedCondition)});
    out["bindingFailureConditions"] = json::array({std::string(kAttachFailedCondition)});
  }
  return out;
}

}  // namespace

DraPoolName splitDraPool(std::string_view pool) {
  const std::size_t slash = pool.find('/');
  if (slash == std::string_view::npos) {
    return DraPoolName{std::string(pool), ""};
  }
  return DraPoolName{std::string(pool.substr(0, slash)), std::string(pool.substr(slash + 1))};
}

bool isDraPoolOf(std::string_view pool, std::string_view gpuPool) {
  return !gpuPool.empty() && splitDraPool(pool).gpuPool == gpuPool;
}

std::string draDeviceName(std::string_view gpuId) {
  if (isDnsLabel(gpuId)) {
    return std::string(gpuId);
  }
  std::string base;
  for (char c : gpuId) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    base += (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') ? l : '-';
  }
  const std::string suffix = "-" + hex8(fnv1a(gpuId));
  base.resize(std::min(base.size(), kMaxDnsLabel - suffix.size() - 1));
  while (!base.empty() && base.back() == '-') {
    base.pop_back();
  }
  // A label starts with an alphanumeric character; "g" keeps "-x" and "" ids valid.
  if (base.empty() || base.front() == '-') {
    base.insert(base.begin(), 'g');
  }
  return base + suffix;
}

std::vector<ResourceSlice> buildPoolSlices(std::string_view gpuPool,
                                           const std::vector<std::string>& nodes,
                                           const std::vector<PoolGpu>& gpus,
                                           std::int64_t generation, const HeldDevices& held) {
  if (nodes.empty()) {
    return {};  // a GPUPool connecting no node offers nothing anywhere
  }
  std::map<std::string, std::vector<SliceDevice>, std::less<>> local;
  std::vector<SliceDevice> fabric;
  for (const PoolGpu& g : gpus) {
    if (auto h = held.find(g.id); h != held.end()) {
      // Where its claim's allocation names it.
      const std::string prefix = std::string(gpuPool) + "/";
      const std::string node =
          h->second.rfind(prefix, 0) == 0 ? h->second.substr(prefix.size()) : std::string();
      if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
        local[node].push_back(deviceOf(g, gpuPool, false));
      } else {
        fabric.push_back(deviceOf(g, gpuPool, true));
      }
      continue;
    }
    if (!g.healthy || g.draining) {
      continue;  // withheld until usable
    }
    if (g.node.empty()) {
      fabric.push_back(deviceOf(g, gpuPool, true));
    } else if (std::find(nodes.begin(), nodes.end(), g.node) != nodes.end()) {
      local[g.node].push_back(deviceOf(g, gpuPool, false));
    }
    // Attached to a node outside the pool: usable by nobody here.
  }
  std::vector<ResourceSlice> out;
  ResourceSlice shape;
  shape.gpuPool = std::string(gpuPool);
  shape.generation = generation;
  for (const std::string& node : nodes) {
    auto it = local.find(node);
    if (it == local.end()) {
      continue;
    }
    shape.poolName = std::string(gpuPool) + "/" + node;
    shape.nodeName = node;
    appendPool(out, shape, std::move(it->second), node);
  }
  shape.poolName = std::string(gpuPool);
  shape.nodeName.clear();
  shape.nodes = nodes;
  appendPool(out, shape, std::move(fabric), "fabric");
  return out;
}

json toJson(const ResourceSlice& s) {
  json spec{
      {"driver", kDraDriverName},
      {"pool",
       {{"name", s.poolName}, {"generation", s.generation}, {"resourceSliceCount", s.sliceCount}}}};
  if (!s.nodeName.empty()) {
    spec["nodeName"] = s.nodeName;
  } else {
    spec["nodeSelector"] = {
        {"nodeSelectorTerms",
         json::array({{{"matchExpressions", json::array({{{"key", kHostnameLabel},
                                                          {"operator", "In"},
                                                          {"values", s.nodes}}})}}})}};
  }
  json devices = json::array();
  for (const SliceDevice& d : s.devices) {
    devices.push_back(deviceJson(d));
  }
  spec["devices"] = std::move(devices);
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceSlice"},
              {"metadata", {{"name", s.name}, {"labels", {{kSlicePoolLabel, s.gpuPool}}}}},
              {"spec", std::move(spec)}};
}

namespace {

Error invalid(std::string_view name, const std::string& what) {
  return makeError(errc::kInvalid, "ResourceSlice " + std::string(name) + ": " + what);
}

std::string stringAttribute(const json& attributes, const char* name) {
  const json* a = member(attributes, name);
  return a == nullptr ? std::string() : text(*a, "string");
}

Result<SliceDevice> parseDevice(const json& d, const ResourceSlice& s) {
  SliceDevice out;
  out.name = text(d, "name");
  if (!isDnsLabel(out.name)) {
    return invalid(s.name, "device name '" + out.name + "' is not a DNS label");
  }
  const json* attributes = member(d, "attributes");
  if (attributes == nullptr || !attributes->is_object()) {
    return invalid(s.name, "device " + out.name + " has no attributes");
  }
  out.id = stringAttribute(*attributes, "id");
  out.gpuPool = stringAttribute(*attributes, "gpuPool");
  out.chassis = stringAttribute(*attributes, "chassis");
  out.uuid = stringAttribute(*attributes, "uuid");
  out.model = stringAttribute(*attributes, "model");
  if (!isValidGpuId(out.id) || draDeviceName(out.id) != out.name) {
    return invalid(s.name, "device " + out.name + " has no matching GPU id attribute");
  }
  const json* binds = member(d, "bindsToNode");
  out.bindsToNode = binds != nullptr && binds->is_boolean() && binds->get<bool>();
  return out;
}

Result<std::vector<std::string>> selectorNodes(const json& spec, std::string_view name) {
  const json* terms = member(spec, "nodeSelector");
  terms = terms == nullptr ? nullptr : member(*terms, "nodeSelectorTerms");
  if (terms == nullptr || !terms->is_array() || terms->size() != 1) {
    return invalid(name, "spec.nodeSelector is not one term");
  }
  const json* exprs = member((*terms)[0], "matchExpressions");
  if (exprs == nullptr || !exprs->is_array() || exprs->size() != 1 ||
      text((*exprs)[0], "key") != kHostnameLabel || text((*exprs)[0], "operator") != "In") {
    return invalid(name, "spec.nodeSelector is not kubernetes.io/hostname In [nodes]");
  }
  std::vector<std::string> nodes;
  const json* values = member((*exprs)[0], "values");
  for (const json& v : values != nullptr && values->is_array() ? *values : json::array()) {
    if (!v.is_string()) {
      return invalid(name, "spec.nodeSelector has a value that is not a string");
    }
    nodes.push_back(v.get<std::string>());
  }
  return nodes;
}

}  // namespace

Result<ResourceSlice> parseResourceSlice(const json& object) {
  ResourceSlice s;
  const json* meta = member(object, "metadata");
  s.name = meta == nullptr ? std::string() : text(*meta, "name");
  const json* labels = meta == nullptr ? nullptr : member(*meta, "labels");
  s.gpuPool =
      labels == nullptr ? std::string() : text(*labels, std::string(kSlicePoolLabel).c_str());
  const json* spec = member(object, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return invalid(s.name, "no spec");
  }
  if (text(*spec, "driver") != kDraDriverName) {
    return invalid(s.name, "spec.driver is not " + std::string(kDraDriverName));
  }
  const json* pool = member(*spec, "pool");
  const json* generation = pool == nullptr ? nullptr : member(*pool, "generation");
  const json* count = pool == nullptr ? nullptr : member(*pool, "resourceSliceCount");
  s.poolName = pool == nullptr ? std::string() : text(*pool, "name");
  if (s.poolName.empty() || generation == nullptr || !generation->is_number_integer() ||
      count == nullptr || !count->is_number_integer() || count->get<std::int64_t>() < 1) {
    return invalid(s.name, "spec.pool needs a name, a generation and resourceSliceCount >= 1");
  }
  s.generation = generation->get<std::int64_t>();
  s.sliceCount = count->get<std::int64_t>();
  s.nodeName = text(*spec, "nodeName");
  if (s.nodeName.empty()) {
    auto nodes = selectorNodes(*spec, s.name);
    if (!nodes) {
      return nodes.error();
    }
    s.nodes = std::move(*nodes);
  }
  const json* devices = member(*spec, "devices");
  for (const json& d : devices != nullptr && devices->is_array() ? *devices : json::array()) {
    auto device = parseDevice(d, s);
    if (!device) {
      return device.error();
    }
    s.devices.push_back(std::move(*device));
  }
  return s;
}

}  // namespace kc::api
