#include "tools/chassis-sim/model.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "libcore/base/yaml_json.hpp"
#include "libcore/fabric/h3_codec.hpp"
#include "libcore/fabric/types.hpp"

namespace kc::chassis_sim {

std::string_view toString(RedfishProfile profile) {
  return profile == RedfishProfile::kEmulator ? "emulator"
         : profile == RedfishProfile::kFabric ? "fabric"
                                              : "classic";
}

std::optional<RedfishProfile> parseRedfishProfile(std::string_view text) {
  if (text == "classic") {
    return RedfishProfile::kClassic;
  }
  if (text == "emulator") {
    return RedfishProfile::kEmulator;
  }
  if (text == "fabric") {
    return RedfishProfile::kFabric;
  }
  return std::nullopt;
}

namespace {

using nlohmann::json;

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, std::move(message));
}

Result<std::string> stringOf(const json& obj, const char* key, const std::string& where,
                             bool required) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) {
      return invalid(where + ": missing \"" + key + "\"");
    }
    return std::string();
  }
  if (!it->is_string()) {
    return invalid(where + ": \"" + key + "\" must be a string");
  }
  return it->get<std::string>();
}

Result<std::optional<std::uint32_t>> portOf(const json& obj, const char* key,
                                            const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::uint32_t>{};
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
      it->get<std::int64_t>() > static_cast<std::int64_t>(fabric::h3::kMaxHostPort)) {
    return invalid(where + ": \"" + key + "\" must be an integer 0..255");
  }
  return std::optional<std::uint32_t>{static_cast<std::uint32_t>(it->get<std::int64_t>())};
}

Result<LatencyRange> rangeOf(const json& value, const std::string& where) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() ||
      !value[1].is_number_integer() || value[0].get<std::int64_t>() < 0 ||
      value[1].get<std::int64_t>() < value[0].get<std::int64_t>()) {
    return invalid(where + " must be [min_ms, max_ms] with 0 <= min <= max");
  }
  return LatencyRange{Millis{value[0].get<std::int64_t>()}, Millis{value[1].get<std::int64_t>()}};
}

Result<Topology> topologyFromJson(const json& doc) {
  if (!doc.is_object()) {
    return invalid("topology must be a mapping with a \"chassis\" list");
  }
  Topology topo;
  if (const auto lat = doc.find("latency"); lat != doc.end()) {
    if (!lat->is_object()) {
      return invalid("latency must be a mapping");
    }
    for (auto [key, slot] : {std::pair{"inventory", &topo.latencies.inventory},
                             std::pair{"unassign", &topo.latencies.unassign},
                             std::pair{"assign", &topo.latencies.assign}}) {
      if (const auto it = lat->find(key); it != lat->end()) {
        auto r = rangeOf(*it, std::string("latency.") + key);
        if (!r) {
          return r.error();
        }
        *slot = *r;
      }
    }
    for (const auto& [key, value] : lat->items()) {
      if (key != "inventory" && key != "unassign" && key != "assign") {
        return invalid("latency: unknown operation \"" + key + "\"");
      }
    }
  }
  if (const auto rf = doc.find("redfish"); rf != doc.end()) {
    if (!rf->is_object()) {
      return invalid("redfish must be a mapping");
    }
    auto uris = stringOf(*rf, "uris", "redfish", false);
    if (!uris) {
      return uris.error();
    }
    if (!uris->empty()) {
      if (*uris != "standard" && *uris != "opaque") {
        return invalid("redfish.uris must be \"standard\" or \"opaque\"");
      }
      topo.redfishUris = *uris;
    }
    auto profile = stringOf(*rf, "profile", "redfish", false);
    if (!profile) {
      return profile.error();
    }
    if (!profile->empty()) {
      if (!parseRedfishProfile(*profile)) {
        return invalid("redfish.profile must be \"classic\", \"emulator\" or \"fabric\", not \"" +
                       *profile + "\"");
      }
      topo.redfishProfile = *parseRedfishProfile(*profile);
    }
    if (const auto it = rf->find("requireEtags"); it != rf->end()) {
      if (!it->is_boolean()) {
        return invalid("redfish.requireEtags must be a boolean");
      }
      topo.redfishRequireEtags = it->get<bool>();
    }
    if (const auto it = rf->find("pageSize"); it != rf->end()) {
      if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
          it->get<std::int64_t>() > 1000) {
        return invalid("redfish.pageSize must be a whole number from 0 to 1000");
      }
      topo.redfishPageSize = it->get<std::uint32_t>();
    }
    if (const auto it = rf->find("etagHeader"); it != rf->end()) {
      if (!it->is_boolean()) {
        return invalid("redfish.etagHeader must be a boolean");
      }
      topo.redfishEtagHeader = it->get<bool>();
    }
  }
  const auto list = doc.find("chassis");
  if (list == doc.end() || !list->is_array() || list->empty()) {
    return invalid("topology needs a non-empty \"chassis\" list");
  }
  std::set<std::string> names;
  std::set<std::string> uuids;
  for (std::size_t ci = 0; ci < list->size(); ++ci) {
    const auto& cj = (*list)[ci];
    std::string where = "chassis[" + std::to_string(ci) + "]";
    if (!cj.is_object()) {
      return invalid(where + " must be a mapping");
    }
    Chassis ch;
    auto name = stringOf(cj, "name", where, true);
    if (!name) {
      return name.error();
    }
    if (!fabric::isValidChassisName(*name)) {
      return invalid(where + ": name \"" + *name + "\" must be a lower-case DNS label");
    }
    if (!names.insert(*name).second) {
      return invalid(where + ": duplicate chassis name \"" + *name + "\"");
    }
    ch.name = *name;
    where = "chassis " + ch.name;
    const auto hosts = cj.find("hosts");
    if (hosts == cj.end() || !hosts->is_array() || hosts->empty()) {
      return invalid(where + ": needs a non-empty \"hosts\" list");
    }
    std::set<std::uint32_t> ports;
    std::set<std::string> systems;
    for (std::size_t hi = 0; hi < hosts->size(); ++hi) {
      const auto& hj = (*hosts)[hi];
      const std::string hw = where + " hosts[" + std::to_string(hi) + "]";
      if (!hj.is_object()) {
        return invalid(hw + " must be a mapping");
      }
      auto port = portOf(hj, "port", hw);
      if (!port) {
        return port.error();
      }
      if (!port->has_value()) {
        return invalid(hw + ": missing \"port\"");
      }
      auto system = stringOf(hj, "system", hw, false);
      if (!system) {
        return system.error();
      }
      Host host{**port, system->empty() ? "host-" + std::to_string(**port) : *system, 1};
      if (!fabric::isValidChassisName(host.system)) {
        return invalid(hw + ": system \"" + host.system + "\" must be a lower-case DNS label");
      }
      if (!ports.insert(host.port).second || !systems.insert(host.system).second) {
        return invalid(hw + ": duplicate host port or system");
      }
      ch.hosts.push_back(std::move(host));
    }
    const auto gpus = cj.find("gpus");
    if (gpus == cj.end() || !gpus->is_array()) {
      return invalid(where + ": needs a \"gpus\" list");
    }
    std::set<std::string> gids;
    for (std::size_t gi = 0; gi < gpus->size(); ++gi) {
      const auto& gj = (*gpus)[gi];
      const std::string gw = where + " gpus[" + std::to_string(gi) + "]";
      if (!gj.is_object()) {
        return invalid(gw + " must be a mapping");
      }
      Gpu gpu;
      auto gid = stringOf(gj, "gid", gw, true);
      auto uuid = stringOf(gj, "uuid", gw, true);
      auto model = stringOf(gj, "model", gw, false);
      for (auto* f : {&gid, &uuid, &model}) {
        if (!*f) {
          return f->error();
        }
      }
      if (!fabric::h3::isValidDevGid(*gid)) {
        return invalid(gw + ": gid \"" + *gid + "\" must be 1..16 hex digits (an H3 Dev_GID)");
      }
      if (!gids.insert(*gid).second) {
        return invalid(gw + ": duplicate gid " + *gid);
      }
      if (uuid->empty() || !uuids.insert(*uuid).second) {
        return invalid(gw + ": uuid must be non-empty and unique");
      }
      gpu.gid = *gid;
      gpu.uuid = *uuid;
      gpu.model = model->empty() ? "NVIDIA Tesla V100" : *model;
      auto host = portOf(gj, "host", gw);
      if (!host) {
        return host.error();
      }
      if (host->has_value() && !ports.count(**host)) {
        return invalid(gw + ": host " + std::to_string(**host) +
                       " is not one of the chassis' host ports");
      }
      gpu.host = *host;
      if (const auto it = gj.find("healthy"); it != gj.end()) {
        if (!it->is_boolean()) {
          return invalid(gw + ": healthy must be a boolean");
        }
        gpu.healthy = it->get<bool>();
      }
      ch.gpus.push_back(std::move(gpu));
    }
    topo.chassis.push_back(std::move(ch));
  }
  return topo;
}

LatencyRange rangeFor(const Latencies& l, Op op) {
  switch (op) {
    case Op::kInventory:
      return l.inventory;
    case Op::kAssign:
      return l.assign;
    case Op::kUnassign:
      return l.unassign;
  }
  return {};
}

}  // namespace

std::string_view toString(Op op) {
  switch (op) {
    case Op::kInventory:
      return "inventory";
    case Op::kAssign:
      return "assign";
    case Op::kUnassign:
      return "unassign";
  }
  return "?";
}

std::optional<Op> parseOp(std::string_view text) {
  for (Op op : {Op::kInventory, Op::kAssign, Op::kUnassign}) {
    if (toString(op) == text) {
      return op;
    }
  }
  return std::nullopt;
}

std::string_view toString(FaultKind kind) {
  switch (kind) {
    case FaultKind::kFail:
      return "fail";
    case FaultKind::kHang:
      return "hang";
    case FaultKind::kLieFailure:
      return "lie_failure";
    case FaultKind::kLieSuccess:
      return "lie_success";
    case FaultKind::kLoseGpu:
      return "lose_gpu";
    case FaultKind::kMalformed:
      return "malformed";
    case FaultKind::kPrecondition:
      return "precondition";
    case FaultKind::kBusy:
      return "busy";
  }
  return "?";
}

std::optional<FaultKind> parseFaultKind(std::string_view text) {
  for (FaultKind k :
       {FaultKind::kFail, FaultKind::kHang, FaultKind::kLieFailure, FaultKind::kLieSuccess,
        FaultKind::kLoseGpu, FaultKind::kMalformed, FaultKind::kPrecondition, FaultKind::kBusy}) {
    if (toString(k) == text) {
      return k;
    }
  }
  return std::nullopt;
}

Result<Fault> parseFault(const json& doc) {
  if (!doc.is_object()) {
    return invalid("fault must be a JSON object");
  }
  for (const auto& [key, value] : doc.items()) {
    static const std::set<std::string> known{"chassis", "op",   "kind",      "gpu",
                                             "times",   "body", "bodyBytes", "hangMs"};
    if (!known.count(key)) {
      return invalid("fault: unknown field \"" + key + "\"");
    }
  }
  Fault f;
  auto chassis = stringOf(doc, "chassis", "fault", false);
  auto op = stringOf(doc, "op", "fault", true);
  auto kind = stringOf(doc, "kind", "fault", true);
  auto gpu = stringOf(doc, "gpu", "fault", false);
  auto body = stringOf(doc, "body", "fault", false);
  for (auto* r : {&chassis, &op, &kind, &gpu, &body}) {
    if (!*r) {
      return r->error();
    }
  }
  const auto parsedOp = parseOp(*op);
  if (!parsedOp) {
    return invalid("fault: op must be inventory, assign or unassign");
  }
  const auto parsedKind = parseFaultKind(*kind);
  if (!parsedKind) {
    return invalid(
        "fault: kind must be fail, hang, lie_failure, lie_success, lose_gpu, malformed, "
        "precondition or busy");
  }
  f.chassis = *chassis;
  f.op = *parsedOp;
  f.kind = *parsedKind;
  if (!gpu->empty()) {
    f.gpu = *gpu;
  }
  f.body = *body;
  if (const auto it = doc.find("times"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < -1 || it->get<std::int64_t>() == 0 ||
        it->get<std::int64_t>() > 1'000'000) {
      return invalid("fault: times must be -1 (until cleared) or 1..1000000");
    }
    f.times = static_cast<std::int32_t>(it->get<std::int64_t>());
  }
  if (const auto it = doc.find("bodyBytes"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > (64 << 20)) {
      return invalid("fault: bodyBytes must be 0..67108864");
    }
    f.bodyBytes = static_cast<std::size_t>(it->get<std::int64_t>());
  }
  if (const auto it = doc.find("hangMs"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > 3'600'000) {
      return invalid("fault: hangMs must be 0..3600000");
    }
    f.hang = Millis{it->get<std::int64_t>()};
  }
  if (f.kind == FaultKind::kMalformed && f.body.empty() && f.bodyBytes == 0) {
    return invalid("fault: malformed needs \"body\" or \"bodyBytes\"");
  }
  if (f.kind == FaultKind::kLoseGpu && !f.gpu) {
    return invalid("fault: lose_gpu needs \"gpu\"");
  }
  return f;
}

json toJson(const Fault& f) {
  json out{{"chassis", f.chassis},
           {"op", toString(f.op)},
           {"kind", toString(f.kind)},
           {"times", f.times},
           {"hangMs", f.hang.count()}};
  if (f.gpu) {
    out["gpu"] = *f.gpu;
  }
  if (f.kind == FaultKind::kMalformed) {
    out["bodyBytes"] = f.bodyBytes;
    out["body"] = f.body;
  }
  return out;
}

Result<Topology> parseTopology(std::string_view text) {
  if (text.size() > (4u << 20)) {
    return invalid("topology file is larger than 4 MiB");
  }
  json doc;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (doc.is_discarded()) {
      return invalid("topology is not valid JSON");
    }
  } else {
    auto yaml = kc::yamlToJson(text);
    if (!yaml) {
      return invalid("topology is not valid YAML: " + yaml.error().message);
    }
    doc = std::move(*yaml);
  }
  return topologyFromJson(doc);
}

Result<Topology> loadTopology(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalid("cannot open topology file " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto topo = parseTopology(text.str());
  if (!topo) {
    return invalid(path + ": " + topo.error().message);
  }
  return topo;
}

const Host* Chassis::hostByPort(std::uint32_t port) const {
  for (const auto& h : hosts) {
    if (h.port == port) {
      return &h;
    }
  }
  return nullptr;
}

const Host* Chassis::hostBySystem(std::string_view system) const {
  for (const auto& h : hosts) {
    if (h.system == system) {
      return &h;
    }
  }
  return nullptr;
}

Gpu* Chassis::gpu(std::string_view gid) {
  for (auto& g : gpus) {
    if (g.gid == gid) {
      return &g;
    }
  }
  return nullptr;
}

const Gpu* Chassis::gpu(std::string_view gid) const {
  return const_cast<Chassis*>(this)->gpu(gid);
}

ChassisModel::ChassisModel(Topology topology, std::uint64_t seed)
    : initial_(topology),
      chassis_(std::move(topology.chassis)),
      latencies_(topology.latencies),
      rng_(seed) {}

std::vector<std::string> ChassisModel::chassisNames() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& c : chassis_) {
    names.push_back(c.name);
  }
  return names;
}

bool ChassisModel::hasChassis(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return std::any_of(chassis_.begin(), chassis_.end(),
                     [&](const Chassis& c) { return c.name == name; });
}

Chassis* ChassisModel::find(std::string_view name) {
  for (auto& c : chassis_) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

Plan ChassisModel::plan(std::string_view chassis, Op op, std::string_view gid) {
  std::lock_guard lock(mutex_);
  Plan plan;
  const auto range = rangeFor(latencies_, op);
  if (latencies_.scale > 0 && range.max.count() > 0) {
    std::uniform_int_distribution<std::int64_t> dist(range.min.count(), range.max.count());
    plan.delay =
        Millis{static_cast<std::int64_t>(static_cast<double>(dist(rng_)) * latencies_.scale)};
  }
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    // An operation on the whole chassis (the inventory: no GPU) matches a fault that names a
    // GPU: the name says which GPU the fault acts on (lose_gpu).
    if (it->op != op || (!it->chassis.empty() && it->chassis != chassis) ||
        (it->gpu && !gid.empty() && *it->gpu != gid)) {
      continue;
    }
    plan.fault = *it;
    if (it->times > 0 && --it->times == 0) {
      faults_.erase(it);
    }
    break;
  }
  return plan;
}

Status ChassisModel::assign(std::string_view chassis, std::string_view gid, std::uint32_t port) {
  std::lock_guard lock(mutex_);
  Chassis* ch = find(chassis);
  if (!ch) {
    return makeError(kc::errc::kNotFound, "no chassis " + std::string(chassis));
  }
  Gpu* gpu = ch->gpu(gid);
  if (!gpu) {
    return makeError(kc::errc::kNotFound, "no device " + std::string(gid));
  }
  if (!ch->hostByPort(port)) {
    return makeError(kc::errc::kNotFound, "no host port " + std::to_string(port));
  }
  if (!gpu->healthy) {
    return makeError(kc::errc::kUnhealthy, "device " + gpu->gid + " is not responding");
  }
  if (gpu->host == port) {
    return okStatus();
  }
  if (gpu->host) {
    return makeError(kc::errc::kConflict, "device " + gpu->gid + " is assigned to host port " +
                                              std::to_string(*gpu->host) + "; unassign it first");
  }
  gpu->host = port;
  ++gpu->version;
  for (auto& h : ch->hosts) {
    if (h.port == port) {
      ++h.version;
    }
  }
  changed(*ch, *gpu);
  return okStatus();
}

Status ChassisModel::unassign(std::string_view chassis, std::string_view gid,
                              std::optional<std::uint32_t> fromPort) {
  std::lock_guard lock(mutex_);
  Chassis* ch = find(chassis);
  if (!ch) {
    return makeError(kc::errc::kNotFound, "no chassis " + std::string(chassis));
  }
  Gpu* gpu = ch->gpu(gid);
  if (!gpu) {
    return makeError(kc::errc::kNotFound, "no device " + std::string(gid));
  }
  if (fromPort && gpu->host != fromPort) {
    return makeError(kc::errc::kConflict, "device " + gpu->gid + " is not assigned to host port " +
                                              std::to_string(*fromPort));
  }
  if (!gpu->host) {
    return okStatus();
  }
  for (auto& h : ch->hosts) {
    if (h.port == *gpu->host) {
      ++h.version;
    }
  }
  gpu->host.reset();
  ++gpu->version;
  changed(*ch, *gpu);
  return okStatus();
}

Status ChassisModel::loseGpu(std::string_view chassis, std::string_view gid) {
  std::lock_guard lock(mutex_);
  Chassis* ch = find(chassis);
  Gpu* gpu = ch ? ch->gpu(gid) : nullptr;
  if (!gpu) {
    return makeError(kc::errc::kNotFound, "no device " + std::string(gid));
  }
  const bool wasHealthy = gpu->healthy;
  gpu->healthy = false;
  ++gpu->version;
  if (wasHealthy) {
    changed(*ch, *gpu);
  }
  return okStatus();
}

void ChassisModel::setChangeListener(GpuChangeListener listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void ChassisModel::changed(const Chassis& chassis, const Gpu& gpu) {
  if (listener_) {
    listener_(GpuChange{chassis.name, gpu.gid, gpu.host, gpu.healthy});
  }
}

void ChassisModel::count(std::string_view chassis, std::string_view what) {
  std::lock_guard lock(mutex_);
  if (Chassis* ch = find(chassis)) {
    ++ch->counters[std::string(what)];
  }
}

std::optional<Chassis> ChassisModel::snapshot(std::string_view chassis) const {
  std::lock_guard lock(mutex_);
  for (const auto& c : chassis_) {
    if (c.name == chassis) {
      return c;
    }
  }
  return std::nullopt;
}

std::vector<Chassis> ChassisModel::snapshotAll() const {
  std::lock_guard lock(mutex_);
  return chassis_;
}

void ChassisModel::addFault(Fault fault) {
  std::lock_guard lock(mutex_);
  faults_.push_back(std::move(fault));
}

void ChassisModel::clearFaults() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

std::vector<Fault> ChassisModel::faults() const {
  std::lock_guard lock(mutex_);
  return faults_;
}

ChassisModel::Session ChassisModel::createSession(std::string user) {
  std::lock_guard lock(mutex_);
  const std::string id = std::to_string(++sessionCounter_);
  std::uniform_int_distribution<std::uint64_t> dist;
  std::ostringstream token;
  token << std::hex << dist(rng_) << dist(rng_);
  sessions_[id] = {token.str(), std::move(user)};
  return Session{id, token.str()};
}

void ChassisModel::setLatencyScale(double scale) {
  std::lock_guard lock(mutex_);
  latencies_.scale = scale;
}

bool ChassisModel::validSession(std::string_view token) const {
  std::lock_guard lock(mutex_);
  if (token.empty()) {
    return false;
  }
  return std::any_of(sessions_.begin(), sessions_.end(),
                     [&](const auto& entry) { return entry.second.first == token; });
}

bool ChassisModel::deleteSession(std::string_view id) {
  std::lock_guard lock(mutex_);
  return sessions_.erase(std::string(id)) > 0;
}

void ChassisModel::clearSessions() {
  std::lock_guard lock(mutex_);
  sessions_.clear();
}

json ChassisModel::stateJson() const {
  std::lock_guard lock(mutex_);
  json out{{"persistent", false}, {"chassis", json::array()}, {"faults", json::array()}};
  for (const auto& c : chassis_) {
    json cj{{"name", c.name},
            {"hosts", json::array()},
            {"gpus", json::array()},
            {"counters", c.counters}};
    for (const auto& h : c.hosts) {
      cj["hosts"].push_back({{"port", h.port}, {"system", h.system}});
    }
    for (const auto& g : c.gpus) {
      cj["gpus"].push_back({{"gid", g.gid},
                            {"uuid", g.uuid},
                            {"model", g.model},
                            {"host", g.host ? json(*g.host) : json(nullptr)},
                            {"healthy", g.healthy}});
    }
    out["chassis"].push_back(std::move(cj));
  }
  for (const auto& f : faults_) {
    out["faults"].push_back(toJson(f));
  }
  out["sessions"] = sessions_.size();
  return out;
}

}  // namespace kc::chassis_sim
