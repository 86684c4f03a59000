#include "tools/kube-apiserver-double/api_server.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "tools/kube-apiserver-double/event_conversion.hpp"
#include "tools/kube-apiserver-double/patch.hpp"
#include "tools/kube-apiserver-double/table_convertor.hpp"

namespace kc::apiserver {

using nlohmann::json;

namespace {

net::Response jsonResponse(unsigned status, std::string body) {
  net::Response r;
  r.status = status;
  r.body = std::move(body);
  r.withHeader("Content-Type", "application/json");
  r.withHeader("Cache-Control", "no-cache, private");
  return r;
}

net::Response statusResponse(const ApiError& e) {
  net::Response r = jsonResponse(static_cast<unsigned>(e.code()), e.toStatus().dump());
  // As the real server: a suggested retry delay also goes out as Retry-After.
  if (e.details().is_object() && e.details().value("retryAfterSeconds", 0) > 0) {
    r.withHeader("Retry-After", std::to_string(e.details().value("retryAfterSeconds", 0)));
  }
  return r;
}

// DeleteOptions from a DELETE body or an Eviction's deleteOptions (preconditions,
// propagationPolicy, orphanDependents, gracePeriodSeconds).
DeleteOptions deleteOptionsFrom(const json& body) {
  DeleteOptions opts;
  if (body.is_null()) {
    return opts;
  }
  if (!body.is_object()) {
    throw badRequest("DeleteOptions must be a JSON object");
  }
  if (auto dry = body.find("dryRun"); dry != body.end() && dry->is_array() && !dry->empty()) {
    throw badRequest("dryRun is not supported by the API test double");
  }
  if (body.contains("preconditions") && body["preconditions"].is_object()) {
    const json& p = body["preconditions"];
    if (p.contains("uid") && p["uid"].is_string()) {
      opts.preconditionUid = p["uid"].get<std::string>();
    }
    if (p.contains("resourceVersion") && p["resourceVersion"].is_string()) {
      opts.preconditionResourceVersion = p["resourceVersion"].get<std::string>();
    }
  }
  if (body.contains("propagationPolicy") && body["propagationPolicy"].is_string()) {
    opts.propagationPolicy = body["propagationPolicy"].get<std::string>();
  }
  if (body.value("orphanDependents", false)) {
    opts.propagationPolicy = "Orphan";
  }
  if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number_integer()) {
    opts.gracePeriodSeconds = body["gracePeriodSeconds"].get<std::int64_t>();
  }
  return opts;
}

net::Response successStatus(unsigned code, json details = nullptr) {
  json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Success"}};
  if (!details.is_null()) {
    s["details"] = std::move(details);
  }
  s["code"] = code;
  return jsonResponse(code, s.dump());
}

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string seg =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!seg.empty()) {
      out.push_back(seg);
    }
    if (slash == std::string::npos) {
      break;
    }
    start = slash + 1;
  }
  return out;
}

std::string mediaType(const net::Request& r) {
  std::string ct = r.header("Content-Type").value_or("");
  if (auto semi = ct.find(';'); semi != std::string::npos) {
    ct = ct.substr(0, semi);
  }
  while (!ct.empty() && ct.back() == ' ') {
    ct.pop_back();
  }
  return ct;
}

json parseBody(const net::Request& r) {
  std::string ct = mediaType(r);
  if (!ct.empty() && ct != "application/json" && ct != "*/*") {
    throw unsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json");
  }
  json body = json::parse(r.body, nullptr, false);
  if (body.is_discarded()) {
    throw badRequest("the body of the request could not be decoded as JSON");
  }
  return body;
}

// Go's strconv.ParseBool spellings of true (python-kubernetes sends "True").
bool truthy(const std::optional<std::string>& v) {
  return v && (*v == "true" || *v == "1" || *v == "t" || *v == "T" || *v == "TRUE" || *v == "True");
}

std::int64_t intParam(const net::Request& r, const char* name, std::int64_t fallback) {
  auto v = r.queryParam(name);
  if (!v || v->empty()) {
    return fallback;
  }
  try {
    size_t pos = 0;
    long long n = std::stoll(*v, &pos);
    if (pos != v->size()) {
      throw std::invalid_argument(name);
    }
    return n;
  } catch (const std::exception&) {
    throw badRequest(std::string(name) + ": Invalid value: " + json(*v).dump() +
                     ": must be an integer");
  }
}

// Content negotiation for server-side printing: the first Accept alternative the double can
// serve wins. application/json;as=Table;g=meta.k8s.io;v=v1 (or v1beta1) asks for a Table;
// plain JSON (application/json, */*) for the object itself. A client that only asked for
// Table versions we do not serve gets 406.
std::optional<TableRequest> tableRequest(const net::Request& r) {
  const std::string accept = r.header("Accept").value_or("");
  bool askedForTable = false;
  std::size_t start = 0;
  while (start <= accept.size()) {
    std::size_t comma = accept.find(',', start);
    std::string alt =
        accept.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? accept.size() + 1 : comma + 1;
    std::map<std::string, std::string> params;
    std::string type;
    std::size_t pos = 0;
    bool first = true;
    while (pos <= alt.size()) {
      std::size_t semi = alt.find(';', pos);
      std::string part =
          alt.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
      pos = semi == std::string::npos ? alt.size() + 1 : semi + 1;
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (first) {
        type = part;
        first = false;
      } else if (auto eq = part.find('='); eq != std::string::npos) {
        params[part.substr(0, eq)] = part.substr(eq + 1);
      }
    }
    if (type.empty()) {
      continue;
    }
    if (params.count("as")) {
      if (params["as"] == "Table" && params["g"] == "meta.k8s.io" &&
          (params["v"] == "v1" || params["v"] == "v1beta1") &&
          (type == "application/json" || type == "*/*")) {
        TableRequest t;
        t.apiVersion = "meta.k8s.io/" + params["v"];
        const std::string include = r.queryParam("includeObject").value_or("");
        if (include.empty() || include == "Metadata") {
          t.include = IncludeObject::kMetadata;
        } else if (include == "None") {
          t.include = IncludeObject::kNone;
        } else if (include == "Object") {
          t.include = IncludeObject::kObject;
        } else {
          throw badRequest("includeObject: Unsupported value: " + json(include).dump() +
                           ": supported values: \"Metadata\", \"None\", \"Object\"");
        }
        return t;
      }
      askedForTable = askedForTable || params["as"] == "Table";
      continue;
    }
    if (type == "application/json" || type == "*/*" || type == "application/*") {
      return std::nullopt;
    }
  }
  if (askedForTable) {
    throw ApiError(406, "NotAcceptable",
                   "only the following media types are accepted: application/json, "
                   "application/json;as=Table;v=v1;g=meta.k8s.io, "
                   "application/json;as=Table;v=v1beta1;g=meta.k8s.io");
  }
  return std::nullopt;
}

TableConvertor convertorFor(const ResourceInfo& res, const std::string& version) {
  if (!res.custom) {
    return TableConvertor(res.group, res.resource, nullptr);
  }
  static const std::vector<PrinterColumn> kNone;
  auto it = res.printerColumns.find(version);
  return TableConvertor(res.group, res.resource,
                        it == res.printerColumns.end() ? &kNone : &it->second);
}

// How a request's resource maps onto storage: itself, or, for events.k8s.io/v1 events, the
// core/v1 events with renamed fields (one storage, as on the real server).
class StorageView {
 public:
  // Copies what it needs: a watch keeps its view after the request's ResourceInfo is gone.
  StorageView(ResourceInfo served, std::optional<ResourceInfo> coreEvents, std::string apiVersion)
      : served_(std::move(served)),
        coreEvents_(std::move(coreEvents)),
        apiVersion_(std::move(apiVersion)) {}

  const ResourceInfo& stored() const { return coreEvents_ ? *coreEvents_ : served_; }
  bool converted() const { return coreEvents_.has_value(); }

  // The full object (apiVersion and kind included) as the client sees it.
  json object(const StoredObject& o) const {
    if (coreEvents_) {
      return eventsV1FromCoreEvent(o.object);
    }
    json full = o.object;
    full["apiVersion"] = apiVersion_;
    full["kind"] = served_.kind;
    return full;
  }
  std::string objectJson(const StoredObject& o) const {
    return coreEvents_ ? object(o).dump() : o.fullJson(apiVersion_, served_.kind);
  }
  // A LIST item: built-in types without kind/apiVersion, custom resources with them.
  std::string itemJson(const StoredObject& o) const {
    if (coreEvents_) {
      json j = object(o);
      j.erase("apiVersion");
      j.erase("kind");
      return j.dump();
    }
    return served_.custom ? o.fullJson(apiVersion_, served_.kind) : o.itemJson;
  }
  json toStorage(json body) const { return coreEvents_ ? coreEventFromEventsV1(body) : body; }
  // A field selector in storage terms; labels are checked against the served resource.
  std::string fieldSelector(const std::string& selector) const {
    if (!coreEvents_ || selector.empty()) {
      return selector;
    }
    if (auto parsed = FieldSelector::parse(selector, served_.fieldLabels); !parsed) {
      throw badRequest(parsed.error().message);
    }
    return coreEventFieldSelector(selector);
  }

 private:
  ResourceInfo served_;
  std::optional<ResourceInfo> coreEvents_;
  std::string apiVersion_;
};

// An error of the core events storage, named as the events.k8s.io resource the client used.
ApiError asEventsV1Error(const ApiError& e) {
  std::string message = e.what();
  const std::string core = "events \"";
  if (auto at = message.find(core); at != std::string::npos) {
    message.replace(at, core.size(), "events.events.k8s.io \"");
  }
  json details = e.details();
  if (details.is_object() && details.value("kind", "") == "events" && !details.contains("group")) {
    details["group"] = "events.k8s.io";
  }
  return ApiError(e.code(), e.reason(), message, details);
}

std::string tableJson(const TableRequest& t, const TableConvertor& conv, std::uint64_t rv,
                      const std::string& cont, const std::vector<ObjectPtr>& items,
                      std::chrono::system_clock::time_point now, const StorageView& view) {
  json meta = {{"resourceVersion", std::to_string(rv)}};
  if (!cont.empty()) {
    meta["continue"] = cont;
  }
  json rows = json::array();
  for (const auto& o : items) {
    rows.push_back(conv.row(view.object(*o), now, t));
  }
  return json{{"kind", "Table"},
              {"apiVersion", t.apiVersion},
              {"metadata", meta},
              {"columnDefinitions", conv.columnDefinitions()},
              {"rows", rows}}
      .dump();
}

// Writes to kc::net's stream; the status line goes out with the first byte.
class StreamSink : public WatchSink {
 public:
  explicit StreamSink(std::shared_ptr<net::ResponseStream> s) : stream_(std::move(s)) {}
  bool write(const std::string& data) override {
    ensureBegun();
    return stream_->write(data);
  }
  void end() override {
    ensureBegun();
    stream_->end();
  }
  bool closed() const override { return stream_->closed(); }
  void ensureBegun() {
    std::lock_guard lock(mu_);
    if (!begun_) {
      begun_ = true;
      stream_->begin(
          200, {{"Content-Type", "application/json"}, {"Cache-Control", "no-cache, private"}});
    }
  }

 private:
  std::shared_ptr<net::ResponseStream> stream_;
  std::mutex mu_;  // guards begun_
  bool begun_ = false;
};

}  // namespace

struct ApiServer::Route {
  std::string group;
  std::string version;
  std::string ns;
  std::string resource;
  std::string name;
  std::string subresource;
};

ApiServer::ApiServer(ObjectStore& store, ApiServerOptions options, Faults faults)
    : store_(store), options_(std::move(options)), faults_(faults), rng_(options_.seed) {
  store_.setWatchFaults(faults_.expiredAsEvent, faults_.dropWatchAfterEvents,
                        faults_.dropWatchProbability);
}

void ApiServer::setFaults(const Faults& faults) {
  {
    std::lock_guard lock(faultsMu_);
    faults_ = faults;
  }
  store_.setWatchFaults(faults.expiredAsEvent, faults.dropWatchAfterEvents,
                        faults.dropWatchProbability);
}

Faults ApiServer::faults() const {
  std::lock_guard lock(faultsMu_);
  return faults_;
}

bool ApiServer::shouldFail() {
  std::lock_guard lock(faultsMu_);
  if (faults_.errorFraction <= 0) {
    return false;
  }
  std::uniform_real_distribution<double> d(0.0, 1.0);
  return d(rng_) < faults_.errorFraction;
}

ApiServer::~ApiServer() {
  {
    std::lock_guard lock(delayMu_);
    stopping_ = true;
  }
  delayCv_.notify_all();
  if (delayThread_.joinable()) {
    delayThread_.join();
  }
}

void ApiServer::enqueueDelayed(const net::Request& request,
                               std::shared_ptr<net::ResponseStream> stream,
                               std::chrono::milliseconds delay) {
  {
    std::lock_guard lock(delayMu_);
    delayed_.push_back({std::chrono::steady_clock::now() + delay, request, std::move(stream)});
    if (!delayThread_.joinable()) {
      delayThread_ = std::thread([this] { delayLoop(); });
    }
  }
  delayCv_.notify_all();
}

void ApiServer::delayLoop() {
  std::unique_lock lock(delayMu_);
  while (!stopping_) {
    if (delayed_.empty()) {
      delayCv_.wait(lock);
      continue;
    }
    auto next = std::min_element(delayed_.begin(), delayed_.end(),
                                 [](const Delayed& a, const Delayed& b) { return a.due < b.due; });
    if (std::chrono::steady_clock::now() < next->due) {
      delayCv_.wait_until(lock, next->due);
      continue;
    }
    Delayed d = std::move(*next);
    delayed_.erase(next);
    lock.unlock();
    try {
      bool streamed = false;
      net::Response r = dispatch(d.request, d.stream, streamed, /*delayApplied=*/true);
      if (!streamed) {
        d.stream->send(std::move(r));
      }
    } catch (const std::exception&) {
      d.stream->send(
          statusResponse(internalError("API test double failed to answer a delayed request")));
    }
    lock.lock();
  }
}

void ApiServer::serve(const net::Request& request, std::shared_ptr<net::ResponseStream> stream) {
  const std::string& path = request.path;
  if (path != "/livez" && path != "/readyz" && path != "/healthz" &&
      path.rfind("/_double/", 0) != 0) {
    std::chrono::milliseconds delay;
    bool watchesOnly = false;
    {
      std::lock_guard lock(faultsMu_);
      delay = faults_.delay;
      watchesOnly = faults_.delayWatchesOnly;
    }
    if (delay.count() > 0 && (!watchesOnly || truthy(request.queryParam("watch")))) {
      enqueueDelayed(request, std::move(stream), delay);
      return;
    }
  }
  bool streamed = false;
  net::Response r = dispatch(request, stream, streamed);
  if (!streamed) {
    stream->send(std::move(r));
  }
}

net::Response ApiServer::handle(const net::Request& request) {
  bool streamed = false;
  return dispatch(request, nullptr, streamed);
}

net::Response ApiServer::dispatch(const net::Request& request,
                                  const std::shared_ptr<net::ResponseStream>& stream,
                                  bool& streamed, bool delayApplied) {
  const std::string& path = request.path;
  if (path == "/livez" || path == "/readyz" || path == "/healthz") {
    return net::Response::text(200, "ok");
  }
  if (!options_.bearerToken.empty()) {
    auto auth = request.header("Authorization");
    if (!auth || *auth != "Bearer " + options_.bearerToken) {
      return statusResponse(ApiError(401, "Unauthorized", "Unauthorized"));
    }
  }
  if (path.rfind("/_double/", 0) == 0) {
    return control(request);
  }
  std::chrono::milliseconds delay;
  bool watchesOnly = false;
  {
    std::lock_guard lock(faultsMu_);
    delay = faults_.delay;
    watchesOnly = faults_.delayWatchesOnly;
  }
  if (delay.count() > 0 && !delayApplied && !stream &&
      (!watchesOnly || truthy(request.queryParam("watch")))) {
    std::this_thread::sleep_for(delay);  // handle() only (tests); serve() queues instead
  }
  if (shouldFail()) {
    return statusResponse(internalError("fault injected by the API test double"));
  }
  try {
    if (path == "/version" || path == "/version/") {
      return jsonResponse(200, json{{"major", "1"},
                                    {"minor", "30"},
                                    {"gitVersion", options_.gitVersion},
                                    {"gitCommit", "0000000000000000000000000000000000000000"},
                                    {"gitTreeState", "clean"},
                                    {"buildDate", "2026-01-01T00:00:00Z"},
                                    {"goVersion", "n/a (C++ test double)"},
                                    {"compiler", "gc"},
                                    {"platform", "linux/amd64"}}
                                   .dump());
    }
    auto segs = splitPath(path);
    if (path == "/openapi/v2") {
      // No schemas: kubectl 1.20 asks for protobuf, and an empty protobuf Document is a
      // valid, empty spec (client-side validation then skips every kind).
      if (request.header("Accept").value_or("").find("protobuf") != std::string::npos) {
        net::Response r;
        r.status = 200;
        // Go's mime parser rejects the "@" of the Accept form; the real server answers this:
        r.withHeader("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
        return r;
      }
      return jsonResponse(200, json{{"swagger", "2.0"},
                                    {"info",
                                     {{"title", "Kubernetes (kube-apiserver-double, no schemas)"},
                                      {"version", "v1.30.0"}}},
                                    {"paths", json::object()},
                                    {"definitions", json::object()}}
                                   .dump());
    }
    if (segs.size() >= 2 && segs[0] == "openapi" && segs[1] == "v3") {
      if (segs.size() == 2) {
        return jsonResponse(200, store_.openApiV3Root().dump());
      }
      std::optional<json> doc;
      if (segs.size() == 4 && segs[2] == "api") {
        doc = store_.openApiV3("", segs[3]);
      } else if (segs.size() == 5 && segs[2] == "apis") {
        doc = store_.openApiV3(segs[3], segs[4]);
      }
      if (!doc) {
        throw ApiError(404, "NotFound", "the server could not find the requested resource");
      }
      return jsonResponse(200, doc->dump());
    }
    if (segs.empty()) {
      json paths = {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"};
      return jsonResponse(200, json{{"paths", paths}}.dump());
    }
    Route route;
    size_t rest = 0;
    if (segs[0] == "api") {
      if (segs.size() == 1) {
        return jsonResponse(200, store_.apiVersions().dump());
      }
      route.version = segs[1];
      rest = 2;
    } else if (segs[0] == "apis") {
      if (segs.size() == 1) {
        return jsonResponse(200, store_.apiGroupList().dump());
      }
      route.group = segs[1];
      if (segs.size() == 2) {
        auto g = store_.apiGroup(route.group);
        if (!g) {
          throw ApiError(404, "NotFound", "the server could not find the requested resource");
        }
        return jsonResponse(200, g->dump());
      }
      route.version = segs[2];
      rest = 3;
    } else {
      throw ApiError(404, "NotFound", "the server could not find the requested resource");
    }
    if (segs.size() == rest) {
      auto list = store_.resourceList(route.group, route.version);
      if (!list) {
        throw ApiError(404, "NotFound", "the server could not find the requested resource");
      }
      if (route.group.empty()) {
        // The legacy namespaced "bindings" collection (python-kubernetes'
        // create_namespaced_binding).
        (*list)["resources"].push_back({{"name", "bindings"},
                                        {"singularName", "binding"},
                                        {"namespaced", true},
                                        {"kind", "Binding"},
                                        {"verbs", {"create"}}});
      }
      return jsonResponse(200, list->dump());
    }
    std::vector<std::string> r(segs.begin() + static_cast<long>(rest), segs.end());
    // namespaces/<ns>/<resource>... unless it is the namespace object's own subresource.
    if (r.size() >= 3 && r[0] == "namespaces" && r[2] != "status" && r[2] != "finalize") {
      route.ns = r[1];
      r.erase(r.begin(), r.begin() + 2);
    }
    if (r.empty() || r.size() > 3) {
      throw ApiError(404, "NotFound", "the server could not find the requested resource");
    }
    route.resource = r[0];
    route.name = r.size() > 1 ? r[1] : "";
    route.subresource = r.size() > 2 ? r[2] : "";
    if (route.group == "events.k8s.io") {
      try {
        return serveResource(request, route, stream, streamed);
      } catch (const ApiError& e) {
        throw asEventsV1Error(e);
      }
    }
    return serveResource(request, route, stream, streamed);
  } catch (const ApiError& e) {
    return statusResponse(e);
  } catch (const json::exception& e) {
    return statusResponse(badRequest(std::string("malformed object: ") + e.what()));
  }
}

net::Response ApiServer::serveResource(const net::Request& request, const Route& route,
                                       const std::shared_ptr<net::ResponseStream>& stream,
                                       bool& streamed) {
  const std::string& method = request.method;
  // POST namespaces/<ns>/bindings: the older form of pods/<name>/binding.
  if (route.group.empty() && route.version == "v1" && route.resource == "bindings" &&
      !route.ns.empty() && route.name.empty()) {
    if (method != "POST") {
      throw methodNotAllowed("the server does not allow this method on the requested resource");
    }
    json body = parseBody(request);
    store_.bindPod(route.ns, body.value("metadata", json::object()).value("name", ""), body);
    return successStatus(201);
  }
  auto found = store_.findResource(route.group, route.version, route.resource);
  if (!found) {
    throw ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  const ResourceInfo& res = *found;
  if (res.namespaced == false && !route.ns.empty()) {
    throw ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  const std::string apiVersion = res.apiVersion(route.version);
  const StorageView view(res,
                         res.group == "events.k8s.io" && res.resource == "events"
                             ? store_.findResource("", "v1", "events")
                             : std::nullopt,
                         apiVersion);
  const ResourceInfo& stored = view.stored();
  if (!route.subresource.empty() && !(route.subresource == "status" && res.hasStatus) &&
      !(route.subresource == "binding" && res.hasBinding) &&
      !(route.subresource == "eviction" && res.hasEviction)) {
    throw ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  auto objectResponse = [&](unsigned code, const ObjectPtr& o) {
    return jsonResponse(code, view.objectJson(*o));
  };
  if (res.namespaced && route.ns.empty() && !route.name.empty()) {
    throw ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (auto dry = request.queryParam("dryRun"); dry && !dry->empty()) {
    throw badRequest("dryRun is not supported by the API test double");
  }

  if (route.name.empty()) {
    if (method == "GET") {
      if (truthy(request.queryParam("watch"))) {
        if (!stream) {
          throw badRequest("watch requests need a streaming response");
        }
        WatchOptions wo;
        wo.ns = route.ns;
        wo.labelSelector = request.queryParam("labelSelector").value_or("");
        wo.fieldSelector = view.fieldSelector(request.queryParam("fieldSelector").value_or(""));
        wo.resourceVersion = request.queryParam("resourceVersion");
        wo.allowBookmarks = truthy(request.queryParam("allowWatchBookmarks"));
        wo.sendInitialEvents = truthy(request.queryParam("sendInitialEvents"));
        // Like the real server, timeoutSeconds=0 (or absent) means "the server's default"
        // (--min-request-timeout, 1800 s; the real server randomises it up to twice that),
        // never an endless watch. A negative value is treated the same way.
        std::int64_t timeout = intParam(request, "timeoutSeconds", 0);
        if (timeout <= 0) {
          timeout = options_.defaultWatchTimeout.count();
        }
        if (timeout > 0) {
          wo.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
        }
        if (auto table = tableRequest(request)) {
          // Each event carries a Table with the object's row; the column definitions go with
          // the first event only (kubectl reuses them for the rest, as from the real server).
          TableConvertor conv = convertorFor(res, route.version);
          auto clock = store_.clock();
          wo.render = [t = *table, conv, clock, view](const StoredObject& o, bool first) {
            json tbl = {{"kind", "Table"},
                        {"apiVersion", t.apiVersion},
                        {"metadata", {{"resourceVersion", std::to_string(o.resourceVersion)}}},
                        {"columnDefinitions", first ? conv.columnDefinitions() : json::array()},
                        {"rows", json::array({conv.row(view.object(o), clock(), t)})}};
            return tbl.dump();
          };
        } else if (view.converted()) {
          wo.render = [view](const StoredObject& o, bool) { return view.objectJson(o); };
        }
        auto sink = std::make_shared<StreamSink>(stream);
        store_.watch(stored, wo, sink);  // throws the 410 when old RVs answer with HTTP status
        sink->ensureBegun();
        streamed = true;
        return {};
      }
      ListOptions lo;
      lo.ns = route.ns;
      lo.labelSelector = request.queryParam("labelSelector").value_or("");
      lo.fieldSelector = view.fieldSelector(request.queryParam("fieldSelector").value_or(""));
      lo.resourceVersion = request.queryParam("resourceVersion");
      lo.resourceVersionMatch = request.queryParam("resourceVersionMatch").value_or("");
      lo.limit = intParam(request, "limit", 0);
      lo.continueToken = request.queryParam("continue").value_or("");
      ListResult lr = store_.list(stored, lo);
      if (auto table = tableRequest(request)) {
        return jsonResponse(200,
                            tableJson(*table, convertorFor(res, route.version), lr.resourceVersion,
                                      lr.continueToken, lr.items, store_.now(), view));
      }
      // Built-in types omit kind/apiVersion on LIST items; custom resources (unstructured
      // storage on the real server) carry them on every item.
      auto item = [&](const ObjectPtr& o) { return view.itemJson(*o); };
      std::size_t size = 128;
      for (const auto& o : lr.items) {
        size += o->itemJson.size() + apiVersion.size() + res.kind.size() + 32;
      }
      std::string body;
      body.reserve(size);
      body += "{\"kind\":";
      body += json(res.listKind).dump();
      body += ",\"apiVersion\":";
      body += json(apiVersion).dump();
      body += ",\"metadata\":{\"resourceVersion\":\"";
      body += std::to_string(lr.resourceVersion);
      body += '"';
      if (!lr.continueToken.empty()) {
        body += ",\"continue\":\"";
        body += lr.continueToken;
        body += '"';
      }
      body += "},\"items\":[";
      for (std::size_t i = 0; i < lr.items.size(); ++i) {
        if (i) {
          body += ',';
        }
        body += item(lr.items[i]);
      }
      body += "]}";
      return jsonResponse(200, std::move(body));
    }
    if (method == "POST") {
      json body = parseBody(request);
      if (view.converted()) {
        validateEventsV1Create(body);
      }
      return objectResponse(201, store_.create(stored, route.ns, view.toStorage(std::move(body))));
    }
    if (method == "DELETE") {
      ListOptions lo;
      lo.ns = route.ns;
      lo.labelSelector = request.queryParam("labelSelector").value_or("");
      lo.fieldSelector = view.fieldSelector(request.queryParam("fieldSelector").value_or(""));
      ListResult lr = store_.list(stored, lo);
      std::string body = "{\"kind\":" + json(res.listKind).dump() +
                         ",\"apiVersion\":" + json(apiVersion).dump() +
                         ",\"metadata\":{},\"items\":[";
      bool first = true;
      for (const auto& o : lr.items) {
        try {
          auto d = store_.remove(stored, o->ns, o->name, DeleteOptions{});
          body += first ? "" : ",";
          body += view.itemJson(*d.object);
          first = false;
        } catch (const ApiError& e) {
          if (e.code() != 404) {
            throw;
          }
        }
      }
      body += "]}";
      return jsonResponse(200, std::move(body));
    }
    throw methodNotAllowed("the server does not allow this method on the requested resource");
  }

  // A named object.
  const Subresource sub = route.subresource == "status" ? Subresource::kStatus : Subresource::kNone;
  if (route.subresource == "binding") {
    if (method != "POST") {
      throw methodNotAllowed("the server does not allow this method on the requested resource");
    }
    json body = parseBody(request);
    std::string bodyName = body.value("metadata", json::object()).value("name", "");
    if (!bodyName.empty() && bodyName != route.name) {
      throw badRequest("the name of the object (" + bodyName +
                       ") does not match the name on the URL (" + route.name + ")");
    }
    store_.bindPod(route.ns, route.name, body);
    return successStatus(201);
  }
  if (route.subresource == "eviction") {
    if (method != "POST") {
      throw methodNotAllowed("the server does not allow this method on the requested resource");
    }
    json body = parseBody(request);
    store_.evictPod(
        route.ns, route.name, body,
        deleteOptionsFrom(body.is_object() ? body.value("deleteOptions", json()) : json()));
    return successStatus(201);
  }
  if (method == "GET") {
    auto table = sub == Subresource::kNone ? tableRequest(request) : std::nullopt;
    ObjectPtr o = store_.get(stored, route.ns, route.name);
    if (table) {
      return jsonResponse(200, tableJson(*table, convertorFor(res, route.version),
                                         o->resourceVersion, "", {o}, store_.now(), view));
    }
    return objectResponse(200, o);
  }
  if (method == "PUT") {
    return objectResponse(
        200, store_.update(stored, route.ns, route.name, view.toStorage(parseBody(request)), sub));
  }
  if (method == "PATCH") {
    const std::string ct = mediaType(request);
    const std::string accepted =
        res.custom ? "application/json-patch+json, application/merge-patch+json, "
                     "application/apply-patch+yaml"
                   : "application/json-patch+json, application/merge-patch+json, "
                     "application/strategic-merge-patch+json, application/apply-patch+yaml";
    const bool known = ct == "application/json-patch+json" ||
                       ct == "application/merge-patch+json" ||
                       ct == "application/apply-patch+yaml" ||
                       (ct == "application/strategic-merge-patch+json" && !res.custom);
    if (!known) {
      throw unsupportedMediaType(
          "the body of the request was in an unknown format - accepted media types include: " +
          accepted);
    }
    json patch = json::parse(request.body, nullptr, false);
    if (patch.is_discarded()) {
      throw badRequest(ct == "application/apply-patch+yaml"
                           ? "the API test double accepts apply patches in their JSON form only"
                           : "the body of the request could not be decoded as JSON");
    }
    if (ct == "application/apply-patch+yaml") {
      // Server-side apply without field ownership: create when absent, else merge.
      if (request.queryParam("fieldManager").value_or("").empty()) {
        throw invalid(res.group, res.kind, route.name, "fieldManager",
                      "Required value: is required for apply patch");
      }
      try {
        store_.get(stored, route.ns, route.name);
      } catch (const ApiError& e) {
        if (e.code() != 404) {
          throw;
        }
        if (view.converted()) {
          validateEventsV1Create(patch);
        }
        return objectResponse(201, store_.create(stored, route.ns, view.toStorage(patch)));
      }
    }
    // The patch applies to the object as the client sees it (events.k8s.io field names).
    auto patchFn = [&](const json& storedObject) -> json {
      const json current = view.converted() ? eventsV1FromCoreEvent(storedObject) : storedObject;
      if (ct == "application/merge-patch+json" || ct == "application/apply-patch+yaml") {
        if (!patch.is_object()) {
          throw badRequest("a merge patch must be a JSON object");
        }
        return view.toStorage(applyMergePatch(current, patch));
      }
      Result<json> r = ct == "application/json-patch+json"
                           ? applyJsonPatch(current, patch)
                           : applyStrategicMergePatch(current, patch);
      if (!r) {
        if (r.error().code == kc::errc::kInvalid) {
          throw ApiError(422, "Invalid", r.error().message);
        }
        throw badRequest(r.error().message);
      }
      return view.toStorage(std::move(r.value()));
    };
    return objectResponse(200, store_.patch(stored, route.ns, route.name, patchFn, sub));
  }
  if (method == "DELETE" && sub == Subresource::kNone) {
    DeleteOptions opts;
    if (!request.body.empty()) {
      json body = json::parse(request.body, nullptr, false);
      if (!body.is_object()) {
        throw badRequest("the body of a DELETE must be DeleteOptions in JSON");
      }
      opts = deleteOptionsFrom(body);
    }
    if (auto p = request.queryParam("propagationPolicy"); p && !p->empty()) {
      opts.propagationPolicy = *p;
    }
    if (truthy(request.queryParam("orphanDependents"))) {
      opts.propagationPolicy = "Orphan";
    }
    DeleteResult d = store_.remove(stored, route.ns, route.name, opts);
    if (!d.deletedNow || res.returnDeletedObject) {
      return objectResponse(200, d.object);
    }
    json details = {{"name", route.name}, {"kind", res.resource}, {"uid", d.object->uid}};
    if (!res.group.empty()) {
      details["group"] = res.group;
    }
    return successStatus(200, details);
  }
  throw methodNotAllowed("the server does not allow this method on the requested resource");
}

// /_double/faults (GET/POST JSON) and /_double/compact (POST): fault control for tests.
net::Response ApiServer::control(const net::Request& request) {
  if (request.path == "/_double/compact" && request.method == "POST") {
    store_.compact();
    return jsonResponse(
        200,
        json{{"compactedResourceVersion", std::to_string(store_.currentResourceVersion())}}.dump());
  }
  if (request.path == "/_double/faults") {
    Faults f = faults();
    if (request.method == "POST" || request.method == "PUT") {
      json body = json::parse(request.body, nullptr, false);
      if (!body.is_object()) {
        return statusResponse(badRequest("faults must be a JSON object"));
      }
      try {
        f.errorFraction = body.value("errorFraction", f.errorFraction);
        f.delay = std::chrono::milliseconds(
            body.value("delayMs", static_cast<std::int64_t>(f.delay.count())));
        f.delayWatchesOnly = body.value("delayWatchesOnly", f.delayWatchesOnly);
        f.dropWatchAfterEvents = body.value("dropWatchAfterEvents", f.dropWatchAfterEvents);
        f.dropWatchProbability = body.value("dropWatchProbability", f.dropWatchProbability);
        f.expiredAsEvent = body.value("expiredAsEvent", f.expiredAsEvent);
      } catch (const json::exception& e) {
        return statusResponse(badRequest(std::string("bad fault value: ") + e.what()));
      }
      if (f.errorFraction < 0 || f.errorFraction > 1 || f.dropWatchProbability < 0 ||
          f.dropWatchProbability > 1 || f.delay.count() < 0) {
        return statusResponse(badRequest("fractions must be within [0,1] and delayMs >= 0"));
      }
      setFaults(f);
    } else if (request.method != "GET") {
      return statusResponse(methodNotAllowed("use GET or POST"));
    }
    return jsonResponse(200, json{{"errorFraction", f.errorFraction},
                                  {"delayMs", f.delay.count()},
                                  {"delayWatchesOnly", f.delayWatchesOnly},
                                  {"dropWatchAfterEvents", f.dropWatchAfterEvents},
                                  {"dropWatchProbability", f.dropWatchProbability},
                                  {"expiredAsEvent", f.expiredAsEvent}}
                                 .dump());
  }
  return statusResponse(ApiError(404, "NotFound", "no such control endpoint"));
}

}  // namespace kc::apiserver
