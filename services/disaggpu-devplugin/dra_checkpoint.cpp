#include "services/disaggpu-devplugin/dra_checkpoint.hpp"

#include "libcore/base/error_codes.hpp"
#include "libcore/base/file_io.hpp"
#include "libcore/base/json_guard.hpp"

namespace kc::devplugin {

namespace {

using nlohmann::json;

constexpr int kVersion = 1;

Error bad(const std::string& what) {
  return makeError(kc::errc::kInvalid, "DRA checkpoint: " + what);
}

template <typename T>
bool read(const json& obj, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return false;
  }
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) {
      return false;
    }
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    if (!it->is_number_integer()) {
      return false;
    }
  } else {
    if (!it->is_array()) {
      return false;
    }
    for (const json& e : *it) {
      if (!e.is_string()) {
        return false;
      }
    }
  }
  out = it->get<T>();
  return true;
}

Result<PreparedDevice> parseDevice(const json& d, const std::string& where) {
  PreparedDevice p;
  if (!d.is_object() || !read(d, "requests", p.requestNames) || !read(d, "pool", p.pool) ||
      !read(d, "device", p.device) || !read(d, "gpuId", p.gpuId) || !read(d, "uuid", p.uuid) ||
      !read(d, "minor", p.minor) || !read(d, "cdiName", p.cdiName) || p.minor < 0) {
    return bad(where + " is not a prepared device");
  }
  return p;
}

}  // namespace

std::string serializeCheckpoint(const PreparedClaims& claims) {
  json list = json::array();
  for (const auto& [uid, c] : claims) {
    json devices = json::array();
    for (const PreparedDevice& d : c.devices) {
      devices.push_back({{"requests", d.requestNames},
                         {"pool", d.pool},
                         {"device", d.device},
                         {"gpuId", d.gpuId},
                         {"uuid", d.uuid},
                         {"minor", d.minor},
                         {"cdiName", d.cdiName}});
    }
    list.push_back({{"uid", uid}, {"namespace", c.ns}, {"name", c.name}, {"devices", devices}});
  }
  return json{{"version", kVersion}, {"claims", list}}.dump() + "\n";
}

Result<PreparedClaims> parseCheckpoint(std::string_view text) {
  auto doc = parseJsonGuarded(text, "DRA checkpoint", kMaxCheckpointBytes);
  if (!doc) {
    return bad(doc.error().message);
  }
  if (!doc->is_object() || doc->value("version", json()) != kVersion) {
    return bad("not a version 1 checkpoint");
  }
  auto claims = doc->find("claims");
  if (claims == doc->end() || !claims->is_array()) {
    return bad("'claims' is not a list");
  }
  PreparedClaims out;
  for (std::size_t i = 0; i < claims->size(); ++i) {
    const json& c = (*claims)[i];
    const std::string where = "claims[" + std::to_string(i) + "]";
    PreparedClaim p;
    if (!c.is_object() || !read(c, "uid", p.uid) || !read(c, "namespace", p.ns) ||
        !read(c, "name", p.name) || p.uid.empty() || !c.contains("devices") ||
        !c["devices"].is_array()) {
      return bad(where + " is not a prepared claim");
    }
    for (std::size_t j = 0; j < c["devices"].size(); ++j) {
      auto d = parseDevice(c["devices"][j], where + ".devices[" + std::to_string(j) + "]");
      if (!d) {
        return std::move(d).error();
      }
      p.devices.push_back(std::move(*d));
    }
    if (!out.emplace(p.uid, p).second) {
      return bad(where + ": claim UID " + p.uid + " twice");
    }
  }
  return out;
}

Result<PreparedClaims> DraCheckpoint::load() const {
  auto text = readFileBounded(path_, kMaxCheckpointBytes);
  if (!text) {
    if (text.error().code == kc::errc::kNotFound) {
      return PreparedClaims{};
    }
    return std::move(text).error();
  }
  return parseCheckpoint(*text);
}

Status DraCheckpoint::save(const PreparedClaims& claims) const {
  return replaceFileAtomically(path_, serializeCheckpoint(claims), 0600);
}

}  // namespace kc::devplugin
