#include "libcore/fabric/redfish_codec.hpp"

#include <nlohmann/json.hpp>

#include "libcore/base/json_guard.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::fabric::redfish {
Error protocolError(std::string message) {
  return makeError(errc::kProtocol, std::move(message));
}

Result<nlohmann::json> parseObject(std::string_view body, std::string_view what) {
  auto doc = parseJsonGuarded(body, what);
  if (!doc) {
    return doc.error();
  }
  if (!doc->is_object()) {
    return protocolError(std::string(what) + " is a JSON " + doc->type_name() +
                         ", expected an object");
  }
  return doc;
}

Result<std::string> linkOf(const nlohmann::json& value, std::string_view where) {
  if (!value.is_object()) {
    return protocolError(std::string(where) + " is not a link object");
  }
  const auto it = value.find("@odata.id");
  if (it == value.end() || !it->is_string()) {
    return protocolError(std::string(where) + " has no string \"@odata.id\"");
  }
  auto link = it->get<std::string>();
  if (link.empty() || link.front() != '/' || link.size() > 2048 ||
      link.find_first_of(" \r\n\t?#") != std::string::npos) {
    return protocolError(std::string(where) +
                         " \"@odata.id\" is not an absolute path: " + excerpt(link, 60));
  }
  return link;
}

namespace {

using nlohmann::json;

// {"@odata.id": "/..."} -> the link; the link must be an absolute path.

Result<std::optional<json>> optionalMember(const json& obj, const char* key, json::value_t type,
                                           std::string_view where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<json>{};
  }
  if (it->type() != type && !(type == json::value_t::number_integer && it->is_number_integer())) {
    return protocolError(std::string(where) + ": \"" + key + "\" is " + it->type_name());
  }
  return std::optional<json>{*it};
}

Result<std::string> requiredString(const json& obj, const char* key, std::string_view where) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return protocolError(std::string(where) + " needs a string \"" + key + "\"");
  }
  return it->get<std::string>();
}

Result<std::optional<std::string>> optionalString(const json& obj, const char* key,
                                                  std::string_view where) {
  auto m = optionalMember(obj, key, json::value_t::string, where);
  if (!m) {
    return m.error();
  }
  if (!m->has_value()) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{(*m)->get<std::string>()};
}

Result<std::vector<std::string>> linkArray(const json& obj, const char* key,
                                           std::string_view where) {
  std::vector<std::string> out;
  auto m = optionalMember(obj, key, json::value_t::array, where);
  if (!m) {
    return m.error();
  }
  if (!m->has_value()) {
    return out;
  }
  std::size_t i = 0;
  for (const auto& item : **m) {
    auto link = linkOf(item, std::string(where) + "." + key + "[" + std::to_string(i++) + "]");
    if (!link) {
      return link.error();
    }
    out.push_back(std::move(*link));
  }
  return out;
}

// Status.Health / Status.State
Result<std::pair<std::optional<std::string>, std::optional<std::string>>> statusOf(
    const json& obj, std::string_view where) {
  auto st = optionalMember(obj, "Status", json::value_t::object, where);
  if (!st) {
    return st.error();
  }
  std::pair<std::optional<std::string>, std::optional<std::string>> out;
  if (st->has_value()) {
    auto health = optionalString(**st, "Health", std::string(where) + ".Status");
    auto state = optionalString(**st, "State", std::string(where) + ".Status");
    if (!health) {
      return health.error();
    }
    if (!state) {
      return state.error();
    }
    out = {*health, *state};
  }
  return out;
}

}  // namespace

Result<ServiceRoot> parseServiceRoot(std::string_view body) {
  auto doc = parseObject(body, "Redfish service root");
  if (!doc) {
    return doc.error();
  }
  ServiceRoot root;
  const auto systems = doc->find("Systems");
  if (systems == doc->end()) {
    return protocolError("Redfish service root has no Systems link");
  }
  auto sys = linkOf(*systems, "ServiceRoot.Systems");
  if (!sys) {
    return sys.error();
  }
  root.systems = *sys;
  const auto comp = doc->find("CompositionService");
  if (comp == doc->end()) {
    return makeError(
        errc::kUnsupported,
        "Redfish service root has no CompositionService link: the service does not compose");
  }
  auto compLink = linkOf(*comp, "ServiceRoot.CompositionService");
  if (!compLink) {
    return compLink.error();
  }
  root.compositionService = *compLink;
  const auto links = doc->find("Links");
  if (links != doc->end() && links->is_object()) {
    const auto sessions = links->find("Sessions");
    if (sessions != links->end()) {
      auto s = linkOf(*sessions, "ServiceRoot.Links.Sessions");
      if (!s) {
        return s.error();
      }
      root.sessions = *s;
    }
  }
  return root;
}

Result<CompositionService> parseCompositionService(std::string_view body) {
  auto doc = parseObject(body, "Redfish CompositionService");
  if (!doc) {
    return doc.error();
  }
  CompositionService out;
  const auto blocks = doc->find("ResourceBlocks");
  if (blocks == doc->end()) {
    return protocolError("Redfish CompositionService has no ResourceBlocks link");
  }
  auto link = linkOf(*blocks, "CompositionService.ResourceBlocks");
  if (!link) {
    return link.error();
  }
  out.resourceBlocks = *link;
  if (const auto zones = doc->find("ResourceZones"); zones != doc->end() && !zones->is_null()) {
    auto z = linkOf(*zones, "CompositionService.ResourceZones");
    if (!z) {
      return z.error();
    }
    out.resourceZones = *z;
  }
  for (auto [key, slot] : {std::pair{"ServiceEnabled", &out.serviceEnabled},
                           std::pair{"AllowOverprovisioning", &out.allowOverprovisioning},
                           std::pair{"AllowZoneAffinity", &out.allowZoneAffinity}}) {
    const auto it = doc->find(key);
    if (it == doc->end() || it->is_null()) {
      continue;
    }
    if (!it->is_boolean()) {
      return protocolError(std::string("CompositionService \"") + key + "\" is " + it->type_name() +
                           ", expected a boolean");
    }
    *slot = it->get<bool>();
  }
  return out;
}

namespace {

// Member entries: {"@odata.id": "/..."} (DSP0266) or a bare "/..." string (a deviation).
Result<std::vector<std::string>> memberLinks(const json& array, const std::string& where) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (const auto& item : array) {
    const std::string at = where + "[" + std::to_string(i++) + "]";
    if (item.is_string()) {
      auto link = linkOf(json{{"@odata.id", item}}, at);
      if (!link) {
        return link.error();
      }
      out.push_back(std::move(*link));
      continue;
    }
    auto link = linkOf(item, at);
    if (!link) {
      return link.error();
    }
    out.push_back(std::move(*link));
  }
  return out;
}

std::string keysOf(const json& obj) {
  std::string out;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (out.size() > 200) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + it.key();
  }
  return out.empty() ? "none" : out;
}

// @Redfish.CollectionCapabilities: {"Capabilities": [{"UseCase": ..., "Links":
// {"TargetCollection": {"@odata.id": ...}}}]}. Malformed capabilities are ignored: they only
// widen what the driver may try, and the re-read judges every move.
std::optional<std::string> compositionTargetOf(const json& doc) {
  const auto caps = doc.find("@Redfish.CollectionCapabilities");
  if (caps == doc.end() || !caps->is_object()) {
    return std::nullopt;
  }
  const auto list = caps->find("Capabilities");
  if (list == caps->end() || !list->is_array()) {
    return std::nullopt;
  }
  for (const auto& c : *list) {
    if (!c.is_object()) {
      continue;
    }
    const auto useCase = c.find("UseCase");
    if (useCase == c.end() || !useCase->is_string() ||
        useCase->get<std::string>() != kCompositionUseCase) {
      continue;
    }
    const auto l = c.find("Links");
    if (l == c.end() || !l->is_object() || !l->contains("TargetCollection")) {
      continue;
    }
    auto target = linkOf((*l)["TargetCollection"], "TargetCollection");
    if (target) {
      return *target;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<Collection> parseCollectionPage(std::string_view body, std::string_view what) {
  auto doc = parseObject(body, what);
  if (!doc) {
    return doc.error();
  }
  const std::string where(what);
  Collection out;
  // DSP0266 first.
  const auto members = doc->find("Members");
  const auto links = doc->find("Links");
  if (members != doc->end() && !members->is_null()) {
    if (!members->is_array()) {
      return protocolError(where + ": \"Members\" is a " + members->type_name() +
                           ", expected an array of {\"@odata.id\": ...}");
    }
    auto m = memberLinks(*members, where + ".Members");
    if (!m) {
      return m.error();
    }
    out.members = std::move(*m);
    out.shape = "Members";
  } else if (links != doc->end() && links->is_object() && links->contains("Members") &&
             !(*links)["Members"].is_null()) {
    const auto& lm = (*links)["Members"];
    if (!lm.is_array()) {
      return protocolError(where + ": \"Links\".\"Members\" is a " + std::string(lm.type_name()) +
                           ", expected an array");
    }
    auto m = memberLinks(lm, where + ".Links.Members");
    if (!m) {
      return m.error();
    }
    out.members = std::move(*m);
    out.shape = "Links.Members";
  } else if (const auto count = doc->find("Members@odata.count");
             count != doc->end() && count->is_number_integer() && count->get<std::int64_t>() == 0) {
    out.shape = "empty (Members@odata.count 0, no Members)";
  } else {
    return protocolError(where +
                         " lists no members: expected \"Members\" (an array of "
                         "{\"@odata.id\": ...}) or \"Links\".\"Members\"; the reply has keys: " +
                         keysOf(*doc));
  }
  if (const auto next = doc->find("Members@odata.nextLink");
      next != doc->end() && !next->is_null()) {
    // Unlike an @odata.id, a next link carries a query ("/redfish/v1/Systems?$skip=50").
    if (!next->is_string()) {
      return protocolError(where + ": \"Members@odata.nextLink\" is a " + next->type_name() +
                           ", expected a string");
    }
    const auto n = next->get<std::string>();
    if (n.empty() || n.front() != '/' || n.size() > 2048 ||
        n.find_first_of(" \r\n\t#") != std::string::npos) {
      return protocolError(
          where + ": \"Members@odata.nextLink\" is not an absolute path: " + excerpt(n, 60));
    }
    out.nextLink = n;
  }
  out.compositionTarget = compositionTargetOf(*doc);
  return out;
}

Result<std::optional<std::string>> parseCompositionTarget(std::string_view body,
                                                          std::string_view what) {
  auto doc = parseObject(body, what);
  if (!doc) {
    return doc.error();
  }
  return compositionTargetOf(*doc);
}

Result<std::vector<std::string>> parseCollection(std::string_view body, std::string_view what) {
  auto page = parseCollectionPage(body, what);
  if (!page) {
    return page.error();
  }
  return std::move(page->members);
}

Result<ResourceBlock> parseResourceBlock(std::string_view body) {
  auto doc = parseObject(body, "Redfish ResourceBlock");
  if (!doc) {
    return doc.error();
  }
  ResourceBlock block;
  auto odataId = requiredString(*doc, "@odata.id", "ResourceBlock");
  auto id = requiredString(*doc, "Id", "ResourceBlock");
  if (!odataId) {
    return odataId.error();
  }
  if (!id) {
    return id.error();
  }
  block.odataId = *odataId;
  block.id = *id;
  const std::string where = "ResourceBlock " + excerpt(block.id, 40);
  if (block.id.empty() || block.id.size() > 128) {
    return protocolError("ResourceBlock Id must have 1..128 characters");
  }
  auto blockEtag = optionalString(*doc, "@odata.etag", where);
  if (!blockEtag) {
    return blockEtag.error();
  }
  block.etag = *blockEtag;
  auto cs = optionalMember(*doc, "CompositionStatus", json::value_t::object, where);
  if (!cs) {
    return cs.error();
  }
  if (!cs->has_value()) {
    return protocolError(where + " has no CompositionStatus");
  }
  auto state = requiredString(**cs, "CompositionState", where + ".CompositionStatus");
  if (!state) {
    return state.error();
  }
  block.compositionState = *state;
  if (const auto it = (*cs)->find("SharingEnabled"); it != (*cs)->end() && it->is_boolean()) {
    block.sharingEnabled = it->get<bool>();
  }
  if (const auto it = (*cs)->find("MaxCompositions");
      it != (*cs)->end() && it->is_number_integer()) {
    block.maxCompositions = it->get<std::int64_t>();
  }
  if (const auto it = (*cs)->find("NumberOfCompositions");
      it != (*cs)->end() && it->is_number_integer()) {
    block.numberOfCompositions = it->get<std::int64_t>();
  }
  if (const auto it = doc->find("ResourceBlockType"); it != doc->end() && it->is_array()) {
    for (const auto& t : *it) {
      if (t.is_string()) {
        block.types.push_back(t.get<std::string>());
      }
    }
  }
  auto status = statusOf(*doc, where);
  if (!status) {
    return status.error();
  }
  block.health = status->first;
  block.state = status->second;
  auto procs = linkArray(*doc, "Processors", where);
  if (!procs) {
    return procs.error();
  }
  block.processors = std::move(*procs);
  auto links = optionalMember(*doc, "Links", json::value_t::object, where);
  if (!links) {
    return links.error();
  }
  if (links->has_value()) {
    auto systems = linkArray(**links, "ComputerSystems", where + ".Links");
    if (!systems) {
      return systems.error();
    }
    block.systems = std::move(*systems);
  }
  return block;
}

Result<Processor> parseProcessor(std::string_view body) {
  auto doc = parseObject(body, "Redfish Processor");
  if (!doc) {
    return doc.error();
  }
  Processor proc;
  auto type = optionalString(*doc, "ProcessorType", "Processor");
  auto uuid = optionalString(*doc, "UUID", "Processor");
  auto model = optionalString(*doc, "Model", "Processor");
  for (auto* f : {&type, &uuid, &model}) {
    if (!*f) {
      return f->error();
    }
  }
  proc.processorType = type->value_or("");
  proc.uuid = uuid->value_or("");
  proc.model = model->value_or("");
  auto status = statusOf(*doc, "Processor");
  if (!status) {
    return status.error();
  }
  proc.health = status->first;
  return proc;
}

Result<ComputerSystem> parseComputerSystem(std::string_view body) {
  auto doc = parseObject(body, "Redfish ComputerSystem");
  if (!doc) {
    return doc.error();
  }
  ComputerSystem sys;
  auto odataId = requiredString(*doc, "@odata.id", "ComputerSystem");
  auto id = requiredString(*doc, "Id", "ComputerSystem");
  if (!odataId) {
    return odataId.error();
  }
  if (!id) {
    return id.error();
  }
  sys.odataId = *odataId;
  sys.id = *id;
  if (sys.id.empty() || sys.id.size() > 128) {
    return protocolError("ComputerSystem Id must have 1..128 characters");
  }
  const std::string where = "ComputerSystem " + excerpt(sys.id, 40);
  auto sysEtag = optionalString(*doc, "@odata.etag", where);
  if (!sysEtag) {
    return sysEtag.error();
  }
  sys.etag = *sysEtag;
  auto links = optionalMember(*doc, "Links", json::value_t::object, where);
  if (!links) {
    return links.error();
  }
  if (links->has_value()) {
    auto blocks = linkArray(**links, "ResourceBlocks", where + ".Links");
    if (!blocks) {
      return blocks.error();
    }
    sys.resourceBlocks = std::move(*blocks);
  }
  auto actions = optionalMember(*doc, "Actions", json::value_t::object, where);
  if (!actions) {
    return actions.error();
  }
  if (actions->has_value()) {
    for (auto [name, slot] :
         {std::pair{kAddAction, &sys.addTarget}, std::pair{kRemoveAction, &sys.removeTarget}}) {
      const auto it = (*actions)->find(std::string(name));
      if (it == (*actions)->end()) {
        continue;
      }
      if (!it->is_object()) {
        return protocolError(where + ": action " + std::string(name) + " is not an object");
      }
      auto target = requiredString(*it, "target", where + " action " + std::string(name));
      if (!target) {
        return target.error();
      }
      if (target->empty() || target->front() != '/') {
        return protocolError(where + ": action target is not an absolute path");
      }
      *slot = *target;
      const auto allowable = it->find("ResourceBlock@Redfish.AllowableValues");
      if (allowable != it->end() && allowable->is_array()) {
        auto links = memberLinks(*allowable, where + " action " + std::string(name) +
                                                 " ResourceBlock@Redfish.AllowableValues");
        if (!links) {
          return links.error();
        }
        (name == kAddAction ? sys.addAllowable : sys.removeAllowable) = std::move(*links);
      }
    }
  }
  return sys;
}

std::string encodeBlockAction(std::string_view blockOdataId,
                              const std::optional<std::string>& blockEtag,
                              const std::optional<std::string>& systemEtag) {
  nlohmann::ordered_json body;
  body["ResourceBlock"]["@odata.id"] = std::string(blockOdataId);
  if (blockEtag) {
    body["ResourceBlockETag"] = *blockEtag;
  }
  if (systemEtag) {
    body["ComputerSystemETag"] = *systemEtag;
  }
  return body.dump();
}

Result<BlockActionRequest> parseBlockAction(std::string_view body) {
  auto doc = parseJsonGuarded(body, "ResourceBlock action request", 64 * 1024);
  if (!doc || !doc->is_object()) {
    return makeError(kc::errc::kInvalid, "action body must be a JSON object");
  }
  const auto rb = doc->find("ResourceBlock");
  if (rb == doc->end()) {
    return makeError(kc::errc::kInvalid,
                     "action body needs \"ResourceBlock\": {\"@odata.id\": ...}");
  }
  auto link = linkOf(*rb, "ResourceBlock");
  if (!link) {
    return makeError(kc::errc::kInvalid, link.error().message);
  }
  BlockActionRequest req{*link, {}, {}};
  auto be = optionalString(*doc, "ResourceBlockETag", "action");
  auto se = optionalString(*doc, "ComputerSystemETag", "action");
  if (!be || !se) {
    return makeError(kc::errc::kInvalid, "ETag parameters must be strings");
  }
  req.blockEtag = *be;
  req.systemEtag = *se;
  return req;
}

bool ResourceBlock::isCompute() const {
  for (const auto& t : types) {
    if (t == "Compute" || t == "ComputerSystem") {
      return true;
    }
  }
  return false;
}

bool ResourceBlock::canJoinAnotherComposition() const {
  if (systems.empty() && numberOfCompositions.value_or(0) == 0) {
    return true;
  }
  if (sharingEnabled == false) {
    return false;
  }
  if (maxCompositions && numberOfCompositions) {
    return *numberOfCompositions < *maxCompositions;
  }
  return sharingEnabled == true;
}

std::string composeRequestId(std::string_view host, std::string_view block) {
  std::string id = "kubecomp-" + std::string(host) + "-" + std::string(block);
  for (char& ch : id) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) {
      ch = '-';
    }
  }
  return id;
}

std::string encodeComposeRequest(std::string_view id, std::string_view name,
                                 const std::vector<std::string>& blocks) {
  nlohmann::ordered_json body;
  body["Id"] = std::string(id);
  body["Name"] = std::string(name);
  body["Links"]["ResourceBlocks"] = nlohmann::ordered_json::array();
  for (const auto& b : blocks) {
    body["Links"]["ResourceBlocks"].push_back({{"@odata.id", b}});
  }
  return body.dump();
}

Result<ComposeRequest> parseComposeRequest(std::string_view body) {
  auto doc = parseJsonGuarded(body, "composition request", 64 * 1024);
  if (!doc || !doc->is_object()) {
    return makeError(kc::errc::kInvalid, "composition request must be a JSON object");
  }
  const auto links = doc->find("Links");
  if (links == doc->end() || !links->is_object() || !links->contains("ResourceBlocks") ||
      !(*links)["ResourceBlocks"].is_array()) {
    return makeError(kc::errc::kInvalid,
                     "composition request needs \"Links\": {\"ResourceBlocks\": [...]}");
  }
  auto out = memberLinks((*links)["ResourceBlocks"], "Links.ResourceBlocks");
  if (!out) {
    return makeError(kc::errc::kInvalid, out.error().message);
  }
  ComposeRequest req;
  req.blocks = std::move(*out);
  if (const auto id = doc->find("Id"); id != doc->end()) {
    if (!id->is_string()) {
      return makeError(kc::errc::kInvalid, "composition request: \"Id\" must be a string");
    }
    req.id = id->get<std::string>();
  }
  return req;
}

std::string encodeLogin(std::string_view user, std::string_view password) {
  nlohmann::ordered_json body;
  body["UserName"] = std::string(user);
  body["Password"] = std::string(password);
  return body.dump();
}

Result<LoginRequest> parseLogin(std::string_view body) {
  auto doc = parseJsonGuarded(body, "session request", 64 * 1024);
  if (!doc || !doc->is_object()) {
    return makeError(kc::errc::kInvalid, "session request must be a JSON object");
  }
  auto user = requiredString(*doc, "UserName", "session request");
  auto pass = requiredString(*doc, "Password", "session request");
  if (!user || !pass) {
    return makeError(kc::errc::kInvalid, "session request needs string UserName and Password");
  }
  return LoginRequest{*user, *pass};
}

std::string describeError(std::string_view body) {
  auto doc = parseJsonGuarded(body, "Redfish error", 64 * 1024);
  if (doc && doc->is_object()) {
    const auto err = doc->find("error");
    if (err != doc->end() && err->is_object()) {
      std::string out;
      const auto code = err->find("code");
      const auto msg = err->find("message");
      if (code != err->end() && code->is_string()) {
        out += code->get<std::string>();
      }
      if (msg != err->end() && msg->is_string()) {
        out += (out.empty() ? "" : ": ") + msg->get<std::string>();
      }
      const auto ext = err->find("@Message.ExtendedInfo");
      if (ext != err->end() && ext->is_array()) {
        for (const auto& info : *ext) {
          if (info.is_object() && info.contains("Message") && info["Message"].is_string()) {
            out += "; " + info["Message"].get<std::string>();
          }
        }
      }
      if (!out.empty()) {
        return excerpt(out, 300);
      }
    }
  }
  return excerpt(body);
}

}  // namespace kc::fabric::redfish
