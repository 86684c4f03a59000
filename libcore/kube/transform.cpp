#include "libcore/kube/transform.hpp"

#include <memory>
#include <string_view>

namespace kc::kube {
namespace {

// A tree of kept paths. `whole`: keep the subtree as it is.
struct FieldTree {
  struct Child {
    bool array = false;  // the segment was "name[]"
    std::unique_ptr<FieldTree> tree;
  };
  bool whole = false;
  std::vector<std::pair<std::string, Child>> children;  // few keys: a vector beats a map

  Child* find(std::string_view key) {
    for (auto& [k, c] : children) {
      if (k == key) {
        return &c;
      }
    }
    return nullptr;
  }
};

kc::Status addPath(FieldTree& root, const std::string& path) {
  if (path.empty()) {
    return kc::makeError(kc::errc::kInvalid, "keepFields: empty path");
  }
  FieldTree* node = &root;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = path.find('.', start);
    std::string_view seg(path.data() + start, (dot == std::string::npos ? path.size() : dot) - start);
    bool array = false;
    if (seg.size() >= 2 && seg.substr(seg.size() - 2) == "[]") {
      array = true;
      seg.remove_suffix(2);
    }
    if (seg.empty()) {
      return kc::makeError(kc::errc::kInvalid, "keepFields: empty segment in \"" + path + "\"");
    }
    FieldTree::Child* child = node->find(seg);
    if (child == nullptr) {
      node->children.emplace_back(std::string(seg), FieldTree::Child{array, std::make_unique<FieldTree>()});
      child = &node->children.back().second;
    }
    child->array = child->array || array;
    if (dot == std::string::npos) {
      child->tree->whole = true;  // the whole subtree: narrower paths under it no longer matter
      child->tree->children.clear();
      return kc::okStatus();
    }
    if (child->tree->whole) {
      return kc::okStatus();  // already kept whole
    }
    node = child->tree.get();
    start = dot + 1;
  }
}

nlohmann::json project(nlohmann::json&& in, const FieldTree& tree);

nlohmann::json projectChild(nlohmann::json&& value, const FieldTree::Child& child) {
  if (child.tree->whole) {
    return std::move(value);
  }
  if (child.array) {
    if (!value.is_array()) {
      return nlohmann::json();  // not the expected shape: keep nothing rather than guess
    }
    nlohmann::json out = nlohmann::json::array();
    for (auto& el : value) {
      out.push_back(project(std::move(el), *child.tree));
    }
    return out;
  }
  return project(std::move(value), *child.tree);
}

// Keeps the fields of `in` that the tree names; a field whose projection is empty (not an
// object where one was expected) is left out.
nlohmann::json project(nlohmann::json&& in, const FieldTree& tree) {
  if (!in.is_object()) {
    return nlohmann::json();
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, child] : tree.children) {
    auto it = in.find(key);
    if (it == in.end()) {
      continue;
    }
    nlohmann::json projected = projectChild(std::move(*it), child);
    if (!projected.is_null()) {
      out.emplace(key, std::move(projected));
    }
  }
  return out;
}

}  // namespace

kc::Result<ObjectTransform> keepFields(const std::vector<std::string>& paths) {
  auto tree = std::make_shared<FieldTree>();
  for (const char* always : {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"}) {
    (void)addPath(*tree, always);
  }
  for (const auto& p : paths) {
    if (auto st = addPath(*tree, p); !st) {
      return st.error();
    }
  }
  return ObjectTransform([tree](nlohmann::json&& obj) { return project(std::move(obj), *tree); });
}

const std::vector<std::string>& schedulerPodFields() {
  static const std::vector<std::string> fields = {
      "apiVersion",
      "kind",
      "metadata.labels",
      "metadata.ownerReferences",
      "metadata.deletionTimestamp",
      "spec.nodeName",
      "spec.schedulerName",
      "spec.priority",
      "spec.priorityClassName",
      "spec.nodeSelector",
      "spec.affinity",
      "spec.tolerations",
      "spec.overhead",
      "spec.containers[].name",
      "spec.containers[].resources",
      "spec.initContainers[].name",
      "spec.initContainers[].resources",
      "status.phase",
      "status.conditions",
      "status.nominatedNodeName",
  };
  return fields;
}

}  // namespace kc::kube
