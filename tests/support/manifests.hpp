#pragma once
// Manifests for tests and benchmarks: a file's text, a YAML file as JSON (kc::yamlToJson, the
// library's one YAML reader), and a CRD installed into an API server and waited for until its
// resource is served. Failures throw std::runtime_error naming the file or the CRD (a test
// that cannot set up its cluster fails there). Link kc_yaml and kc_kube.

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "libcore/base/yaml_json.hpp"
#include "libcore/kube/client.hpp"

namespace kc::testing {

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot open " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// One YAML document.
inline nlohmann::json loadYamlFile(const std::string& path) {
  auto doc = kc::yamlToJson(readFile(path));
  if (!doc) {
    throw std::runtime_error(path + ": " + doc.error().message);
  }
  return std::move(*doc);
}

// Creates `crd` (apiextensions.k8s.io/v1) and waits until a LIST of its first version's
// resource succeeds (the resource is served once the CRD is Established).
inline void installCrd(kube::KubeClient& client, const nlohmann::json& crd,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const std::string name = crd.at("metadata").at("name");
  if (auto r = client.create({"apiextensions.k8s.io", "v1", "customresourcedefinitions", false}, "",
                             crd);
      !r) {
    throw std::runtime_error("create CRD " + name + ": " + r.error().message);
  }
  const auto& spec = crd.at("spec");
  const kube::GroupVersionResource resource{spec.at("group"), spec.at("versions").at(0).at("name"),
                                            spec.at("names").at("plural"),
                                            spec.at("scope") == "Namespaced"};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!client.list(resource, "").ok()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("CRD " + name + " not served within the limit");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace kc::testing
