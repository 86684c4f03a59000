#include "libcore/fabric/h3_codec.hpp"

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "libcore/base/json_guard.hpp"

namespace kc::fabric::h3 {
namespace {

using nlohmann::json;

Error protocolError(std::string message) {
  return makeError(kc::errc::kProtocol, std::move(message));
}

// A string field of a row; nullopt when absent, error when present with another type.
Result<std::optional<std::string>> stringField(const json& row, const char* key,
                                               std::size_t index) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) {
    return std::optional<std::string>{};
  }
  if (!it->is_string()) {
    return protocolError("H3 resources row " + std::to_string(index) + ": field \"" + key +
                         "\" is " + it->type_name() + ", expected a string");
  }
  return std::optional<std::string>{it->get<std::string>()};
}

}  // namespace

bool isValidDevGid(std::string_view gid) {
  if (gid.empty() || gid.size() > 16) {
    return false;
  }
  for (char c : gid) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

Result<std::uint32_t> parseHostPort(std::string_view text) {
  if (text.empty() || text.size() > 3) {
    return protocolError("host port \"" + excerpt(text, 16) + "\" is not a decimal port 0.." +
                         std::to_string(kMaxHostPort));
  }
  std::uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return protocolError("host port \"" + excerpt(text, 16) + "\" is not a decimal number");
    }
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > kMaxHostPort) {
    return protocolError("host port " + std::to_string(value) + " is above " +
                         std::to_string(kMaxHostPort));
  }
  return value;
}

Result<std::string> portGid(std::uint32_t hostPort) {
  if (hostPort > kMaxHostPort) {
    return makeError(kc::errc::kInvalid, "host port " + std::to_string(hostPort) + " is above " +
                                             std::to_string(kMaxHostPort));
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02Xh", static_cast<unsigned>(hostPort));
  return std::string(buf);
}

Result<std::uint32_t> parsePortGid(std::string_view gid) {
  if (gid.size() < 2 || gid.size() > 3 || (gid.back() != 'h' && gid.back() != 'H')) {
    return protocolError("port_gid \"" + excerpt(gid, 16) + "\" is not hex digits followed by 'h'");
  }
  std::uint32_t value = 0;
  for (char c : gid.substr(0, gid.size() - 1)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return protocolError("port_gid \"" + excerpt(gid, 16) +
                           "\" is not hex digits followed by 'h'");
    }
    value = value * 16 + static_cast<std::uint32_t>(
                             std::isdigit(static_cast<unsigned char>(c))
                                 ? c - '0'
                                 : std::toupper(static_cast<unsigned char>(c)) - 'A' + 10);
  }
  return value;
}

Result<Resources> parseResources(std::string_view body) {
  auto doc = parseJsonGuarded(body, "H3 resources reply");
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_array()) {
    return protocolError(std::string("H3 resources reply is a JSON ") + doc->type_name() +
                         ", expected an array of rows");
  }
  Resources out;
  std::set<std::string> seen;
  std::size_t index = 0;
  for (const auto& row : *doc) {
    if (!row.is_object()) {
      return protocolError("H3 resources row " + std::to_string(index) + " is a " +
                           row.type_name() + ", expected an object");
    }
    auto devType = stringField(row, "dev_type", index);
    auto portNo = stringField(row, "Port#", index);
    auto portGidText = stringField(row, "Port_GID", index);
    if (!devType) {
      return devType.error();
    }
    if (!portNo) {
      return portNo.error();
    }
    if (!portGidText) {
      return portGidText.error();
    }
    if (devType->has_value() && **devType == "GPU") {
      auto gid = stringField(row, "Dev_GID", index);
      auto host = stringField(row, "Host_Port#", index);
      auto guid = stringField(row, "OB_GPU_GUID", index);
      for (auto* f : {&gid, &host, &guid}) {
        if (!*f) {
          return f->error();
        }
      }
      if (!gid->has_value() || !isValidDevGid(**gid)) {
        return protocolError("H3 resources row " + std::to_string(index) +
                             ": GPU row without a valid Dev_GID (hex digits)");
      }
      GpuRow gpu;
      gpu.devGid = **gid;
      if (!seen.insert(gpu.devGid).second) {
        return protocolError("H3 resources reply lists Dev_GID " + gpu.devGid + " twice");
      }
      if (host->has_value() && !(*host)->empty()) {
        auto port = parseHostPort(**host);
        if (!port) {
          return protocolError("H3 resources row " + std::to_string(index) + " (Dev_GID " +
                               gpu.devGid + "): " + port.error().message);
        }
        gpu.hostPort = *port;
      }
      gpu.guid = guid->value_or("");
      out.gpus.push_back(std::move(gpu));
    } else if (portNo->has_value() && portGidText->has_value()) {
      auto port = parseHostPort(**portNo);
      if (!port) {
        return protocolError("H3 resources row " + std::to_string(index) + ": " +
                             port.error().message);
      }
      out.ports[*port] = **portGidText;
    }
    // Other rows (switch, NVMe, NIC devices ...) are not ours to interpret.
    ++index;
  }
  return out;
}

Result<Reply> parseReply(std::string_view body) {
  auto doc = parseJsonGuarded(body, "H3 allocation reply");
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_object()) {
    return protocolError(std::string("H3 allocation reply is a JSON ") + doc->type_name() +
                         ", expected an object");
  }
  Reply reply;
  const auto action = doc->find("Action");
  if (action != doc->end() && !action->is_string()) {
    return protocolError("H3 allocation reply: \"Action\" is not a string");
  }
  if (action != doc->end()) {
    reply.action = action->get<std::string>();
  }
  const auto result = doc->find("Result");
  if (result == doc->end()) {
    return protocolError("H3 allocation reply has no \"Result\"");
  }
  if (!result->is_array() || result->size() != 1 || !(*result)[0].is_boolean()) {
    return protocolError("H3 allocation reply: \"Result\" must be an array of one boolean, got " +
                         excerpt(result->dump(), 60));
  }
  reply.result = (*result)[0].get<bool>();
  const auto remark = doc->find("Remark");
  if (remark != doc->end() && !remark->is_null()) {
    if (!remark->is_string()) {
      return protocolError("H3 allocation reply: \"Remark\" is not a string");
    }
    reply.remark = remark->get<std::string>();
  }
  return reply;
}

std::string encodeAssign(std::string_view gep, std::string_view gid, std::string_view devGid) {
  // Key order as the chassis documentation shows it; nlohmann::ordered_json keeps it.
  nlohmann::ordered_json body;
  body["gep"] = std::string(gep);
  body["port_gid"] = std::string(gid);
  body["dev_gid"] = std::string(devGid);
  return body.dump();
}

std::string encodeUnassign(std::string_view gep, std::string_view devGid) {
  nlohmann::ordered_json body;
  body["gep"] = std::string(gep);
  body["dev_gid"] = std::string(devGid);
  return body.dump();
}

Result<AllocationRequest> parseAllocationRequest(std::string_view body, bool isAssign) {
  auto doc = parseJsonGuarded(body, "H3 allocation request", 64 * 1024);
  if (!doc) {
    return makeError(kc::errc::kInvalid, doc.error().message);
  }
  if (!doc->is_object()) {
    return makeError(kc::errc::kInvalid, "allocation request must be a JSON object");
  }
  auto field = [&](const char* key) -> Result<std::string> {
    const auto it = doc->find(key);
    if (it == doc->end() || !it->is_string()) {
      return makeError(kc::errc::kInvalid,
                       std::string("allocation request needs string field \"") + key + "\"");
    }
    return it->get<std::string>();
  };
  AllocationRequest req;
  auto gep = field("gep");
  auto dev = field("dev_gid");
  if (!gep) {
    return gep.error();
  }
  if (!dev) {
    return dev.error();
  }
  if (!isValidDevGid(*dev)) {
    return makeError(kc::errc::kInvalid, "dev_gid \"" + excerpt(*dev, 20) + "\" is not hex digits");
  }
  req.gep = *gep;
  req.devGid = *dev;
  if (isAssign) {
    auto port = field("port_gid");
    if (!port) {
      return port.error();
    }
    auto parsed = parsePortGid(*port);
    if (!parsed) {
      return makeError(kc::errc::kInvalid, parsed.error().message);
    }
    req.portGid = *port;
  }
  return req;
}

}  // namespace kc::fabric::h3
