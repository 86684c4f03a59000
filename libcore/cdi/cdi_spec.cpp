#include "libcore/cdi/cdi_spec.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <set>
#include <utility>

#include "libcore/api/names.hpp"

namespace kc::cdi {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxSanitisedLength = 64;
constexpr std::size_t kHashHexLength = 16;
constexpr std::string_view kDevDir = "/dev/";
constexpr std::string_view kGpuNodePrefix = "nvidia";

bool isAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool isNameChar(char c) {
  return isAlnum(c) || c == '-' || c == '_' || c == '.';
}

bool isLowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex16(std::uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(kHashHexLength, '0');
  for (std::size_t i = 0; i < kHashHexLength; ++i) {
    out[kHashHexLength - 1 - i] = kDigits[v & 0xfU];
    v >>= 4U;
  }
  return out;
}

// "h<16 hex>" alone or after '_': the form cdiDeviceName gives names it maps.
bool hasMappedForm(std::string_view name) {
  const std::size_t tail = kHashHexLength + 1;
  if (name.size() < tail || name[name.size() - tail] != 'h') {
    return false;
  }
  if (!std::all_of(name.end() - static_cast<std::ptrdiff_t>(kHashHexLength), name.end(),
                   isLowerHex)) {
    return false;
  }
  return name.size() == tail || name[name.size() - tail - 1] == '_';
}

std::string trimmedRoot(std::string root) {
  while (!root.empty() && root.back() == '/') {
    root.pop_back();
  }
  return root;
}

json nodeJson(const std::string& root, std::string_view node) {
  return json{{"path", std::string(kDevDir) + std::string(node)},
              {"hostPath", root + "/" + std::string(node)}};
}

json envJson(std::string_view uuids, std::string_view gpuIds) {
  return json::array({std::string(api::kVisibleDevicesEnv) + "=" + std::string(uuids),
                      std::string(api::kGpuIdsEnv) + "=" + std::string(gpuIds)});
}

// ---- parseOurSpec

Error invalid(const std::string& field, const std::string& why) {
  return makeError(kc::errc::kInvalid, "cdi spec: " + field + ": " + why);
}

Status onlyKeys(const json& obj, std::initializer_list<std::string_view> keys,
                const std::string& field) {
  if (!obj.is_object()) {
    return invalid(field, "not a JSON object");
  }
  for (const auto& [key, value] : obj.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return invalid(field, "unknown field '" + key + "'");
    }
  }
  return okStatus();
}

// obj[key] is the string `want`.
bool isString(const json& obj, const char* key, std::string_view want) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() && it->get_ref<const std::string&>() == want;
}

struct EnvRead {
  std::string uuids;
  std::string gpuIds;
};

Result<EnvRead> readEnv(const json& env, const std::string& field) {
  if (!env.is_array() || env.size() != 2) {
    return invalid(field, "not a list of the two variables " +
                              std::string(api::kVisibleDevicesEnv) + " and " +
                              std::string(api::kGpuIdsEnv));
  }
  std::optional<std::string> uuids;
  std::optional<std::string> gpuIds;
  for (const json& entry : env) {
    const std::string text = entry.is_string() ? entry.get<std::string>() : std::string();
    const std::size_t eq = text.find('=');
    const std::string_view name = std::string_view(text).substr(0, eq);
    std::optional<std::string>* slot = name == api::kVisibleDevicesEnv ? &uuids
                                       : name == api::kGpuIdsEnv       ? &gpuIds
                                                                       : nullptr;
    if (eq == std::string::npos || slot == nullptr || slot->has_value()) {
      return invalid(field, "unexpected entry '" + text.substr(0, 80) + "'");
    }
    *slot = text.substr(eq + 1);
  }
  return EnvRead{*uuids, *gpuIds};
}

// "<root>/<node>" with an absolute root, as buildSpec writes a hostPath.
bool isHostPathOf(const json& hostPath, std::string_view node) {
  if (!hostPath.is_string()) {
    return false;
  }
  const std::string_view text = hostPath.get_ref<const std::string&>();
  return text.starts_with('/') && text.size() > node.size() && text.ends_with(node) &&
         text[text.size() - node.size() - 1] == '/';
}

// One device node {path, hostPath}; the node's name under /dev.
Result<std::string> readNode(const json& node, const std::string& field) {
  if (Status keys = onlyKeys(node, {"path", "hostPath"}, field); !keys) {
    return std::move(keys).error();
  }
  const json* path = node.contains("path") ? &node["path"] : nullptr;
  if (path == nullptr || !path->is_string() ||
      !path->get_ref<const std::string&>().starts_with(kDevDir)) {
    return invalid(field + ".path", "not a path under /dev");
  }
  const std::string name = path->get<std::string>().substr(kDevDir.size());
  if (!node.contains("hostPath") || !isHostPathOf(node["hostPath"], name)) {
    return invalid(field + ".hostPath", "not an absolute path ending in /" + name);
  }
  return name;
}

// "nvidia<minor>" with minor the canonical decimal of an int32 >= 0.
std::optional<std::int32_t> gpuMinor(std::string_view node) {
  if (!node.starts_with(kGpuNodePrefix)) {
    return std::nullopt;
  }
  const std::string_view digits = node.substr(kGpuNodePrefix.size());
  std::int32_t minor = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), minor);
  if (ec != std::errc() || end != digits.data() + digits.size() || minor < 0 ||
      std::to_string(minor) != digits) {
    return std::nullopt;
  }
  return minor;
}

struct DeviceRead {
  CdiGpu gpu;
  bool hasEnv = false;
};

Result<DeviceRead> readDevice(const json& device, const std::string& field) {
  if (Status keys = onlyKeys(device, {"name", "containerEdits"}, field); !keys) {
    return std::move(keys).error();
  }
  DeviceRead out;
  const json* name = device.contains("name") ? &device["name"] : nullptr;
  if (name == nullptr || !name->is_string() ||
      !isValidDeviceName(name->get_ref<const std::string&>())) {
    return invalid(field + ".name", "not a valid CDI device name");
  }
  out.gpu.name = name->get<std::string>();
  const std::string editsField = field + ".containerEdits";
  if (!device.contains("containerEdits")) {
    return invalid(editsField, "missing");
  }
  const json& edits = device["containerEdits"];
  if (Status keys = onlyKeys(edits, {"deviceNodes", "env"}, editsField); !keys) {
    return std::move(keys).error();
  }
  const json* nodes = edits.contains("deviceNodes") ? &edits["deviceNodes"] : nullptr;
  if (nodes == nullptr || !nodes->is_array() || nodes->size() != 1) {
    return invalid(editsField + ".deviceNodes", "not exactly one device node");
  }
  auto node = readNode((*nodes)[0], editsField + ".deviceNodes[0]");
  if (!node) {
    return std::move(node).error();
  }
  const std::optional<std::int32_t> minor = gpuMinor(*node);
  if (!minor) {
    return invalid(editsField + ".deviceNodes[0].path", "not /dev/nvidia<minor>");
  }
  out.gpu.minor = *minor;
  if (edits.contains("env")) {
    auto env = readEnv(edits["env"], editsField + ".env");
    if (!env) {
      return std::move(env).error();
    }
    out.gpu.uuid = std::move(env->uuids);
    out.gpu.gpuId = std::move(env->gpuIds);
    out.hasEnv = true;
  }
  return out;
}

struct SpecEditsRead {
  std::optional<EnvRead> env;
};

Result<SpecEditsRead> readSpecEdits(const json& edits) {
  const std::string field = "containerEdits";
  if (Status keys = onlyKeys(edits, {"deviceNodes", "env"}, field); !keys) {
    return std::move(keys).error();
  }
  SpecEditsRead out;
  if (edits.contains("deviceNodes")) {
    const json& nodes = edits["deviceNodes"];
    if (!nodes.is_array()) {
      return invalid(field + ".deviceNodes", "not an array");
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::string nodeField = field + ".deviceNodes[" + std::to_string(i) + "]";
      auto node = readNode(nodes[i], nodeField);
      if (!node) {
        return std::move(node).error();
      }
      const bool known = std::find(kControlNodeNames.begin(), kControlNodeNames.end(), *node) !=
                         kControlNodeNames.end();
      if (!known || !seen.insert(*node).second) {
        return invalid(nodeField + ".path", "not a control node listed once");
      }
    }
  }
  if (edits.contains("env")) {
    auto env = readEnv(edits["env"], field + ".env");
    if (!env) {
      return std::move(env).error();
    }
    out.env = std::move(*env);
  }
  return out;
}

std::vector<std::string> splitComma(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The claim form: one comma-joined env for all devices, in device order.
Status applyClaimEnv(std::vector<CdiGpu>& gpus, const EnvRead& env) {
  const std::vector<std::string> uuids = splitComma(env.uuids);
  const std::vector<std::string> gpuIds = splitComma(env.gpuIds);
  if (uuids.size() != gpus.size() || gpuIds.size() != gpus.size()) {
    return invalid("containerEdits.env", "does not list one value per device");
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].uuid = uuids[i];
    gpus[i].gpuId = gpuIds[i];
  }
  return okStatus();
}

Result<std::vector<CdiGpu>> readDevices(const json& devices, std::size_t& withEnv) {
  if (!devices.is_array() || devices.empty()) {
    return invalid("devices", "not a non-empty array");
  }
  std::vector<CdiGpu> gpus;
  std::set<std::string> names;
  std::set<std::int32_t> minors;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string field = "devices[" + std::to_string(i) + "]";
    auto device = readDevice(devices[i], field);
    if (!device) {
      return std::move(device).error();
    }
    if (!names.insert(device->gpu.name).second) {
      return invalid(field + ".name", "repeats device name '" + device->gpu.name + "'");
    }
    if (!minors.insert(device->gpu.minor).second) {
      return invalid(field + ".containerEdits.deviceNodes[0].path", "repeats another device's");
    }
    withEnv += device->hasEnv ? 1 : 0;
    gpus.push_back(std::move(device->gpu));
  }
  return gpus;
}

}  // namespace

bool isValidDeviceName(std::string_view name) {
  if (name.empty() || !isAlnum(name.front()) || !isAlnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), isNameChar);
}

std::string cdiDeviceName(std::string_view raw) {
  if (raw.size() <= kMaxKeptNameLength && isValidDeviceName(raw) && !hasMappedForm(raw)) {
    return std::string(raw);
  }
  std::string base;
  // Enough of the input for kMaxSanitisedLength characters after trimming junk in front.
  for (char c : raw.substr(0, 4 * kMaxSanitisedLength)) {
    base += isNameChar(c) ? c : '-';
  }
  const auto firstAlnum = std::find_if(base.begin(), base.end(), isAlnum);
  base.erase(base.begin(), firstAlnum);
  base.resize(std::min(base.size(), kMaxSanitisedLength));
  while (!base.empty() && !isAlnum(base.back())) {
    base.pop_back();
  }
  const std::string hash = "h" + hex16(fnv1a64(raw));
  return base.empty() ? hash : base + "_" + hash;
}

std::string qualifiedName(std::string_view deviceName) {
  return std::string(api::kCdiKind) + "=" + std::string(deviceName);
}

std::string specFilePrefix() {
  std::string prefix(api::kCdiKind);
  std::replace(prefix.begin(), prefix.end(), '/', '-');
  return prefix;
}

json buildSpec(const std::vector<CdiGpu>& gpus, const SpecOptions& options, bool claimEnv) {
  const std::string root = trimmedRoot(options.devRoot);
  json devices = json::array();
  std::string uuids;
  std::string gpuIds;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const CdiGpu& gpu = gpus[i];
    json edits = {{"deviceNodes", json::array({nodeJson(root, std::string(kGpuNodePrefix) +
                                                                  std::to_string(gpu.minor))})}};
    if (!claimEnv) {
      edits["env"] = envJson(gpu.uuid, gpu.gpuId);
    }
    devices.push_back(json{{"name", gpu.name}, {"containerEdits", std::move(edits)}});
    if (i > 0) {
      uuids += ',';
      gpuIds += ',';
    }
    uuids += gpu.uuid;
    gpuIds += gpu.gpuId;
  }
  json specEdits = json::object();
  json controls = json::array();
  for (std::string_view node : kControlNodeNames) {
    if (std::find(options.controlNodes.begin(), options.controlNodes.end(), node) !=
        options.controlNodes.end()) {
      controls.push_back(nodeJson(root, node));
    }
  }
  if (!controls.empty()) {
    specEdits["deviceNodes"] = std::move(controls);
  }
  if (claimEnv) {
    specEdits["env"] = envJson(uuids, gpuIds);
  }
  json spec = {{"cdiVersion", std::string(kCdiVersion)},
               {"kind", std::string(api::kCdiKind)},
               {"devices", std::move(devices)}};
  if (!specEdits.empty()) {
    spec["containerEdits"] = std::move(specEdits);
  }
  return spec;
}

Result<std::vector<CdiGpu>> parseOurSpec(const json& spec) {
  if (Status keys = onlyKeys(spec, {"cdiVersion", "kind", "devices", "containerEdits"}, "spec");
      !keys) {
    return std::move(keys).error();
  }
  if (!isString(spec, "cdiVersion", kCdiVersion)) {
    return invalid("cdiVersion", "not " + std::string(kCdiVersion));
  }
  if (!isString(spec, "kind", api::kCdiKind)) {
    return invalid("kind", "not " + std::string(api::kCdiKind));
  }
  if (!spec.contains("devices")) {
    return invalid("devices", "missing");
  }
  std::size_t withEnv = 0;
  auto gpus = readDevices(spec["devices"], withEnv);
  if (!gpus) {
    return std::move(gpus).error();
  }
  SpecEditsRead specEdits;
  if (spec.contains("containerEdits")) {
    auto read = readSpecEdits(spec["containerEdits"]);
    if (!read) {
      return std::move(read).error();
    }
    specEdits = std::move(*read);
  }
  if (specEdits.env) {
    if (withEnv != 0) {
      return invalid("containerEdits.env", "set while devices set their own env too");
    }
    if (Status applied = applyClaimEnv(*gpus, *specEdits.env); !applied) {
      return std::move(applied).error();
    }
  } else if (withEnv != 0 && withEnv != gpus->size()) {
    // None at all is a spec whose env comes from elsewhere (the device plugin's Allocate).
    return invalid("devices[].containerEdits.env", "missing on some device (and no spec env)");
  }
  return gpus;
}

}  // namespace kc::cdi
