#include "tools/chassis-sim/server.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <thread>

#include "libcore/base/base64.hpp"
#include "libcore/fabric/h3_codec.hpp"
#include "libcore/fabric/redfish_codec.hpp"
#include "libcore/net/http_server.hpp"
#include "tools/chassis-sim/redfish_fabric.hpp"

namespace kc::chassis_sim {
namespace {

using net::Request;
using net::Response;
using net::ResponseStream;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Runs closures at a due time on one thread, so held replies never block io threads.
class Timer {
 public:
  Timer() : thread_([this] { run(); }) {}
  ~Timer() { stop(); }
  void at(Clock::time_point due, std::function<void()> task) {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      return;
    }
    queue_.push(Item{due, seq_++, std::move(task)});
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        return;
      }
      stopping_ = true;
      cv_.notify_all();
    }
    thread_.join();
    // Dropping pending tasks drops their streams: the server answers 500 on our behalf.
    std::lock_guard lock(mutex_);
    queue_ = {};
  }

 private:
  struct Item {
    Clock::time_point due;
    std::uint64_t seq;
    std::function<void()> task;
    bool operator>(const Item& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };
  void run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto due = queue_.top().due;
      if (Clock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      auto task = queue_.top().task;
      queue_.pop();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mutex_;  // guards queue_, stopping_, seq_
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  bool stopping_ = false;
  std::uint64_t seq_ = 0;
  std::thread thread_;
};

Response redfishError(unsigned status, const std::string& id, const std::string& message) {
  json body{{"error",
             {{"code", "Base.1.8." + id},
              {"message", message},
              {"@Message.ExtendedInfo",
               json::array({{{"MessageId", "Base.1.8." + id}, {"Message", message}}})}}}};
  return Response::json(status, body);
}

Response h3Reply(unsigned status, const std::string& action, bool result,
                 const std::string& remark) {
  json body{{"Action", action}, {"Result", json::array({result})}, {"Remark", remark}};
  return Response::json(status, body);
}

std::string etagOf(char kind, std::uint64_t version) {
  std::string tag = "\"";
  tag.push_back(kind);
  tag.append(std::to_string(version)).push_back('"');
  return tag;
}

std::string redfishUuid(const std::string& uuid) {
  // Redfish UUIDs carry no "GPU-" prefix (nvidia-smi's spelling); the driver adds it back.
  return uuid.rfind("GPU-", 0) == 0 ? uuid.substr(4) : uuid;
}

Response malformedReply(const Fault& f) {
  if (f.bodyBytes > 0) {
    return Response::text(200, std::string(f.bodyBytes, '['), "application/json");
  }
  return Response::text(200, f.body, "application/json");
}

}  // namespace

class SimServer::Impl {
 public:
  Impl(std::shared_ptr<ChassisModel> model, SimServerOptions options)
      : model_(std::move(model)), options_(std::move(options)) {
    net::ServerOptions so;
    so.bindAddress = options_.bindAddress;
    so.port = options_.port;
    so.ioThreads = options_.ioThreads;
    so.tls = options_.tls;
    so.bodyLimit = 256 * 1024;  // allocation requests are tiny; faults may carry a body
    server_ = std::make_unique<net::HttpServer>(so);
    server_->routePrefixStream("", "/",
                               [this](const Request& req, std::shared_ptr<ResponseStream> stream) {
                                 dispatch(req, std::move(stream));
                               });
  }

  Result<std::uint16_t> start() { return server_->start(); }
  void stop() {
    timer_.stop();
    server_->stop(std::chrono::milliseconds(500));
  }
  std::string baseUrl() const { return server_->baseUrl(); }

 private:
  // --- plumbing ---------------------------------------------------------------------------

  // Sends `make()` after `delay` (at once when 0).
  void later(Millis delay, std::shared_ptr<ResponseStream> stream, std::function<Response()> make) {
    if (delay.count() <= 0) {
      stream->send(make());
      return;
    }
    timer_.at(Clock::now() + delay, [stream, make = std::move(make)] { stream->send(make()); });
  }

  // Applies latency and the hang fault around an operation; `apply` sees the other faults.
  void operation(const std::string& chassis, Op op, const std::string& gid,
                 std::shared_ptr<ResponseStream> stream,
                 std::function<Response(const std::optional<Fault>&)> apply) {
    Plan plan = model_->plan(chassis, op, gid);
    model_->count(chassis, toString(op));
    if (plan.fault && plan.fault->kind == FaultKind::kHang) {
      later(plan.fault->hang, std::move(stream), [] {
        return Response::error(504, "hang", "simulated hang: the chassis never answered in time");
      });
      return;
    }
    later(plan.delay, std::move(stream),
          [apply = std::move(apply), fault = plan.fault] { return apply(fault); });
  }

  bool authorizedBasic(const Request& req) const {
    if (!options_.credentials) {
      return true;
    }
    const auto auth = req.header("Authorization");
    return auth && *auth == "Basic " + base64Encode(options_.credentials->username + ":" +
                                                    options_.credentials->password);
  }

  void dispatch(const Request& req, std::shared_ptr<ResponseStream> stream) {
    const std::string& path = req.path;
    if (path.rfind("/sim/v1/", 0) == 0) {
      stream->send(control(req));
      return;
    }
    std::string chassis;
    std::string rest;
    std::string prefix;
    static const std::string kChassis = "/chassis/";
    if (path.rfind(kChassis, 0) == 0) {
      const auto slash = path.find('/', kChassis.size());
      chassis = path.substr(kChassis.size(), slash == std::string::npos ? std::string::npos
                                                                        : slash - kChassis.size());
      rest = slash == std::string::npos ? "" : path.substr(slash);
      prefix = kChassis + chassis;
      if (!model_->hasChassis(chassis)) {
        stream->send(Response::error(404, "not_found", "no chassis " + chassis));
        return;
      }
    } else {
      const auto names = model_->chassisNames();
      if (names.size() != 1) {
        stream->send(Response::error(
            404, "not_found",
            "several chassis are simulated: address one as /chassis/<name>" + path));
        return;
      }
      chassis = names.front();
      rest = path;
    }
    if (options_.h3 && rest.rfind("/h3api/", 0) == 0) {
      h3(req, rest, chassis, std::move(stream));
      return;
    }
    if (options_.redfish && (rest == "/redfish" || rest.rfind("/redfish/v1", 0) == 0)) {
      redfish(req, rest, chassis, prefix, std::move(stream));
      return;
    }
    stream->send(Response::error(404, "not_found", "no resource " + path));
  }

  // --- control ----------------------------------------------------------------------------

  Response control(const Request& req) {
    if (req.path == "/sim/v1/state" && req.method == "GET") {
      return Response::json(200, model_->stateJson());
    }
    if (req.path == "/sim/v1/faults" && req.method == "GET") {
      json out = json::array();
      for (const auto& f : model_->faults()) {
        out.push_back(toJson(f));
      }
      return Response::json(200, out);
    }
    if (req.path == "/sim/v1/faults" && req.method == "POST") {
      auto doc = json::parse(req.body, nullptr, false);
      if (doc.is_discarded()) {
        return Response::error(400, "invalid", "fault body is not valid JSON");
      }
      auto fault = parseFault(doc);
      if (!fault) {
        return Response::error(400, fault.error().code, fault.error().message);
      }
      if (!fault->chassis.empty() && !model_->hasChassis(fault->chassis)) {
        return Response::error(400, "invalid", "no chassis " + fault->chassis);
      }
      model_->addFault(*fault);
      return Response::json(201, toJson(*fault));
    }
    if (req.path == "/sim/v1/faults" && req.method == "DELETE") {
      model_->clearFaults();
      return Response{204, {}, {}};
    }
    if (req.path == "/sim/v1/sessions" && req.method == "DELETE") {
      model_->clearSessions();
      return Response{204, {}, {}};
    }
    return Response::error(404, "not_found", "no control endpoint " + req.method + " " + req.path);
  }

  // --- H3 Falcon dialect ------------------------------------------------------------------

  void h3(const Request& req, const std::string& rest, const std::string& chassis,
          std::shared_ptr<ResponseStream> stream) {
    if (!authorizedBasic(req)) {
      stream->send(Response::error(401, "unauthorized", "credentials required")
                       .withHeader("WWW-Authenticate", "Basic realm=\"chassis-sim\""));
      return;
    }
    if (rest == fabric::h3::kResourcesPath && req.method == "GET") {
      operation(chassis, Op::kInventory, "", std::move(stream),
                [this, chassis](const std::optional<Fault>& f) {
                  if (f && f->kind == FaultKind::kFail) {
                    return Response::text(500, "simulated failure", "text/plain");
                  }
                  if (f && f->kind == FaultKind::kMalformed) {
                    return malformedReply(*f);
                  }
                  if (f && f->kind == FaultKind::kLoseGpu && f->gpu) {
                    (void)model_->loseGpu(chassis, *f->gpu);
                  }
                  return h3Resources(chassis);
                });
      return;
    }
    if (rest == fabric::h3::kAllocationPath && (req.method == "POST" || req.method == "DELETE")) {
      const bool assign = req.method == "POST";
      const std::string action = assign ? "assign" : "unassign";
      auto parsed = fabric::h3::parseAllocationRequest(req.body, assign);
      if (!parsed) {
        stream->send(h3Reply(400, action, false, parsed.error().message));
        return;
      }
      const std::string gid = parsed->devGid;
      std::uint32_t port = 0;
      if (assign) {
        port = *fabric::h3::parsePortGid(*parsed->portGid);
      }
      operation(chassis, assign ? Op::kAssign : Op::kUnassign, gid, std::move(stream),
                [this, chassis, gid, port, assign, action](const std::optional<Fault>& f) {
                  if (f) {
                    switch (f->kind) {
                      case FaultKind::kFail:
                      case FaultKind::kPrecondition:
                        return h3Reply(200, action, false, "simulated failure");
                      case FaultKind::kBusy:
                        return Response::text(503, "busy: another operation is in progress",
                                              "text/plain");
                      case FaultKind::kMalformed:
                        return malformedReply(*f);
                      case FaultKind::kLieSuccess:
                        return h3Reply(200, action, true, "");
                      case FaultKind::kLoseGpu:
                        (void)model_->loseGpu(chassis, gid);
                        return h3Reply(200, action, true, "");
                      default:
                        break;
                    }
                  }
                  Status st =
                      assign ? model_->assign(chassis, gid, port) : model_->unassign(chassis, gid);
                  if (f && f->kind == FaultKind::kLieFailure) {
                    return h3Reply(200, action, false, "");  // the real chassis' assign quirk
                  }
                  return h3Reply(200, action, st.ok(), st.ok() ? "" : st.error().message);
                });
      return;
    }
    stream->send(Response::error(404, "not_found", "no H3 resource " + req.method + " " + rest));
  }

  Response h3Resources(const std::string& chassis) {
    const auto snap = model_->snapshot(chassis);
    json rows = json::array();
    for (const auto& g : snap->gpus) {
      rows.push_back({{"dev_type", "GPU"},
                      {"Dev_GID", g.gid},
                      {"Host_Port#", g.host ? std::to_string(*g.host) : ""},
                      {"OB_GPU_GUID", g.healthy ? g.uuid : ""}});
    }
    for (const auto& h : snap->hosts) {
      rows.push_back(
          {{"Port#", std::to_string(h.port)}, {"Port_GID", *fabric::h3::portGid(h.port)}});
    }
    return Response::json(200, rows);
  }

  // --- Redfish dialect --------------------------------------------------------------------

  struct Links {
    std::string root, systems, comp, blocks, zones, sessionService, sessions;
    bool opaque = false;
    bool emulator = false;  // RedfishProfile::kEmulator
    // emulator: the host's Compute ResourceBlock, and the system composed for one GPU.
    std::string computeBlock(std::size_t index, const Host& h) const {
      return blocks + "/" + (opaque ? "rb-c" + std::to_string(index) : h.system);
    }
    std::string composed(std::size_t index, const Gpu& g) const {
      return systems + "/" + (opaque ? "cs-" + std::to_string(index) : "composed-" + g.gid);
    }
    std::string system(std::size_t index, const Host& h) const {
      return systems + "/" + (opaque ? "sys-" + std::to_string(index) : h.system);
    }
    std::string block(std::size_t index, const Gpu& g) const {
      return blocks + "/" + (opaque ? "rb-" + std::to_string(index) : g.gid);
    }
    std::string addAction(std::size_t index, const Host& h) const {
      return system(index, h) +
             (opaque ? "/Actions/AddBlock" : "/Actions/ComputerSystem.AddResourceBlock");
    }
    std::string removeAction(std::size_t index, const Host& h) const {
      return system(index, h) +
             (opaque ? "/Actions/RemoveBlock" : "/Actions/ComputerSystem.RemoveResourceBlock");
    }
  };

  Links linksFor(const std::string& prefix) const {
    Links l;
    l.root = prefix + "/redfish/v1";
    l.systems = l.root + "/Systems";
    l.comp = l.root + "/CompositionService";
    l.blocks = l.comp + "/ResourceBlocks";
    l.zones = l.comp + "/ResourceZones";
    l.sessionService = l.root + "/SessionService";
    l.sessions = l.sessionService + "/Sessions";
    l.opaque = model_->initial().redfishUris == "opaque";
    l.emulator = model_->initial().redfishProfile == RedfishProfile::kEmulator;
    return l;
  }

  json systemJson(const Links& l, const Chassis& c, std::size_t i) const {
    const Host& h = c.hosts[i];
    json blocks = json::array();
    for (std::size_t g = 0; g < c.gpus.size(); ++g) {
      if (c.gpus[g].host == h.port) {
        blocks.push_back({{"@odata.id", l.block(g, c.gpus[g])}});
      }
    }
    return {
        {"@odata.id", l.system(i, h)},
        {"@odata.type", "#ComputerSystem.v1_20_0.ComputerSystem"},
        {"@odata.etag", etagOf('s', h.version)},
        {"Id", h.system},
        {"Name", "Host on port " + std::to_string(h.port)},
        {"SystemType", "Composed"},
        {"Boot", {{"BootSourceOverrideEnabled", "Disabled"}}},  // no override; clients expect it
        {"Links", {{"ResourceBlocks", blocks}, {"ResourceBlocks@odata.count", blocks.size()}}},
        {"Actions",
         {{std::string(fabric::redfish::kAddAction), {{"target", l.addAction(i, h)}}},
          {std::string(fabric::redfish::kRemoveAction), {{"target", l.removeAction(i, h)}}}}}};
  }

  json blockJson(const Links& l, const Chassis& c, std::size_t g) const {
    const Gpu& gpu = c.gpus[g];
    json systems = json::array();
    for (std::size_t i = 0; i < c.hosts.size(); ++i) {
      if (gpu.host == c.hosts[i].port) {
        systems.push_back({{"@odata.id", l.system(i, c.hosts[i])}});
      }
    }
    const std::string link = l.block(g, gpu);
    return {{"@odata.id", link},
            {"@odata.type", "#ResourceBlock.v1_4_0.ResourceBlock"},
            {"@odata.etag", etagOf('b', gpu.version)},
            {"Id", gpu.gid},
            {"Name", "GPU slot " + gpu.gid},
            {"ResourceBlockType", json::array({"Processor"})},
            {"Status",
             {{"State", gpu.healthy ? "Enabled" : "UnavailableOffline"},
              {"Health", gpu.healthy ? "OK" : "Critical"}}},
            {"CompositionStatus",
             {{"CompositionState", gpu.host ? "Composed" : "Unused"},
              {"Reserved", false},
              {"SharingCapable", false},
              {"MaxCompositions", 1},
              {"NumberOfCompositions", gpu.host ? 1 : 0}}},
            {"Processors", json::array({{{"@odata.id", link + "/Processors/GPU0"}}})},
            {"Processors@odata.count", 1},
            {"Links", l.emulator ? json::object()
                                 : json{{"ComputerSystems", systems},
                                        {"ComputerSystems@odata.count", systems.size()}}}};
  }

  // --- emulator profile: compute blocks, composed systems, a zone -------------------------

  const Host* hostOf(const Chassis& c, const Gpu& g) const {
    return g.host ? c.hostByPort(*g.host) : nullptr;
  }

  json computeBlockJson(const Links& l, const Chassis& c, std::size_t i) const {
    const Host& h = c.hosts[i];
    json systems = json::array();
    for (std::size_t g = 0; g < c.gpus.size(); ++g) {
      if (c.gpus[g].host == h.port) {
        systems.push_back({{"@odata.id", l.composed(g, c.gpus[g])}});
      }
    }
    const std::string link = l.computeBlock(i, h);
    return {{"@odata.id", link},
            {"@odata.type", "#ResourceBlock.v1_4_0.ResourceBlock"},
            {"Id", h.system},
            {"Name", "Compute block of host port " + std::to_string(h.port)},
            {"ResourceBlockType", json::array({"Compute"})},
            {"Status", {{"State", "Enabled"}, {"Health", "OK"}}},
            {"CompositionStatus",
             {{"CompositionState", systems.empty() ? "Unused" : "Composed"},
              {"Reserved", false},
              {"SharingCapable", true},
              {"SharingEnabled", true},
              {"MaxCompositions", 64},
              {"NumberOfCompositions", systems.size()}}},
            {"Processors", json::array({{{"@odata.id", link + "/Processors/CPU0"}}})},
            {"Links", {{"ComputerSystems", systems}}}};
  }

  json composedJson(const Links& l, const Chassis& c, std::size_t g) const {
    const Gpu& gpu = c.gpus[g];
    const Host* h = hostOf(c, gpu);
    std::size_t hi = 0;
    while (hi < c.hosts.size() && &c.hosts[hi] != h) {
      ++hi;
    }
    const std::string link = l.composed(g, gpu);
    return {{"@odata.id", link},
            {"@odata.type", "#ComputerSystem.v1_20_0.ComputerSystem"},
            {"Id", "composed-" + gpu.gid},
            {"Name", "Composed system: " + h->system + " + GPU " + gpu.gid},
            {"SystemType", "Composed"},
            {"Boot", {{"BootSourceOverrideEnabled", "Disabled"}}},
            {"Links",
             {{"ResourceBlocks", json::array({{{"@odata.id", l.computeBlock(hi, *h)}},
                                              {{"@odata.id", l.block(g, gpu)}}})}}},
            {"Actions", json::object()}};  // composed by POST, removed by DELETE: no actions
  }

  json zoneJson(const Links& l, const Chassis& c) const {
    json blocks = json::array();
    for (std::size_t i = 0; i < c.hosts.size(); ++i) {
      blocks.push_back({{"@odata.id", l.computeBlock(i, c.hosts[i])}});
    }
    for (std::size_t g = 0; g < c.gpus.size(); ++g) {
      blocks.push_back({{"@odata.id", l.block(g, c.gpus[g])}});
    }
    return {{"@odata.id", l.zones + "/1"},
            {"@odata.type", "#Zone.v1_4_0.Zone"},
            {"Id", "1"},
            {"Name", "Resource zone of the whole chassis"},
            {"Links", {{"ResourceBlocks", blocks}}},
            {"@Redfish.CollectionCapabilities",
             {{"Capabilities",
               json::array({{{"CapabilitiesObject", {{"@odata.id", l.systems + "/Capabilities"}}},
                             {"UseCase", std::string(fabric::redfish::kCompositionUseCase)},
                             {"Links", {{"TargetCollection", {{"@odata.id", l.systems}}}}}}})}}}};
  }

  json processorJson(const std::string& link, const Gpu& gpu) const {
    return {{"@odata.id", link},
            {"@odata.type", "#Processor.v1_18_0.Processor"},
            {"Id", "GPU0"},
            {"Name", "GPU"},
            {"ProcessorType", "GPU"},
            {"Manufacturer", "NVIDIA"},
            {"Model", gpu.model},
            {"UUID", redfishUuid(gpu.uuid)},
            {"Status",
             {{"State", gpu.healthy ? "Enabled" : "UnavailableOffline"},
              {"Health", gpu.healthy ? "OK" : "Critical"}}}};
  }

  // The page of a collection that starts at member `skip` (redfish.pageSize members at most).
  json collection(const Links& l, const std::string& link, const std::string& type,
                  const std::string& name, const std::vector<std::string>& members,
                  std::size_t skip) const {
    const std::size_t pageSize = model_->initial().redfishPageSize;
    const std::size_t end =
        pageSize == 0 ? members.size() : std::min(members.size(), skip + pageSize);
    json m = json::array();
    for (std::size_t i = std::min(skip, members.size()); i < end; ++i) {
      m.push_back({{"@odata.id", members[i]}});
    }
    json out{{"@odata.id", link}, {"@odata.type", type}, {"Name", name}};
    if (l.emulator) {  // members under Links, as older drafts and the DMTF emulator have them
      out["Links"] = {{"Members", m}, {"Member@odata.count", members.size()}};
    } else {
      out["Members"] = m;
      out["Members@odata.count"] = members.size();
    }
    if (end < members.size()) {
      out["Members@odata.nextLink"] = link + "?$skip=" + std::to_string(end);
    }
    return out;
  }

  // The $skip of a collection request: 0 when absent, nullopt when not a whole number.
  static std::optional<std::size_t> skipOf(const Request& req) {
    for (const auto& [key, value] : req.query) {
      if (key == "$skip") {
        std::size_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc{} || end != value.data() + value.size() || value.empty()) {
          return std::nullopt;
        }
        return n;
      }
    }
    return 0;
  }

  bool redfishAuthorized(const Request& req) const {
    if (const auto token = req.header("X-Auth-Token")) {
      return model_->validSession(*token);
    }
    if (!options_.credentials) {
      return true;
    }
    return authorizedBasic(req);
  }

  Response withEtag(json body) {
    const std::string etag = body.value("@odata.etag", "");
    Response r = Response::json(200, body);
    if (!etag.empty() && model_->initial().redfishEtagHeader) {
      r.withHeader("ETag", etag);
    }
    return r;
  }

  // $expand of a GET: kind '.', '*' or '~' and levels; nullopt when absent, an error text when
  // malformed or deeper than kMaxExpandLevels.
  struct Expand {
    char kind = '.';
    int levels = 1;
  };
  static constexpr int kMaxExpandLevels = 3;
  static Result<std::optional<Expand>> expandOf(const Request& req) {
    const auto value = req.queryParam("$expand");
    if (!value) {
      return std::optional<Expand>{};
    }
    Expand e;
    const std::string& v = *value;
    if (v.empty() || (v[0] != '.' && v[0] != '*' && v[0] != '~')) {
      return makeError(kc::errc::kInvalid,
                       "$expand must be '.', '*' or '~', optionally with ($levels=n)");
    }
    e.kind = v[0];
    if (v.size() > 1) {
      static const std::string kLevels = "($levels=";
      const std::string rest = v.substr(1);
      if (rest.rfind(kLevels, 0) != 0 || rest.back() != ')' || rest.size() != kLevels.size() + 2 ||
          rest[kLevels.size()] < '1' || rest[kLevels.size()] > '0' + kMaxExpandLevels) {
        return makeError(kc::errc::kInvalid, "$expand levels must be ($levels=n), n in 1.." +
                                                 std::to_string(kMaxExpandLevels));
      }
      e.levels = rest[kLevels.size()] - '0';
    }
    return std::optional<Expand>{e};
  }

  // DSP0266 expansion: every bare {"@odata.id"} reference (under "Links" only for '*' and '~',
  // outside it only for '.' and '*') replaced by the resource, `levels` deep.
  void expand(json& node, const Expand& e, int levels, bool inLinks, const Links& l,
              const Chassis& c) const {
    if (levels <= 0) {
      return;
    }
    const auto visit = [&](json& child, bool childInLinks) {
      if (child.is_object() && child.size() == 1 && child.contains("@odata.id") &&
          child["@odata.id"].is_string() && (childInLinks ? e.kind != '.' : e.kind != '~')) {
        if (auto r = resourceAt(l, c, child["@odata.id"].get<std::string>())) {
          child = std::move(*r);
          expand(child, e, levels - 1, false, l, c);
        }
        return;
      }
      expand(child, e, levels, childInLinks, l, c);
    };
    if (node.is_array()) {
      for (auto& item : node) {
        visit(item, inLinks);
      }
    } else if (node.is_object()) {
      for (auto& [key, child] : node.items()) {
        visit(child, inLinks || key == "Links");
      }
    }
  }

  // A member resource of the Redfish tree (systems, blocks, processors), or nullopt.
  std::optional<json> resourceAt(const Links& l, const Chassis& c, const std::string& path) const {
    for (std::size_t i = 0; i < c.hosts.size() && !l.emulator; ++i) {
      if (path == l.system(i, c.hosts[i])) {
        return systemJson(l, c, i);
      }
    }
    for (std::size_t i = 0; i < c.hosts.size() && l.emulator; ++i) {
      const std::string link = l.computeBlock(i, c.hosts[i]);
      if (path == link) {
        return computeBlockJson(l, c, i);
      }
      if (path == link + "/Processors/CPU0") {
        return json{{"@odata.id", path},      {"@odata.type", "#Processor.v1_20_0.Processor"},
                    {"Id", "CPU0"},           {"Name", "CPU"},
                    {"ProcessorType", "CPU"}, {"Status", {{"State", "Enabled"}, {"Health", "OK"}}}};
      }
    }
    for (std::size_t g = 0; g < c.gpus.size() && l.emulator; ++g) {
      if (c.gpus[g].host && path == l.composed(g, c.gpus[g])) {
        return composedJson(l, c, g);
      }
    }
    for (std::size_t g = 0; g < c.gpus.size(); ++g) {
      const std::string link = l.block(g, c.gpus[g]);
      if (path == link) {
        return blockJson(l, c, g);
      }
      if (path == link + "/Processors/GPU0") {
        return processorJson(path, c.gpus[g]);
      }
    }
    return std::nullopt;
  }

  json compositionServiceJson(const Links& l) const {
    json body{{"@odata.id", l.comp},
              {"@odata.type", "#CompositionService.v1_2_0.CompositionService"},
              {"Id", "CompositionService"},
              {"Name", "Composition Service"},
              {"ServiceEnabled", true},
              {"ResourceBlocks", {{"@odata.id", l.blocks}}}};
    if (l.emulator) {
      body["ResourceZones"] = {{"@odata.id", l.zones}};
      body["AllowOverprovisioning"] = false;
      body["AllowZoneAffinity"] = true;
    }
    return body;
  }

  // The body of a Redfish GET other than the ResourceBlocks collection, or nullopt (404).
  std::optional<json> redfishGetJson(const Links& l, const Chassis& c, const std::string& path,
                                     std::size_t skip) const {
    if (path == l.comp) {
      return compositionServiceJson(l);
    }
    if (l.emulator && path == l.zones) {
      return collection(l, l.zones, "#ZoneCollection.ZoneCollection", "Resource Zones",
                        {l.zones + "/1"}, skip);
    }
    if (l.emulator && path == l.zones + "/1") {
      return zoneJson(l, c);
    }
    if (path == l.systems) {
      std::vector<std::string> members;
      for (std::size_t g = 0; g < c.gpus.size() && l.emulator; ++g) {
        if (c.gpus[g].host) {
          members.push_back(l.composed(g, c.gpus[g]));
        }
      }
      for (std::size_t i = 0; i < c.hosts.size() && !l.emulator; ++i) {
        members.push_back(l.system(i, c.hosts[i]));
      }
      return collection(l, l.systems, "#ComputerSystemCollection.ComputerSystemCollection",
                        "Systems", members, skip);
    }
    return resourceAt(l, c, path);
  }

  void redfishGet(const Request& req, const Links& l, const Chassis& c, const std::string& chassis,
                  const std::string& path, std::shared_ptr<ResponseStream> stream) {
    const auto skip = skipOf(req);
    if (!skip) {
      stream->send(
          redfishError(400, "QueryParameterValueTypeError", "$skip must be a whole number"));
      return;
    }
    const auto ex = expandOf(req);
    if (!ex) {
      stream->send(redfishError(400, "QueryParameterValueFormatError", ex.error().message));
      return;
    }
    if (path == l.blocks) {
      // The inventory read: latency and inventory faults apply here.
      operation(chassis, Op::kInventory, "", std::move(stream),
                [this, chassis, l, skip = *skip, e = *ex](const std::optional<Fault>& f) {
                  if (f && f->kind == FaultKind::kFail) {
                    return redfishError(500, "InternalError", "simulated failure");
                  }
                  if (f && f->kind == FaultKind::kMalformed) {
                    return malformedReply(*f);
                  }
                  if (f && f->kind == FaultKind::kLoseGpu && f->gpu) {
                    (void)model_->loseGpu(chassis, *f->gpu);
                  }
                  const auto now = model_->snapshot(chassis);
                  std::vector<std::string> members;
                  for (std::size_t g = 0; g < now->gpus.size(); ++g) {
                    members.push_back(l.block(g, now->gpus[g]));
                  }
                  for (std::size_t i = 0; i < now->hosts.size() && l.emulator; ++i) {
                    members.push_back(l.computeBlock(i, now->hosts[i]));
                  }
                  json body =
                      collection(l, l.blocks, "#ResourceBlockCollection.ResourceBlockCollection",
                                 "Resource Blocks", members, skip);
                  if (e) {
                    expand(body, *e, e->levels, false, l, *now);
                  }
                  return Response::json(200, body);
                });
      return;
    }
    auto body = redfishGetJson(l, c, path, *skip);
    if (!body) {
      stream->send(
          redfishError(404, "ResourceMissingAtURI", "no resource " + req.method + " " + path));
      return;
    }
    if (*ex) {
      expand(*body, **ex, (*ex)->levels, false, l, c);
    }
    stream->send(withEtag(std::move(*body)));
  }

  void redfish(const Request& req, const std::string& rest, const std::string& chassis,
               const std::string& prefix, std::shared_ptr<ResponseStream> stream) {
    if (req.method == "GET" && options_.redfishGetLatency.count() > 0) {
      // A BMC's time per request; the handling itself runs on the timer thread, later.
      timer_.at(Clock::now() + options_.redfishGetLatency,
                [this, req, rest, chassis, prefix, stream]() mutable {
                  redfishNow(req, rest, chassis, prefix, std::move(stream));
                });
      return;
    }
    redfishNow(req, rest, chassis, prefix, std::move(stream));
  }

  void redfishNow(const Request& req, const std::string& rest, const std::string& chassis,
                  const std::string& prefix, std::shared_ptr<ResponseStream> stream) {
    const Links l = linksFor(prefix);
    std::string path = prefix + rest;
    if (l.emulator) {
      // Trailing-slash routes, as Flask serves them: the service root and the collections live
      // at "<link>/" only. The slash-less form (the one @odata.id links name) is redirected with
      // 308, method and body kept, to an absolute URL as werkzeug writes it.
      const auto slashRoute = [&l](const std::string& p) {
        return p == l.root || p == l.systems || p == l.blocks || p == l.zones || p == l.sessions;
      };
      if (slashRoute(path)) {
        const auto q = req.target.find('?');
        const auto host = req.header("Host");
        const std::string origin =
            host ? std::string(req.tls ? "https://" : "http://") + *host : std::string();
        stream->send(
            Response::text(308, "Permanent Redirect")
                .withHeader("Location", origin + path + "/" +
                                            (q == std::string::npos ? "" : req.target.substr(q))));
        return;
      }
      if (path.size() > 1 && path.back() == '/' && slashRoute(path.substr(0, path.size() - 1))) {
        path.pop_back();
      }
    }
    if ((path == l.root || path == l.root + "/") && req.method == "GET") {
      json root{{"@odata.id", l.emulator ? l.root + "/" : l.root},
                {"@odata.type", "#ServiceRoot.v1_15_0.ServiceRoot"},
                {"Id", "RootService"},
                {"Name", "chassis-sim " + chassis + " (test double)"},
                {"RedfishVersion", "1.17.0"},
                {"Systems", {{"@odata.id", l.systems}}},
                {"CompositionService", {{"@odata.id", l.comp}}},
                {"SessionService", {{"@odata.id", l.sessionService}}},
                {"Links", {{"Sessions", {{"@odata.id", l.sessions}}}}}};
      if (fabricProfile()) {
        root.erase("CompositionService");
        root["Fabrics"] = {{"@odata.id", l.root + "/Fabrics"}};
      } else if (!l.emulator) {
        // As the DMTF mockups advertise it; the emulator profile, like the DMTF emulator, does
        // not.
        root["ProtocolFeaturesSupported"] = {{"ExpandQuery",
                                              {{"ExpandAll", true},
                                               {"NoLinks", true},
                                               {"Links", true},
                                               {"Levels", true},
                                               {"MaxLevels", kMaxExpandLevels}}}};
      }
      stream->send(Response::json(200, root));
      return;
    }
    if (path == l.sessions && req.method == "POST") {
      auto login = fabric::redfish::parseLogin(req.body);
      if (!login) {
        stream->send(redfishError(400, "MalformedJSON", login.error().message));
        return;
      }
      if (options_.credentials && (login->user != options_.credentials->username ||
                                   login->password != options_.credentials->password)) {
        stream->send(redfishError(401, "InsufficientPrivilege", "invalid user name or password"));
        return;
      }
      const auto session = model_->createSession(login->user);
      const std::string link = l.sessions + "/" + session.id;
      Response r = Response::json(201, {{"@odata.id", link},
                                        {"@odata.type", "#Session.v1_6_0.Session"},
                                        {"Id", session.id},
                                        {"Name", "User session " + session.id},
                                        {"UserName", login->user}});
      r.withHeader("X-Auth-Token", session.token).withHeader("Location", link);
      stream->send(std::move(r));
      return;
    }
    if (!redfishAuthorized(req)) {
      stream->send(redfishError(401, "NoValidSession", "authentication required")
                       .withHeader("WWW-Authenticate", "Basic realm=\"chassis-sim\""));
      return;
    }
    if (path.rfind(l.sessions + "/", 0) == 0 && req.method == "DELETE") {
      const bool gone = model_->deleteSession(path.substr(l.sessions.size() + 1));
      stream->send(gone ? Response{204, {}, {}}
                        : redfishError(404, "ResourceMissingAtURI", "no such session"));
      return;
    }
    if (path == l.sessionService && req.method == "GET") {
      stream->send(Response::json(200, {{"@odata.id", l.sessionService},
                                        {"@odata.type", "#SessionService.v1_1_9.SessionService"},
                                        {"Id", "SessionService"},
                                        {"Name", "Session Service"},
                                        {"ServiceEnabled", true},
                                        {"Sessions", {{"@odata.id", l.sessions}}}}));
      return;
    }
    const auto snap = model_->snapshot(chassis);
    const Chassis& c = *snap;
    if (fabricProfile()) {
      fabricRequest(req, chassis, prefix, path, c, std::move(stream));
      return;
    }
    if (req.method == "GET") {
      redfishGet(req, l, c, chassis, path, std::move(stream));
      return;
    }
    if (l.emulator && req.method == "POST" && path == l.systems) {
      compose(req, l, c, chassis, std::move(stream));
      return;
    }
    if (l.emulator && req.method == "DELETE") {
      for (std::size_t g = 0; g < c.gpus.size(); ++g) {
        if (c.gpus[g].host && path == l.composed(g, c.gpus[g])) {
          moveOperation(chassis, c.gpus[g].gid, *c.gpus[g].host, false, Response{200, {}, {}},
                        std::move(stream));
          return;
        }
      }
    }
    if (req.method == "POST" && !l.emulator) {
      for (std::size_t i = 0; i < c.hosts.size(); ++i) {
        const bool add = path == l.addAction(i, c.hosts[i]);
        if (add || path == l.removeAction(i, c.hosts[i])) {
          blockAction(req, l, c, i, add, chassis, std::move(stream));
          return;
        }
      }
    }
    stream->send(
        redfishError(404, "ResourceMissingAtURI", "no resource " + req.method + " " + path));
  }

  void blockAction(const Request& req, const Links& l, const Chassis& c, std::size_t hostIndex,
                   bool add, const std::string& chassis, std::shared_ptr<ResponseStream> stream) {
    auto action = fabric::redfish::parseBlockAction(req.body);
    if (!action) {
      stream->send(redfishError(400, "ActionParameterMissing", action.error().message));
      return;
    }
    const Host& host = c.hosts[hostIndex];
    const Gpu* gpu = nullptr;
    for (std::size_t g = 0; g < c.gpus.size(); ++g) {
      if (l.block(g, c.gpus[g]) == action->block) {
        gpu = &c.gpus[g];
      }
    }
    if (!gpu) {
      stream->send(redfishError(400, "ResourceBlockNotFound",
                                "resource block " + action->block + " is not found"));
      return;
    }
    const bool etagsMissing = !action->blockEtag || !action->systemEtag;
    if ((model_->initial().redfishRequireEtags && etagsMissing) ||
        (action->blockEtag && *action->blockEtag != etagOf('b', gpu->version)) ||
        (action->systemEtag && *action->systemEtag != etagOf('s', host.version))) {
      stream->send(redfishError(428, "PreconditionRequired",
                                "ResourceBlockETag/ComputerSystemETag missing or not current"));
      return;
    }
    moveOperation(chassis, gpu->gid, host.port, add, Response{204, {}, {}}, std::move(stream));
  }

  // emulator: POST <Systems> {"Links":{"ResourceBlocks":[compute, gpu]}} composes one GPU
  // with one host; answered 200 with the new system (as the DMTF emulator answers).
  void compose(const Request& req, const Links& l, const Chassis& c, const std::string& chassis,
               std::shared_ptr<ResponseStream> stream) {
    auto request = fabric::redfish::parseComposeRequest(req.body);
    if (!request) {
      stream->send(redfishError(400, "PropertyMissing", request.error().message));
      return;
    }
    if (request->id.empty()) {
      // What the DMTF Redfish Interface Emulator answers a composition without an Id.
      stream->send(redfishError(400, "PropertyMissing", "Missing attribute: Id"));
      return;
    }
    const auto* blocks = &request->blocks;
    std::optional<std::size_t> host;
    std::optional<std::size_t> gpu;
    for (const auto& link : *blocks) {
      bool known = false;
      for (std::size_t i = 0; i < c.hosts.size(); ++i) {
        if (link == l.computeBlock(i, c.hosts[i])) {
          known = !host.has_value();
          host = i;
        }
      }
      for (std::size_t g = 0; g < c.gpus.size(); ++g) {
        if (link == l.block(g, c.gpus[g])) {
          known = !gpu.has_value();
          gpu = g;
        }
      }
      if (!known) {
        stream->send(redfishError(400, "PropertyValueNotInList",
                                  "Links.ResourceBlocks: " + link +
                                      " is unknown or a second block of its kind; this chassis "
                                      "composes one Compute block with one GPU block"));
        return;
      }
    }
    if (!host || !gpu) {
      stream->send(redfishError(400, "PropertyMissing",
                                "Links.ResourceBlocks needs one Compute block and one GPU block"));
      return;
    }
    const Gpu& g = c.gpus[*gpu];
    if (g.host) {
      stream->send(redfishError(409, "ResourceInUse", "resource block " + g.gid + " is composed"));
      return;
    }
    Chassis after = c;
    after.gpus[*gpu].host = c.hosts[*host].port;
    moveOperation(chassis, g.gid, c.hosts[*host].port, true,
                  Response::json(200, composedJson(l, after, *gpu)), std::move(stream));
  }

  // --- fabric profile: DSP0268 Endpoints and Connections (redfish_fabric.hpp) ------------

  bool fabricProfile() const { return model_->initial().redfishProfile == RedfishProfile::kFabric; }

  void fabricRequest(const Request& req, const std::string& chassis, const std::string& prefix,
                     const std::string& path, const Chassis& c,
                     std::shared_ptr<ResponseStream> stream) {
    const auto u = fabric_profile::urisFor(prefix);
    if (req.method == "GET" && path == u.endpoints) {
      // The inventory read: latency and inventory faults apply here.
      operation(chassis, Op::kInventory, "", std::move(stream),
                [this, chassis, u](const std::optional<Fault>& f) {
                  if (f && f->kind == FaultKind::kFail) {
                    return redfishError(500, "InternalError", "simulated failure");
                  }
                  if (f && f->kind == FaultKind::kMalformed) {
                    return malformedReply(*f);
                  }
                  if (f && f->kind == FaultKind::kLoseGpu && f->gpu) {
                    (void)model_->loseGpu(chassis, *f->gpu);
                  }
                  return Response::json(
                      200, fabric_profile::endpointsCollection(u, *model_->snapshot(chassis)));
                });
      return;
    }
    if (req.method == "GET") {
      auto body = fabric_profile::resourceAt(u, c, path);
      stream->send(body ? withEtag(std::move(*body))
                        : redfishError(404, "ResourceMissingAtURI", "no resource GET " + path));
      return;
    }
    if (req.method == "POST" && path == u.connections) {
      auto connect = fabric_profile::resolveConnect(u, c, req.body);
      if (!connect) {
        const bool conflict = connect.error().code == kc::errc::kConflict;
        stream->send(redfishError(conflict ? 409 : 400,
                                  conflict ? "ResourceInUse" : "PropertyValueNotInList",
                                  connect.error().message));
        return;
      }
      Chassis after = c;
      Gpu& gpu = *after.gpu(connect->gid);
      gpu.host = connect->port;
      Response created = Response::json(201, fabric_profile::connectionJson(u, after, gpu));
      created.withHeader("Location", fabric_profile::connectionLink(u, gpu));
      moveOperation(chassis, connect->gid, connect->port, true, std::move(created),
                    std::move(stream));
      return;
    }
    if (req.method == "DELETE") {
      if (const Gpu* gpu = fabric_profile::connectionGpu(u, c, path)) {
        moveOperation(chassis, gpu->gid, *gpu->host, false, Response{204, {}, {}},
                      std::move(stream));
        return;
      }
    }
    stream->send(
        redfishError(404, "ResourceMissingAtURI", "no resource " + req.method + " " + path));
  }

  // One assign/unassign through latency and faults; `ok` is the reply when it works.
  void moveOperation(const std::string& chassis, const std::string& gid, std::uint32_t port,
                     bool add, Response ok, std::shared_ptr<ResponseStream> stream) {
    operation(chassis, add ? Op::kAssign : Op::kUnassign, gid, std::move(stream),
              [this, chassis, gid, port, add, ok](const std::optional<Fault>& f) {
                if (f) {
                  switch (f->kind) {
                    case FaultKind::kFail:
                      return redfishError(500, "InternalError", "simulated failure");
                    case FaultKind::kPrecondition:
                      return redfishError(428, "PreconditionRequired", "simulated stale ETag");
                    case FaultKind::kBusy:
                      return redfishError(503, "ServiceTemporarilyUnavailable",
                                          "another operation is in progress");
                    case FaultKind::kMalformed:
                      return malformedReply(*f);
                    case FaultKind::kLieSuccess:
                      return ok;
                    case FaultKind::kLoseGpu:
                      (void)model_->loseGpu(chassis, gid);
                      return ok;
                    default:
                      break;
                  }
                }
                Status st =
                    add ? model_->assign(chassis, gid, port) : model_->unassign(chassis, gid, port);
                if (f && f->kind == FaultKind::kLieFailure) {
                  return redfishError(500, "InternalError", "simulated failure report");
                }
                if (!st.ok()) {
                  const unsigned code = st.error().code == kc::errc::kNotFound ? 404 : 400;
                  return redfishError(code,
                                      st.error().code == kc::errc::kConflict ? "ResourceInUse"
                                                                             : "ActionNotSupported",
                                      st.error().message);
                }
                return ok;
              });
  }

  std::shared_ptr<ChassisModel> model_;
  SimServerOptions options_;
  std::unique_ptr<net::HttpServer> server_;
  Timer timer_;
};

SimServer::SimServer(std::shared_ptr<ChassisModel> model, SimServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}
SimServer::~SimServer() {
  impl_->stop();
}
Result<std::uint16_t> SimServer::start() {
  return impl_->start();
}
void SimServer::stop() {
  impl_->stop();
}
std::string SimServer::baseUrl() const {
  return impl_->baseUrl();
}
std::string SimServer::chassisUrl(const std::string& chassis) const {
  return impl_->baseUrl() + "/chassis/" + chassis;
}

}  // namespace kc::chassis_sim
