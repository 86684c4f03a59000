#include "libcore/fabric/config.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "libcore/fabric/credentials.hpp"
#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric {
namespace {

Error invalid(std::string message) {
  return makeError(errc::kInvalid, std::move(message));
}

bool isDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') {
    return false;
  }
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return true;
}

Result<std::string> scalarString(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) {
    return invalid(where + " must be a string");
  }
  return node.as<std::string>();
}

Result<bool> scalarBool(const YAML::Node& node, const std::string& where) {
  if (node.IsScalar()) {
    const auto v = node.as<std::string>();
    if (v == "true") {
      return true;
    }
    if (v == "false") {
      return false;
    }
  }
  return invalid(where + " must be true or false");
}

Result<std::int64_t> scalarInt(const YAML::Node& node, const std::string& where, std::int64_t min,
                               std::int64_t max) {
  if (node.IsScalar()) {
    const auto text = node.as<std::string>();
    std::int64_t v = 0;
    std::size_t used = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == text.size() && used > 0 && v >= min && v <= max) {
      return v;
    }
  }
  return invalid(where + " must be an integer in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "]");
}

// name and dialect, read before the other keys: their messages name the chassis, and some
// keys apply to one dialect only.
Result<ChassisConfig> parseChassisIdentity(const YAML::Node& node, std::size_t index) {
  const std::string where = "chassis[" + std::to_string(index) + "]";
  if (!node.IsMap()) {
    return invalid(where + " must be a mapping");
  }
  ChassisConfig c;
  if (auto n = node["name"]; n) {
    auto v = scalarString(n, where + ".name");
    if (!v) {
      return v.error();
    }
    c.name = *v;
  }
  if (!isDnsLabel(c.name)) {
    return invalid(where + ".name must be a DNS label (lower-case letters, digits, '-')");
  }
  if (auto n = node["dialect"]; n) {
    auto v = scalarString(n, "chassis " + c.name + ": dialect");
    if (!v) {
      return v.error();
    }
    c.dialect = *v;
  }
  if (c.dialect != "h3" && c.dialect != "redfish") {
    return invalid("chassis " + c.name + ": dialect must be h3 or redfish");
  }
  return c;
}

Result<RedfishAuth> parseRedfishAuth(const YAML::Node& value, const std::string& at) {
  auto v = scalarString(value, at);
  if (!v) {
    return v.error();
  }
  if (*v == "session") {
    return RedfishAuth::kSession;
  }
  if (*v == "basic") {
    return RedfishAuth::kBasic;
  }
  if (*v == "none") {
    return RedfishAuth::kNone;
  }
  return invalid(at + " must be session, basic or none");
}

bool isCallPolicyKey(const std::string& key) {
  return key == "readTimeoutMs" || key == "moveTimeoutMs" || key == "initialBackoffMs" ||
         key == "maxBackoffMs" || key == "attempts";
}

// One of the isCallPolicyKey keys: timeouts and backoffs in ms (a backoff may be 0), attempts.
Status parseCallPolicyKey(CallPolicy& policy, const std::string& key, const YAML::Node& value,
                          const std::string& at) {
  if (key == "attempts") {
    auto v = scalarInt(value, at, 1, 100);
    if (!v) {
      return v.error();
    }
    policy.attempts = static_cast<std::uint32_t>(*v);
    return okStatus();
  }
  auto v = scalarInt(value, at, key.find("Backoff") != std::string::npos ? 0 : 1, 3'600'000);
  if (!v) {
    return v.error();
  }
  const Millis ms{*v};
  if (key == "readTimeoutMs") {
    policy.readTimeout = ms;
  } else if (key == "moveTimeoutMs") {
    policy.moveTimeout = ms;
  } else if (key == "initialBackoffMs") {
    policy.initialBackoff = ms;
  } else {
    policy.maxBackoff = ms;
  }
  return okStatus();
}

// One key of a chassis entry other than name and dialect; `where` names the chassis.
Status parseChassisKey(ChassisConfig& c, const std::string& key, const YAML::Node& value,
                       const std::string& where) {
  const std::string at = where + ": " + key;
  if (key == "url") {
    auto v = scalarString(value, at);
    if (!v) {
      return v.error();
    }
    c.url = *v;
  } else if (key == "gpuModel" || key == "gep") {
    if (c.dialect != "h3") {
      return invalid(at + " applies to the h3 dialect only");
    }
    auto v = scalarString(value, at);
    if (!v) {
      return v.error();
    }
    (key == "gep" ? c.gep : c.gpuModel) = *v;
  } else if (key == "auth") {
    if (c.dialect != "redfish") {
      return invalid(at + " applies to the redfish dialect only");
    }
    auto v = parseRedfishAuth(value, at);
    if (!v) {
      return v.error();
    }
    c.auth = *v;
  } else if (key == "credentialsFile" || key == "caFile") {
    auto v = scalarString(value, at);
    if (!v) {
      return v.error();
    }
    (key == "caFile" ? c.caFile : c.credentialsFile) = *v;
  } else if (key == "insecureSkipVerify" || key == "expand") {
    if (key == "expand" && c.dialect != "redfish") {
      return invalid(at + " applies to the redfish dialect only");
    }
    auto v = scalarBool(value, at);
    if (!v) {
      return v.error();
    }
    (key == "expand" ? c.expand : c.insecureSkipVerify) = *v;
  } else if (key == "readParallelism") {
    if (c.dialect != "redfish") {
      return invalid(at + " applies to the redfish dialect only");
    }
    auto v = scalarInt(value, at, 1, 16);
    if (!v) {
      return v.error();
    }
    c.readParallelism = static_cast<std::uint32_t>(*v);
  } else if (key == "style" || key == "fabric") {
    if (c.dialect != "redfish") {
      return invalid(at + " applies to the redfish dialect only");
    }
    auto v = scalarString(value, at);
    if (!v) {
      return v.error();
    }
    if (key == "fabric") {
      c.fabric = *v;
    } else if (*v == "composition" || *v == "fabric") {
      c.style = *v == "fabric" ? RedfishStyle::kFabric : RedfishStyle::kComposition;
    } else {
      return invalid(at + " must be composition or fabric");
    }
  } else if (isCallPolicyKey(key)) {
    return parseCallPolicyKey(c.policy, key, value, at);
  } else {
    return invalid(where + ": unknown key '" + key + "'");
  }
  return okStatus();
}

// Checks across keys, once all are read. `sawAuth`: the entry set auth explicitly.
Status checkChassis(const ChassisConfig& c, const std::string& where, bool sawAuth) {
  const bool https = c.url.rfind("https://", 0) == 0;
  if (c.url.rfind("http://", 0) != 0 && !https) {
    return invalid(where + ": url must start with http:// or https://");
  }
  if (!https && (!c.caFile.empty() || c.insecureSkipVerify)) {
    return invalid(where + ": caFile and insecureSkipVerify apply to an https:// url only");
  }
  if (!c.caFile.empty() && c.insecureSkipVerify) {
    return invalid(where + ": caFile and insecureSkipVerify exclude each other");
  }
  if (c.policy.maxBackoff < c.policy.initialBackoff) {
    return invalid(where + ": maxBackoffMs must not be below initialBackoffMs");
  }
  if (!c.fabric.empty() && c.style != RedfishStyle::kFabric) {
    return invalid(where + ": fabric applies to style fabric only");
  }
  if (c.fabric.size() > 128) {
    return invalid(where + ": fabric must be a Fabric Id of at most 128 characters");
  }
  if (c.dialect == "redfish" && c.auth != RedfishAuth::kNone && c.credentialsFile.empty()) {
    return invalid(where + ": redfish auth " +
                   (sawAuth ? std::string("session/basic") : "session") +
                   " needs credentialsFile (or auth: none)");
  }
  return okStatus();
}

Result<ChassisConfig> parseChassis(const YAML::Node& node, std::size_t index) {
  auto c = parseChassisIdentity(node, index);
  if (!c) {
    return c.error();
  }
  const std::string where = "chassis " + c->name;
  bool sawAuth = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name" || key == "dialect") {
      continue;
    }
    if (auto s = parseChassisKey(*c, key, kv.second, where); !s) {
      return s.error();
    }
    sawAuth = sawAuth || key == "auth";
  }
  if (auto s = checkChassis(*c, where, sawAuth); !s) {
    return s.error();
  }
  return c;
}

}  // namespace

Result<FabricConfig> parseFabricConfig(std::string_view text) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid(std::string("fabric config is not valid YAML: ") + e.what());
  }
  if (!doc.IsMap()) {
    return invalid("fabric config must be a mapping with a 'chassis' list");
  }
  FabricConfig config;
  for (const auto& kv : doc) {
    const std::string key = kv.first.as<std::string>();
    if (key == "pool") {
      auto v = scalarString(kv.second, "pool");
      if (!v) {
        return v.error();
      }
      if (!isDnsLabel(*v)) {
        return invalid("pool must be a DNS label");
      }
      config.pool = *v;
    } else if (key != "chassis") {
      return invalid("fabric config: unknown key '" + key + "'");
    }
  }
  const YAML::Node list = doc["chassis"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    return invalid("fabric config needs a non-empty 'chassis' list");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto c = parseChassis(list[i], i);
    if (!c) {
      return c.error();
    }
    if (!names.insert(c->name).second) {
      return invalid("chassis " + c->name + " is listed twice");
    }
    config.chassis.push_back(std::move(*c));
  }
  return config;
}

Result<FabricConfig> loadFabricConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalid("cannot read fabric config " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  auto config = parseFabricConfig(text.str());
  if (!config) {
    return invalid(path + ": " + config.error().message);
  }
  return config;
}

Result<std::unique_ptr<FabricDriver>> makeDriver(const ChassisConfig& c, Sleeper sleeper) {
  std::optional<Credentials> creds;
  if (!c.credentialsFile.empty()) {
    auto loaded = loadCredentials(c.credentialsFile);
    if (!loaded) {
      return makeError(loaded.error().code, "chassis " + c.name + ": " + loaded.error().message);
    }
    creds = std::move(*loaded);
  }
  net::ClientTlsOptions tls;
  tls.caFile = c.caFile;
  tls.insecureSkipVerify = c.insecureSkipVerify;
  if (!sleeper) {
    sleeper = realSleeper();
  }
  if (c.dialect == "h3") {
    H3Options o;
    o.chassis = c.name;
    o.baseUrl = c.url;
    o.gep = c.gep;
    o.gpuModel = c.gpuModel;
    o.policy = c.policy;
    o.credentials = std::move(creds);
    o.tls = std::move(tls);
    o.sleeper = std::move(sleeper);
    auto d = H3Driver::create(std::move(o));
    if (!d) {
      return d.error();
    }
    return std::unique_ptr<FabricDriver>(std::move(*d));
  }
  if (c.dialect == "redfish") {
    RedfishOptions o;
    o.chassis = c.name;
    o.baseUrl = c.url;
    o.auth = c.auth;
    o.credentials = std::move(creds);
    o.policy = c.policy;
    o.tls = std::move(tls);
    o.sleeper = std::move(sleeper);
    o.readParallelism = c.readParallelism;
    o.expand = c.expand;
    o.style = c.style;
    o.fabric = c.fabric;
    auto d = RedfishDriver::create(std::move(o));
    if (!d) {
      return d.error();
    }
    return std::unique_ptr<FabricDriver>(std::move(*d));
  }
  return invalid("chassis " + c.name + ": dialect must be h3 or redfish");
}

Result<std::unique_ptr<FabricPool>> makePool(const FabricConfig& config, Sleeper sleeper) {
  std::vector<std::unique_ptr<FabricDriver>> drivers;
  for (const auto& c : config.chassis) {
    auto d = makeDriver(c, sleeper);
    if (!d) {
      return d.error();
    }
    drivers.push_back(std::move(*d));
  }
  return FabricPool::create(config.pool, std::move(drivers));
}

}  // namespace kc::fabric
