#include "libcore/kube/config.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "libcore/base/base64.hpp"

namespace kc::kube {

namespace {

std::string trimWhitespace(std::string s) {
  auto notSpace = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), notSpace));
  s.erase(std::find_if(s.rbegin(), s.rend(), notSpace).base(), s.end());
  return s;
}

std::string resolveAgainst(const std::string& file, const std::string& dir) {
  if (file.empty() || std::filesystem::path(file).is_absolute()) {
    return file;
  }
  return (std::filesystem::path(dir) / file).lexically_normal().string();
}

std::string scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) {
    return {};
  }
  return v.as<std::string>();
}

// One named entry of clusters/users/contexts with the directory of the file it came from.
struct Named {
  YAML::Node body;
  std::string dir;
};

kc::Result<std::string> pemFrom(const YAML::Node& n, const char* dataKey, const char* fileKey,
                                const std::string& dir, const std::string& what) {
  if (std::string data = scalar(n, dataKey); !data.empty()) {
    // Wrapped or unpadded data is tolerated: hand-edited kubeconfigs carry both.
    auto decoded = kc::base64Decode(data, {.skipLineBreaks = true, .paddingOptional = true});
    if (!decoded) {
      return kc::makeError(kc::errc::kInvalid,
                           what + " " + dataKey + ": " + decoded.error().message);
    }
    return std::move(decoded).value();
  }
  if (std::string file = scalar(n, fileKey); !file.empty()) {
    auto content = readWholeFile(resolveAgainst(file, dir));
    if (!content) {
      return kc::makeError(kc::errc::kInvalid,
                           what + " " + fileKey + ": " + content.error().message);
    }
    return std::move(content).value();
  }
  return std::string{};
}

// Kubeconfig files merged like kubectl: for clusters, users and contexts the first file that
// defines a name wins; the first non-empty current-context wins.
struct MergedKubeconfig {
  std::map<std::string, Named> clusters;
  std::map<std::string, Named> users;
  std::map<std::string, Named> contexts;
  std::string currentContext;
  int loaded = 0;       // files read
  std::string sources;  // their paths, ':'-separated, for messages
};

// The entries of `root[listKey]` (each {name, <bodyKey>: {...}}) not yet in `into`.
kc::Status collectNamed(const YAML::Node& root, const std::string& path, const std::string& dir,
                        const char* listKey, const char* bodyKey,
                        std::map<std::string, Named>& into) {
  const YAML::Node list = root[listKey];
  if (!list || list.IsNull()) {
    return kc::okStatus();
  }
  if (!list.IsSequence()) {
    return kc::makeError(kc::errc::kInvalid,
                         "kubeconfig '" + path + "': '" + listKey + "' is not a list");
  }
  for (const auto& entry : list) {
    std::string name = entry.IsMap() ? scalar(entry, "name") : "";
    if (name.empty()) {
      return kc::makeError(kc::errc::kInvalid,
                           "kubeconfig '" + path + "': an entry of '" + listKey + "' has no name");
    }
    YAML::Node body = entry[bodyKey];
    if (body && !body.IsMap() && !body.IsNull()) {
      return kc::makeError(kc::errc::kInvalid, "kubeconfig '" + path + "': " + listKey + " '" +
                                                   name + "' is malformed");
    }
    into.emplace(name, Named{body ? body : YAML::Node(YAML::NodeType::Map), dir});  // first wins
  }
  return kc::okStatus();
}

// Merges the kubeconfig at `path` into `merged`; a file that cannot be read is skipped.
kc::Status mergeKubeconfigFile(const std::string& path, MergedKubeconfig& merged) {
  auto text = readWholeFile(path);
  if (!text) {
    return kc::okStatus();  // kubectl skips missing entries of an explicit list
  }
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return kc::makeError(kc::errc::kInvalid, "kubeconfig '" + path + "': " + e.what());
  }
  ++merged.loaded;
  merged.sources += (merged.sources.empty() ? "" : ":") + path;
  if (!root || root.IsNull()) {
    return kc::okStatus();  // an empty file is a valid, empty config
  }
  if (!root.IsMap()) {
    return kc::makeError(kc::errc::kInvalid,
                         "kubeconfig '" + path + "': top level is not a mapping");
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  try {
    for (auto [listKey, bodyKey, into] : {std::tuple{"clusters", "cluster", &merged.clusters},
                                          std::tuple{"users", "user", &merged.users},
                                          std::tuple{"contexts", "context", &merged.contexts}}) {
      if (auto st = collectNamed(root, path, dir, listKey, bodyKey, *into); !st) {
        return st;
      }
    }
    if (merged.currentContext.empty()) {
      merged.currentContext = scalar(root, "current-context");
    }
  } catch (const YAML::Exception& e) {
    return kc::makeError(kc::errc::kInvalid, "kubeconfig '" + path + "': " + e.what());
  }
  return kc::okStatus();
}

// Every readable file of `paths` merged; none readable is an error.
kc::Result<MergedKubeconfig> mergeKubeconfigs(const std::vector<std::string>& paths) {
  MergedKubeconfig merged;
  for (const auto& path : paths) {
    if (auto st = mergeKubeconfigFile(path, merged); !st) {
      return st.error();
    }
  }
  if (merged.loaded == 0) {
    std::string list;
    for (const auto& p : paths) {
      list += (list.empty() ? "" : ", ") + p;
    }
    return kc::makeError(kc::errc::kNotFound, "no readable kubeconfig (tried: " +
                                                  (list.empty() ? "nothing" : list) + ")");
  }
  return merged;
}

// The cluster's server (an http(s) URL, trailing slashes dropped) and TLS settings into `cfg`.
// May throw YAML::Exception.
kc::Status applyCluster(const std::string& clusterName, const Named& cluster, ClusterConfig& cfg) {
  const YAML::Node& cl = cluster.body;
  cfg.server = scalar(cl, "server");
  if (cfg.server.empty()) {
    return kc::makeError(kc::errc::kInvalid,
                         "kubeconfig: cluster '" + clusterName + "' has no server");
  }
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0) {
    return kc::makeError(kc::errc::kInvalid, "kubeconfig: cluster '" + clusterName + "' server '" +
                                                 cfg.server + "' is not an http(s) URL");
  }
  while (cfg.server.size() > 8 && cfg.server.back() == '/') {
    cfg.server.pop_back();
  }
  auto ca =
      pemFrom(cl, "certificate-authority-data", "certificate-authority", cluster.dir, "cluster");
  if (!ca) {
    return ca.error();
  }
  cfg.caPem = std::move(ca).value();
  if (const YAML::Node v = cl["insecure-skip-tls-verify"]; v && v.IsScalar()) {
    cfg.insecureSkipTlsVerify = v.as<bool>();
  }
  cfg.tlsServerName = scalar(cl, "tls-server-name");
  return kc::okStatus();
}

// The user's credentials into `cfg`: client certificate and key, token, token file, basic auth.
// exec and auth-provider credentials are refused, not ignored.
kc::Status applyUser(const std::string& userName, const Named& user, ClusterConfig& cfg) {
  const YAML::Node& u = user.body;
  if (u["exec"] || u["auth-provider"]) {
    return kc::makeError(kc::errc::kInvalid,
                         "kubeconfig: user '" + userName +
                             "' uses exec/auth-provider credentials, which this client does not "
                             "run; use a token, tokenFile or client certificate");
  }
  auto cert = pemFrom(u, "client-certificate-data", "client-certificate", user.dir, "user");
  if (!cert) {
    return cert.error();
  }
  auto key = pemFrom(u, "client-key-data", "client-key", user.dir, "user");
  if (!key) {
    return key.error();
  }
  if (cert->empty() != key->empty()) {
    return kc::makeError(
        kc::errc::kInvalid,
        "kubeconfig: user '" + userName + "' has a client certificate without key or vice versa");
  }
  cfg.clientCertPem = std::move(cert).value();
  cfg.clientKeyPem = std::move(key).value();
  cfg.token = scalar(u, "token");
  cfg.tokenFile = resolveAgainst(scalar(u, "tokenFile"), user.dir);
  cfg.username = scalar(u, "username");
  cfg.password = scalar(u, "password");
  return kc::okStatus();
}

// The config of context `ctxName` (body `ctx`): its cluster, its user if it names one, its
// namespace. May throw YAML::Exception.
kc::Result<ClusterConfig> configForContext(const MergedKubeconfig& merged,
                                           const std::string& ctxName, const YAML::Node& ctx) {
  const std::string clusterName = scalar(ctx, "cluster");
  const std::string userName = scalar(ctx, "user");
  auto clIt = merged.clusters.find(clusterName);
  if (clIt == merged.clusters.end()) {
    return kc::makeError(kc::errc::kInvalid, "kubeconfig: context '" + ctxName +
                                                 "' names unknown cluster '" + clusterName + "'");
  }
  ClusterConfig cfg;
  cfg.source = merged.sources;
  if (auto st = applyCluster(clusterName, clIt->second, cfg); !st) {
    return st.error();
  }
  if (!userName.empty()) {
    auto uIt = merged.users.find(userName);
    if (uIt == merged.users.end()) {
      return kc::makeError(kc::errc::kInvalid, "kubeconfig: context '" + ctxName +
                                                   "' names unknown user '" + userName + "'");
    }
    if (auto st = applyUser(userName, uIt->second, cfg); !st) {
      return st.error();
    }
  }
  if (std::string ns = scalar(ctx, "namespace"); !ns.empty()) {
    cfg.defaultNamespace = ns;
  }
  return cfg;
}

}  // namespace

EnvLookup processEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): read-only use
    if (v == nullptr) {
      return std::nullopt;
    }
    return std::string(v);
  };
}

kc::Result<std::string> readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return kc::makeError(kc::errc::kNotFound, "cannot read '" + path + "'");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return kc::makeError(kc::errc::kUnavailable, "error reading '" + path + "'");
  }
  return ss.str();
}

std::vector<std::string> kubeconfigPaths(const EnvLookup& env) {
  std::vector<std::string> paths;
  if (auto list = env("KUBECONFIG"); list && !list->empty()) {
    std::stringstream ss(*list);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty()) {
        paths.push_back(item);
      }
    }
    if (!paths.empty()) {
      return paths;
    }
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    paths.push_back(*home + "/.kube/config");
  }
  return paths;
}

kc::Result<ClusterConfig> loadKubeconfig(const std::vector<std::string>& paths,
                                         const std::string& contextOverride) {
  auto merged = mergeKubeconfigs(paths);
  if (!merged) {
    return merged.error();
  }
  const std::string ctxName = contextOverride.empty() ? merged->currentContext : contextOverride;
  if (ctxName.empty()) {
    return kc::makeError(kc::errc::kInvalid, "kubeconfig " + merged->sources +
                                                 ": no current-context and none requested");
  }
  auto ctxIt = merged->contexts.find(ctxName);
  if (ctxIt == merged->contexts.end()) {
    return kc::makeError(kc::errc::kInvalid,
                         "kubeconfig " + merged->sources + ": context '" + ctxName + "' not found");
  }
  try {
    return configForContext(*merged, ctxName, ctxIt->second.body);
  } catch (const YAML::Exception& e) {
    return kc::makeError(kc::errc::kInvalid, std::string("kubeconfig: ") + e.what());
  }
}

kc::Result<ClusterConfig> loadInCluster(const EnvLookup& env, const std::string& saDir) {
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return kc::makeError(kc::errc::kNotFound,
                         "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                         "KUBERNETES_SERVICE_PORT must be set");
  }
  ClusterConfig cfg;
  cfg.source = "in-cluster";
  const bool ipv6 = host->find(':') != std::string::npos;
  cfg.server = "https://" + (ipv6 ? "[" + *host + "]" : *host) + ":" + *port;
  cfg.tokenFile = saDir + "/token";
  auto token = readWholeFile(cfg.tokenFile);
  if (!token || trimWhitespace(*token).empty()) {
    return kc::makeError(kc::errc::kUnavailable,
                         "in-cluster: cannot read service account token '" + cfg.tokenFile + "'");
  }
  cfg.token = trimWhitespace(std::move(token).value());
  if (auto ca = readWholeFile(saDir + "/ca.crt")) {
    cfg.caPem = std::move(ca).value();
  }
  if (auto ns = env("POD_NAMESPACE"); ns && !ns->empty()) {
    cfg.defaultNamespace = *ns;
  } else if (auto nsFile = readWholeFile(saDir + "/namespace");
             nsFile && !trimWhitespace(*nsFile).empty()) {
    cfg.defaultNamespace = trimWhitespace(std::move(nsFile).value());
  }
  return cfg;
}

kc::Result<ClusterConfig> loadDefaultConfig(const EnvLookup& env) {
  if (auto host = env("KUBERNETES_SERVICE_HOST"); host && !host->empty()) {
    return loadInCluster(env);
  }
  return loadKubeconfig(kubeconfigPaths(env));
}

TokenSource::TokenSource(std::string staticToken, std::string tokenFile, kc::Clock* clock,
                         std::chrono::steady_clock::duration period)
    : file_(std::move(tokenFile)),
      clock_(kc::clockOr(clock)),
      period_(period),
      token_(std::move(staticToken)) {}

std::string TokenSource::token() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_.empty()) {
    return token_;
  }
  const auto now = clock_.now();
  if (!lastRead_ || now - *lastRead_ >= period_) {
    lastRead_ = now;
    if (auto content = readWholeFile(file_)) {
      std::string fresh = trimWhitespace(std::move(content).value());
      if (!fresh.empty()) {
        token_ = std::move(fresh);
      }
    }
  }
  return token_;
}

void TokenSource::invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  lastRead_.reset();
}

}  // namespace kc::kube
