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
    std::string_view seg(path.data() + start,
                         (dot == std::string::npos ? path.size() : dot) - start);
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
      node->children.emplace_back(std::string(seg),
                                  FieldTree::Child{array, std::make_unique<FieldTree>()});
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
  for (const char* always :
       {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"}) {
    (void)addPath(*tree, always);
  }
  for (const auto& p : paths) {
    if (auto st = addPath(*tree, p); !st) {
      return st.error();
    }
  }
  return ObjectTransform([tree](nlohmann::json&& obj) { return project(std::move(obj), *tree); });
}

kc::Result<ObjectTransform> keepFieldsPacked(const std::vector<std::string>& paths) {
  auto keep = keepFields(paths);
  if (!keep) {
    return keep;
  }
  return ObjectTransform([keep = std::move(*keep)](nlohmann::json&& obj) {
    nlohmann::json kept = keep(std::move(obj));
    nlohmann::json out = nlohmann::json::object();
    auto meta = kept.find("metadata");
    if (meta == kept.end() || !meta->is_object()) {
      return out;  // no name: the informer drops it
    }
    nlohmann::json identity = nlohmann::json::object();
    for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
      if (auto it = meta->find(key); it != meta->end()) {
        identity[key] = std::move(*it);
        meta->erase(key);
      }
    }
    if (meta->empty()) {
      kept.erase("metadata");
    }
    out["metadata"] = std::move(identity);
    if (!kept.empty()) {
      out[kPackedFieldsKey] = nlohmann::json::binary(nlohmann::json::to_msgpack(kept));
    }
    return out;
  });
}

kc::Result<nlohmann::json> unpackFields(const nlohmann::json& obj) {
  auto packed = obj.find(kPackedFieldsKey);
  if (packed == obj.end()) {
    return obj;
  }
  if (!packed->is_binary()) {
    return kc::makeError(kc::errc::kInvalid, std::string(kPackedFieldsKey) + " is not binary");
  }
  nlohmann::json out = nlohmann::json::from_msgpack(packed->get_binary(), true, false);
  if (!out.is_object()) {
    return kc::makeError(kc::errc::kInvalid,
                         std::string(kPackedFieldsKey) + " is not a MessagePack object");
  }
  if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) {
    for (const auto& [k, v] : meta->items()) {
      out["metadata"][k] = v;
    }
  }
  return out;
}

const std::vector<std::string>& schedulerPodFields() {
  // What kubecomp-sched reads: placement constraints, requests (the API server fills missing
  // requests from limits, so limits are not needed), binding state and its own annotations are
  // read from the annotation keys below; status conditions, owner references and type fields
  // (constant within one informer) are left out.
  static const std::vector<std::string> fields = {
      "metadata.labels",
      "metadata.annotations",
      "metadata.deletionTimestamp",
      "spec.nodeName",
      "spec.schedulerName",
      "spec.priority",
      "spec.nodeSelector",
      "spec.affinity",
      "spec.tolerations",
      "spec.overhead",
      "spec.containers[].resources.requests",
      "spec.initContainers[].resources.requests",
      "spec.initContainers[].restartPolicy",
      "status.phase",
      "status.nominatedNodeName",
  };
  return fields;
}

}  // namespace kc::kube
