#include "services/reconfig-mgr/pool_spec.hpp"

#include <set>

#include "libcore/api/names.hpp"
#include "libcore/base/base64.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::reconfig {
namespace {

using nlohmann::json;

Result<std::string> str(const json& obj, const char* key, const std::string& where, bool required,
                        std::string fallback = {}) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) {
      return makeError(errc::kInvalid, where + "." + key + " is required");
    }
    return fallback;
  }
  if (!it->is_string()) {
    return makeError(errc::kInvalid, where + "." + key + " is not a string");
  }
  return it->get<std::string>();
}

}  // namespace

std::optional<std::string> PoolSpec::hostOf(std::string_view node, std::string_view chassis) const {
  for (const NodeSpec& n : nodes) {
    if (n.name != node) {
      continue;
    }
    const auto it = n.chassisHostPorts.find(std::string(chassis));
    return it != n.chassisHostPorts.end() ? it->second : n.hostPort;
  }
  return std::nullopt;
}

std::optional<std::string> PoolSpec::poolHostOf(std::string_view node,
                                                std::string_view gpuId) const {
  const auto parts = fabric::splitGpuId(gpuId);
  if (!parts) {
    return std::nullopt;
  }
  auto host = hostOf(node, parts->chassis);
  if (!host) {
    return std::nullopt;
  }
  return parts->chassis + "/" + *host;
}

std::string PoolSpec::nodeAt(std::string_view poolHost) const {
  const auto slash = poolHost.find('/');
  if (slash == std::string_view::npos) {
    return {};
  }
  const std::string_view chassis = poolHost.substr(0, slash);
  const std::string_view host = poolHost.substr(slash + 1);
  for (const NodeSpec& n : nodes) {
    const auto h = hostOf(n.name, chassis);
    if (h && *h == host) {
      return n.name;
    }
  }
  return {};
}

bool PoolSpec::hasNode(std::string_view node) const {
  for (const NodeSpec& n : nodes) {
    if (n.name == node) {
      return true;
    }
  }
  return false;
}

namespace {

// A chassis entry's fields as written (defaults filled in), not yet checked.
Result<ChassisSpec> readChassisFields(const json& c, const std::string& at) {
  ChassisSpec cs;
  auto n = str(c, "name", at, true);
  auto d = str(c, "driver", at, true);
  auto e = str(c, "endpoint", at, true);
  auto m = str(c, "gpuModel", at, false);
  auto gep = str(c, "gep", at, false, "0");
  auto auth = str(c, "auth", at, false, "session");
  auto style = str(c, "style", at, false, "composition");
  auto fabric = str(c, "fabric", at, false);
  for (const auto* r : {&n, &d, &e, &m, &gep, &auth, &style, &fabric}) {
    if (!*r) {
      return r->error();
    }
  }
  cs.name = *n;
  cs.driver = *d;
  cs.endpoint = *e;
  cs.gpuModel = *m;
  cs.gep = *gep;
  cs.auth = *auth;
  cs.style = *style;
  cs.fabric = *fabric;
  return cs;
}

// Name, driver and auth of a chassis; `names` (the chassis seen so far) gains its name.
Status checkChassis(const ChassisSpec& cs, const std::string& at, std::set<std::string>& names) {
  if (!fabric::isValidChassisName(cs.name)) {
    return makeError(errc::kInvalid, at + ".name '" + cs.name + "' is not a DNS label");
  }
  if (!names.insert(cs.name).second) {
    return makeError(errc::kInvalid, at + ".name '" + cs.name + "' is repeated");
  }
  if (cs.driver != "h3" && cs.driver != "redfish") {
    return makeError(errc::kInvalid, at + ".driver '" + cs.driver + "' is not h3 or redfish");
  }
  if (cs.auth != "session" && cs.auth != "basic" && cs.auth != "none") {
    return makeError(errc::kInvalid, at + ".auth '" + cs.auth + "' is not session, basic or none");
  }
  if (cs.style != "composition" && cs.style != "fabric") {
    return makeError(errc::kInvalid, at + ".style '" + cs.style + "' is not composition or fabric");
  }
  if (cs.style == "fabric" && cs.driver != "redfish") {
    return makeError(errc::kInvalid, at + ".style fabric applies to the redfish driver only");
  }
  if (!cs.fabric.empty() && cs.style != "fabric") {
    return makeError(errc::kInvalid, at + ".fabric applies to style fabric only");
  }
  if (cs.fabric.size() > 128) {
    return makeError(errc::kInvalid, at + ".fabric is longer than 128 characters");
  }
  return okStatus();
}

// The optional credentialsSecret {name, namespace} of a chassis into `cs`.
Status readCredentialsSecret(const json& c, const std::string& at,
                             std::string_view defaultSecretNamespace, ChassisSpec& cs) {
  const auto s = c.find("credentialsSecret");
  if (s == c.end() || s->is_null()) {
    return okStatus();
  }
  if (!s->is_object()) {
    return makeError(errc::kInvalid, at + ".credentialsSecret is not an object");
  }
  auto sn = str(*s, "name", at + ".credentialsSecret", true);
  auto sns =
      str(*s, "namespace", at + ".credentialsSecret", false, std::string(defaultSecretNamespace));
  if (!sn) {
    return sn.error();
  }
  if (!sns) {
    return sns.error();
  }
  cs.secretName = *sn;
  cs.secretNamespace = *sns;
  return okStatus();
}

// One of tls.caSecret / tls.caConfigMap: {name, namespace?, key?}.
Result<CaBundleRef> readCaRef(const json& ref, const std::string& at, const std::string& kind,
                              std::string_view defaultNamespace) {
  if (!ref.is_object()) {
    return makeError(errc::kInvalid, at + " is not an object");
  }
  auto n = str(ref, "name", at, true);
  auto ns = str(ref, "namespace", at, false, std::string(defaultNamespace));
  auto key = str(ref, "key", at, false, "ca.crt");
  for (const auto* r : {&n, &ns, &key}) {
    if (!*r) {
      return r->error();
    }
  }
  if (n->empty() || key->empty()) {
    return makeError(errc::kInvalid, at + ": name and key must not be empty");
  }
  return CaBundleRef{kind, *ns, *n, *key};
}

// The optional tls {caSecret | caConfigMap, insecureSkipVerify} of a chassis into `cs`.
Status readChassisTls(const json& c, const std::string& at, std::string_view defaultNamespace,
                      ChassisSpec& cs) {
  const auto t = c.find("tls");
  if (t == c.end() || t->is_null()) {
    return okStatus();
  }
  if (!t->is_object()) {
    return makeError(errc::kInvalid, at + ".tls is not an object");
  }
  for (const auto& [key, value] : t->items()) {
    const std::string where = at + ".tls." + key;
    if (key == "insecureSkipVerify") {
      if (!value.is_boolean()) {
        return makeError(errc::kInvalid, where + " is not a boolean");
      }
      cs.insecureSkipVerify = value.get<bool>();
    } else if (key == "caSecret" || key == "caConfigMap") {
      if (cs.caBundle) {
        return makeError(errc::kInvalid, at + ".tls: give caSecret or caConfigMap, not both");
      }
      auto ref =
          readCaRef(value, where, key == "caSecret" ? "Secret" : "ConfigMap", defaultNamespace);
      if (!ref) {
        return ref.error();
      }
      cs.caBundle = std::move(*ref);
    } else {
      return makeError(errc::kInvalid, at + ".tls: unknown key '" + key + "'");
    }
  }
  if (cs.caBundle && cs.insecureSkipVerify) {
    return makeError(errc::kInvalid,
                     at + ".tls: a CA bundle and insecureSkipVerify exclude each other");
  }
  if ((cs.caBundle || cs.insecureSkipVerify) && cs.endpoint.rfind("https://", 0) != 0) {
    return makeError(errc::kInvalid, at + ".tls applies to an https:// endpoint only");
  }
  return okStatus();
}

// spec.chassis: a non-empty array of chassis with distinct names.
Result<std::vector<ChassisSpec>> parseChassisList(const json& spec, const std::string& where,
                                                  std::string_view defaultSecretNamespace) {
  const auto chassis = spec.find("chassis");
  if (chassis == spec.end() || !chassis->is_array() || chassis->empty()) {
    return makeError(errc::kInvalid, where + ".chassis must be a non-empty array");
  }
  std::vector<ChassisSpec> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < chassis->size(); ++i) {
    const json& c = (*chassis)[i];
    const std::string at = where + ".chassis[" + std::to_string(i) + "]";
    if (!c.is_object()) {
      return makeError(errc::kInvalid, at + " is not an object");
    }
    auto cs = readChassisFields(c, at);
    if (!cs) {
      return cs.error();
    }
    if (auto s = checkChassis(*cs, at, names); !s) {
      return s.error();
    }
    if (auto s = readCredentialsSecret(c, at, defaultSecretNamespace, *cs); !s) {
      return s.error();
    }
    if (auto s = readChassisTls(c, at, defaultSecretNamespace, *cs); !s) {
      return s.error();
    }
    out.push_back(std::move(*cs));
  }
  return out;
}

// A node's chassisHostPorts (per-chassis host ports overriding hostPort) into `ns`; every key
// must name a chassis of the pool.
Status readChassisHostPorts(const json& n, const std::string& at,
                            const std::set<std::string>& chassisNames, NodeSpec& ns) {
  const auto m = n.find("chassisHostPorts");
  if (m == n.end() || m->is_null()) {
    return okStatus();
  }
  if (!m->is_object()) {
    return makeError(errc::kInvalid, at + ".chassisHostPorts is not an object");
  }
  for (const auto& [k, v] : m->items()) {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return makeError(errc::kInvalid,
                       at + ".chassisHostPorts." + k + " is not a non-empty string");
    }
    if (chassisNames.count(k) == 0) {
      return makeError(errc::kInvalid, at + ".chassisHostPorts names unknown chassis '" + k + "'");
    }
    ns.chassisHostPorts[k] = v.get<std::string>();
  }
  return okStatus();
}

// One spec.nodes entry; `nodeNames` (the nodes seen so far) gains its name.
Result<NodeSpec> parseNode(const json& n, const std::string& at,
                           const std::set<std::string>& chassisNames,
                           std::set<std::string>& nodeNames) {
  if (!n.is_object()) {
    return makeError(errc::kInvalid, at + " is not an object");
  }
  NodeSpec ns;
  auto nn = str(n, "name", at, true);
  auto hp = str(n, "hostPort", at, true);
  if (!nn) {
    return nn.error();
  }
  if (!hp) {
    return hp.error();
  }
  ns.name = *nn;
  ns.hostPort = *hp;
  if (ns.name.empty() || ns.hostPort.empty()) {
    return makeError(errc::kInvalid, at + ": name and hostPort must not be empty");
  }
  if (!nodeNames.insert(ns.name).second) {
    return makeError(errc::kInvalid, at + ".name '" + ns.name + "' is repeated");
  }
  if (auto s = readChassisHostPorts(n, at, chassisNames, ns); !s) {
    return s.error();
  }
  return ns;
}

// spec.nodes: a non-empty array of nodes with distinct names.
Result<std::vector<NodeSpec>> parseNodeList(const json& spec, const std::string& where,
                                            const std::vector<ChassisSpec>& chassis) {
  const auto nodes = spec.find("nodes");
  if (nodes == spec.end() || !nodes->is_array() || nodes->empty()) {
    return makeError(errc::kInvalid, where + ".nodes must be a non-empty array");
  }
  std::set<std::string> chassisNames;
  for (const ChassisSpec& c : chassis) {
    chassisNames.insert(c.name);
  }
  std::vector<NodeSpec> out;
  std::set<std::string> nodeNames;
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    auto ns = parseNode((*nodes)[i], where + ".nodes[" + std::to_string(i) + "]", chassisNames,
                        nodeNames);
    if (!ns) {
      return ns.error();
    }
    out.push_back(std::move(*ns));
  }
  return out;
}

// Two nodes on one host port of one chassis would make a GPU's node ambiguous.
Status checkHostsDistinct(const PoolSpec& pool, const std::string& where) {
  std::map<std::string, std::string> hostOwner;  // "<chassis>/<host>" -> node
  for (const ChassisSpec& c : pool.chassis) {
    for (const NodeSpec& n : pool.nodes) {
      const std::string key = c.name + "/" + *pool.hostOf(n.name, c.name);
      auto [it, fresh] = hostOwner.emplace(key, n.name);
      if (!fresh) {
        return makeError(errc::kInvalid,
                         where + ".nodes: " + it->second + " and " + n.name + " share host " + key);
      }
    }
  }
  return okStatus();
}

// spec.allocationPath, when set, into `pool`.
Status readAllocationPath(const json& spec, const std::string& where, PoolSpec& pool) {
  const auto p = spec.find("allocationPath");
  if (p == spec.end() || p->is_null()) {
    return okStatus();
  }
  if (!p->is_string() || (*p != api::kPathDevicePlugin && *p != api::kPathDra)) {
    return makeError(errc::kInvalid, where + ".allocationPath must be " +
                                         std::string(api::kPathDevicePlugin) + " or " +
                                         std::string(api::kPathDra));
  }
  pool.dra = *p == api::kPathDra;
  return okStatus();
}

// spec.pollIntervalSeconds, when set, into `pool`.
Status readPollInterval(const json& spec, const std::string& where, PoolSpec& pool) {
  const auto p = spec.find("pollIntervalSeconds");
  if (p == spec.end() || p->is_null()) {
    return okStatus();
  }
  if (!p->is_number_integer() || p->get<std::int64_t>() < 1 || p->get<std::int64_t>() > 3600) {
    return makeError(errc::kInvalid, where + ".pollIntervalSeconds must be an integer in 1..3600");
  }
  pool.pollIntervalSeconds = static_cast<std::uint32_t>(p->get<std::int64_t>());
  return okStatus();
}

}  // namespace

Result<net::ClientTlsOptions> chassisTls(const ChassisSpec& chassis, const CoreObjectReader& read) {
  net::ClientTlsOptions tls;
  tls.insecureSkipVerify = chassis.insecureSkipVerify;
  if (!chassis.caBundle) {
    return tls;
  }
  const CaBundleRef& ref = *chassis.caBundle;
  const std::string what = "chassis " + chassis.name + ": CA bundle " + ref.kind + " " +
                           ref.namespaceName + "/" + ref.name;
  const bool secret = ref.kind == "Secret";
  auto obj = read(secret ? "secrets" : "configmaps", ref.namespaceName, ref.name);
  if (!obj) {
    return makeError(errc::kUnavailable, what + ": " + obj.error().message);
  }
  const json data = obj->value("data", json::object());
  const auto it = data.find(ref.key);
  if (!data.is_object() || it == data.end() || !it->is_string()) {
    return makeError(errc::kInvalid, what + " has no key " + ref.key);
  }
  std::string pem = it->get<std::string>();
  if (secret) {
    auto decoded = base64Decode(pem);
    if (!decoded) {
      return makeError(errc::kInvalid, what + ": key " + ref.key + " is not base64");
    }
    pem = std::move(*decoded);
  }
  if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return makeError(errc::kInvalid, what + ": key " + ref.key +
                                         " holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  tls.caPem = std::move(pem);
  return tls;
}

Result<PoolSpec> parsePoolSpec(const json& pool, std::string_view defaultSecretNamespace) {
  if (!pool.is_object() || !pool.contains("metadata") || !pool["metadata"].is_object()) {
    return makeError(errc::kInvalid, "GPUPool: no metadata");
  }
  PoolSpec out;
  auto name = str(pool["metadata"], "name", "metadata", true);
  if (!name) {
    return name.error();
  }
  out.name = *name;
  const std::string where = "GPUPool " + out.name + ": spec";
  if (const auto g = pool["metadata"].find("generation");
      g != pool["metadata"].end() && g->is_number_integer()) {
    out.generation = g->get<std::int64_t>();
  }
  const auto spec = pool.find("spec");
  if (spec == pool.end() || !spec->is_object()) {
    return makeError(errc::kInvalid, where + " is missing");
  }
  auto chassis = parseChassisList(*spec, where, defaultSecretNamespace);
  if (!chassis) {
    return chassis.error();
  }
  out.chassis = std::move(*chassis);
  auto nodes = parseNodeList(*spec, where, out.chassis);
  if (!nodes) {
    return nodes.error();
  }
  out.nodes = std::move(*nodes);
  if (auto s = checkHostsDistinct(out, where); !s) {
    return s.error();
  }
  if (auto s = readAllocationPath(*spec, where, out); !s) {
    return s.error();
  }
  if (auto s = readPollInterval(*spec, where, out); !s) {
    return s.error();
  }
  return out;
}

}  // namespace kc::reconfig
