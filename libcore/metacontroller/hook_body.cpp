#include "libcore/metacontroller/hook_body.hpp"

namespace kc::metacontroller {

namespace {

using nlohmann::json;

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, std::move(message));
}

std::string jsonQuoted(std::string_view s) {
  return json(std::string(s)).dump();
}

}  // namespace

const char* hookVersionName(HookVersion version) {
  return version == HookVersion::kV2 ? "v2" : "v1";
}

Result<json> parseBody(std::string_view body) {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return invalid("request body is not valid JSON");
  }
  if (!doc.is_object()) {
    return invalid("request body must be a JSON object");
  }
  return doc;
}

const json* member(const json& object, std::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

Result<std::string> requiredString(const json& object, std::string_view key,
                                   std::string_view where) {
  const json* v = member(object, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return invalid(std::string(where) + "." + std::string(key) + " must be a non-empty string");
  }
  return v->get<std::string>();
}

std::string optionalString(const json& object, std::string_view key) {
  const json* v = member(object, key);
  return (v != nullptr && v->is_string()) ? v->get<std::string>() : std::string();
}

Result<HookVersion> declaredHookVersion(const json& body, std::string_view hook) {
  const json* controller = member(body, "controller");
  const json* spec = controller ? member(*controller, "spec") : nullptr;
  const json* hooks = spec ? member(*spec, "hooks") : nullptr;
  const json* h = hooks ? member(*hooks, hook) : nullptr;
  const json* version = h ? member(*h, "version") : nullptr;
  if (version == nullptr || version->is_null()) {
    return HookVersion::kV1;  // Metacontroller's default
  }
  if (version->is_string()) {
    if (*version == "v1") {
      return HookVersion::kV1;
    }
    if (*version == "v2") {
      return HookVersion::kV2;
    }
  }
  return invalid("unknown hook version " + version->dump() + " in controller.spec.hooks." +
                 std::string(hook) + ".version (supported: v1, v2)");
}

std::string groupKey(std::string_view kind, std::string_view apiVersion) {
  std::string key(kind);
  key += '.';
  key += apiVersion;
  return key;
}

std::string objectKey(HookVersion version, std::string_view ns, std::string_view name) {
  if (version == HookVersion::kV1 || ns.empty()) {
    return std::string(name);
  }
  return std::string(ns) + "/" + std::string(name);
}

Result<std::vector<const json*>> groupObjects(const json& body, std::string_view field,
                                              std::string_view group) {
  std::vector<const json*> out;
  const std::string where = std::string(field) + "[" + jsonQuoted(group) + "]";
  const json* map = member(body, field);
  if (map == nullptr || map->is_null()) {
    return out;
  }
  if (!map->is_object()) {
    return invalid(std::string(field) + " must be an object keyed by <Kind>.<apiVersion>");
  }
  const json* objects = member(*map, group);
  if (objects == nullptr || objects->is_null()) {
    return out;
  }
  if (!objects->is_object()) {
    return invalid(where + " must be an object");
  }
  for (const auto& [key, value] : objects->items()) {
    if (!value.is_object()) {
      return invalid(where + "[" + jsonQuoted(key) + "] is not an object");
    }
    const json* meta = member(value, "metadata");
    const std::string name = meta ? optionalString(*meta, "name") : std::string();
    const std::string ns = meta ? optionalString(*meta, "namespace") : std::string();
    if (name.empty()) {
      return invalid(where + "[" + jsonQuoted(key) + "] has no metadata.name");
    }
    if (key != name && key != ns + "/" + name) {
      return invalid(where + ": key " + jsonQuoted(key) + " names neither " + jsonQuoted(name) +
                     " nor " + jsonQuoted(ns + "/" + name));
    }
    out.push_back(&value);
  }
  return out;
}

}  // namespace kc::metacontroller
