#pragma once
// TEST DOUBLE of IBM Cloud IAM (POST /identity/token) and the Qiskit Runtime REST API
// (/jobs...), as documented (quantum.cloud.ibm.com/docs/api/runtime, qiskit-ibm-runtime's
// URL map) with their quirks: an API-key exchange for short-lived bearer tokens (lifetime set
// by the test, expired ones answered 401), Service-CRN and IBM-API-Version required on every
// call, state.status strings "Queued"/"Running"/"Completed"/"Cancelled"/"Failed" with the
// older top-level status too, tags filter on GET /jobs, cancel 204 (409 once final), results
// only once Completed, metrics timestamps, 5 jobs per minute (429). The service's clock runs
// `skew` ahead of the client's: a token used until the last moment of its stated life is
// refused (expiredTokenCalls counts those calls). Jobs do not run circuits:
// a job is Queued for 0.3 s, then Running for `runFor`, then Completed with fixed samples, or
// Failed (reason_code 1517) when params.pubs is not an array. down()/up() stop and restart the
// listener on the same port.

#include <nlohmann/json.hpp>
#include <set>

#include "libcore/base/percent_encoding.hpp"
#include "libcore/base/rfc3339.hpp"
#include "tests/services/bridge-pod/local_jobs.hpp"

namespace kc::bridge::testing {

class QuantumDouble {
 public:
  QuantumDouble(std::string apiKey, std::string crn, std::chrono::seconds tokenLifetime)
      : apiKey_(std::move(apiKey)), crn_(std::move(crn)), tokenLifetime_(tokenLifetime) {
    listener_.up();
  }
  ~QuantumDouble() { listener_.down(); }

  std::string url() const { return listener_.base() + "/api/v1/"; }
  std::string iamUrl() const { return listener_.base() + "/identity/token"; }
  std::chrono::milliseconds runFor{1500};
  std::chrono::milliseconds skew{1100};

  void down() { listener_.down(); }
  void up() { listener_.up(); }

  std::size_t submissions() {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  int tokensIssued() {
    std::lock_guard lock(mu_);
    return tokens_;
  }
  int expiredTokenCalls() {
    std::lock_guard lock(mu_);
    return expiredCalls_;
  }
  std::string status(const std::string& id) {
    std::lock_guard lock(mu_);
    return state(jobs_.at(id)).first;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Job {
    std::string id;
    nlohmann::json request;
    std::chrono::system_clock::time_point created;
    Clock::time_point submitted;
    std::optional<Clock::time_point> cancelled;
    bool invalid = false;
  };

  static kc::net::Response error(unsigned status, const std::string& code,
                                 const std::string& message) {
    return kc::net::Response::json(
        status, {{"errors", {{{"code", code}, {"message", message}}}}, {"trace", "double"}});
  }

  kc::net::Response iam(const kc::net::Request& r) {
    if (r.header("Content-Type").value_or("").find("application/x-www-form-urlencoded") != 0) {
      return error(400, "BXNIM0109E", "Property missing or empty. Details: Content-Type");
    }
    std::map<std::string, std::string> form;
    std::string body = r.body;
    std::size_t pos = 0;
    while (pos <= body.size()) {
      auto amp = body.find('&', pos);
      std::string pair = body.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
      auto eq = pair.find('=');
      if (eq != std::string::npos) {
        form[pair.substr(0, eq)] = kc::percentDecode(pair.substr(eq + 1), true).valueOr("");
      }
      if (amp == std::string::npos) {
        break;
      }
      pos = amp + 1;
    }
    if (form["grant_type"] != "urn:ibm:params:oauth:grant-type:apikey") {
      return error(400, "BXNIM0103E", "Grant type is not supported");
    }
    if (form["apikey"] != apiKey_) {
      return error(400, "BXNIM0415E", "Provided API key could not be found.");
    }
    std::lock_guard lock(mu_);
    const std::string token = "iam-token-" + std::to_string(++tokens_);
    valid_[token] = Clock::now() + tokenLifetime_ - skew;
    const auto exp = std::chrono::duration_cast<std::chrono::seconds>(
                         (std::chrono::system_clock::now() + tokenLifetime_).time_since_epoch())
                         .count();
    return kc::net::Response::json(200, {{"access_token", token},
                                         {"refresh_token", "not_supported"},
                                         {"token_type", "Bearer"},
                                         {"expires_in", tokenLifetime_.count()},
                                         {"expiration", exp},
                                         {"scope", "ibm openid"}});
  }

  // (status string, reason) of a job now.
  std::pair<std::string, std::string> state(const Job& j) const {
    if (j.cancelled) {
      return {"Cancelled", ""};
    }
    const auto age = Clock::now() - j.submitted;
    if (age < std::chrono::milliseconds(300)) {
      return {"Queued", ""};
    }
    if (age < std::chrono::milliseconds(300) + runFor) {
      return {"Running", ""};
    }
    return j.invalid
               ? std::pair<std::string, std::string>{"Failed",
                                                     "Invalid input: params.pubs must be a list"}
               : std::pair<std::string, std::string>{"Completed", ""};
  }

  std::string rfc(std::chrono::system_clock::time_point t) const {
    return kc::formatRfc3339(t, kc::Rfc3339Precision::kMillis);
  }

  nlohmann::json view(const Job& j) const {
    auto [status, reason] = state(j);
    nlohmann::json st{{"status", status}};
    if (!reason.empty()) {
      st["reason"] = reason;
      st["reason_code"] = 1517;
    }
    return {{"id", j.id},
            {"backend", j.request["backend"]},
            {"state", st},
            {"status", status},
            {"program", {{"id", j.request["program_id"]}}},
            {"created", rfc(j.created)},
            {"tags", j.request.value("tags", nlohmann::json::array())},
            {"params", j.request["params"]}};
  }

  kc::net::Response jobs(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    // Auth and headers first, as the service does.
    const std::string auth = r.header("Authorization").value_or("");
    if (auth.rfind("Bearer ", 0) != 0 || !valid_.count(auth.substr(7))) {
      return error(401, "1218", "Unauthorized: invalid token");
    }
    if (Clock::now() >= valid_[auth.substr(7)]) {
      ++expiredCalls_;
      return error(401, "1219", "Unauthorized: token expired");
    }
    if (r.header("Service-CRN").value_or("") != crn_) {
      return error(401, "1234", "Unauthorized: Service-CRN does not match the instance");
    }
    if (!r.header("IBM-API-Version")) {
      return error(400, "1229", "IBM-API-Version header is required");
    }
    std::string rest = r.path.substr(std::string("/api/v1/jobs").size());
    if (rest.empty() && r.method == "POST") {
      return submit(r);
    }
    if (rest.empty() && r.method == "GET") {
      std::string tag;
      for (const auto& [k, v] : r.query) {
        if (k == "tags") {
          tag = v;
        }
      }
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [id, j] : jobs_) {
        const auto& tags = j.request.value("tags", nlohmann::json::array());
        if (tag.empty() || std::find(tags.begin(), tags.end(), nlohmann::json(tag)) != tags.end()) {
          list.push_back(view(j));
        }
      }
      return kc::net::Response::json(
          200, {{"jobs", list}, {"count", list.size()}, {"limit", 10}, {"offset", 0}});
    }
    if (rest.empty() || rest[0] != '/') {
      return error(404, "1291", "Not found");
    }
    rest = rest.substr(1);
    std::string action;
    if (auto slash = rest.find('/'); slash != std::string::npos) {
      action = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    auto it = jobs_.find(rest);
    if (it == jobs_.end()) {
      return error(404, "1291", "Job not found");
    }
    Job& j = it->second;
    const auto [status, reason] = state(j);
    const bool final = status == "Completed" || status == "Failed" || status == "Cancelled";
    if (r.method == "GET" && action.empty()) {
      return kc::net::Response::json(200, view(j));
    }
    if (r.method == "POST" && action == "cancel") {
      if (final) {
        return error(409, "1223", "Job is already in a final state");
      }
      j.cancelled = Clock::now();
      kc::net::Response ok;
      ok.status = 204;
      return ok;
    }
    if (r.method == "GET" && action == "results") {
      if (status != "Completed") {
        return error(404, "1292", "Results are not available");
      }
      return kc::net::Response::json(
          200,
          {{"results",
            {{{"data", {{"c", {{"samples", {"0x0", "0x1", "0x1", "0x0"}}, {"num_bits", 1}}}}}}}},
           {"metadata", {{"version", 2}}}});
    }
    if (r.method == "GET" && action == "logs") {
      kc::net::Response t;
      t.body = "job " + j.id + ": " + status + "\n";
      t.withHeader("Content-Type", "text/plain");
      return t;
    }
    if (r.method == "GET" && action == "metrics") {
      nlohmann::json ts{{"created", rfc(j.created)}, {"running", nullptr}, {"finished", nullptr}};
      if (status != "Queued") {
        ts["running"] = rfc(j.created + std::chrono::milliseconds(300));
      }
      if (final) {
        const auto end =
            j.cancelled
                ? j.created + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                  *j.cancelled - j.submitted)
                : j.created + std::chrono::milliseconds(300) + runFor;
        ts["finished"] = rfc(end);
      }
      return kc::net::Response::json(
          200, {{"timestamps", ts}, {"usage", {{"quantum_seconds", 1}, {"seconds", 1}}}});
    }
    return error(404, "1291", "Not found");
  }

  kc::net::Response submit(const kc::net::Request& r) {  // with mu_ held
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return error(400, "1201", "Invalid request body");
    }
    static const std::set<std::string> known{"program_id", "backend",    "params",  "tags",
                                             "log_level",  "session_id", "private", "runtime",
                                             "cost",       "hub",        "group",   "project"};
    for (const auto& [k, v] : body.items()) {
      if (!known.count(k)) {
        return error(400, "1201", "Invalid field: " + k);
      }
    }
    if (!body.contains("program_id") || !body["program_id"].is_string() ||
        !body.contains("backend") || !body["backend"].is_string()) {
      return error(400, "1201", "program_id and backend are required");
    }
    const auto now = Clock::now();
    recent_.erase(
        std::remove_if(recent_.begin(), recent_.end(),
                       [&](Clock::time_point t) { return now - t > std::chrono::minutes(1); }),
        recent_.end());
    if (recent_.size() >= 5) {
      return error(429, "1352", "Rate limited: 5 jobs per minute per user");
    }
    recent_.push_back(now);
    Job j;
    j.id = "d" + std::to_string(1000 + jobs_.size()) + "qjobdouble";
    j.request = body;
    if (!j.request.contains("params")) {
      j.request["params"] = nlohmann::json::object();
    }
    j.created = std::chrono::system_clock::now();
    j.submitted = now;
    j.invalid = j.request["params"].contains("pubs") && !j.request["params"]["pubs"].is_array();
    const std::string id = j.id;
    jobs_.emplace(id, std::move(j));
    return kc::net::Response::json(200, {{"id", id}, {"backend", body["backend"]}});
  }

  std::string apiKey_, crn_;
  std::chrono::seconds tokenLifetime_;
  std::mutex mu_;
  std::map<std::string, Job> jobs_;
  std::map<std::string, Clock::time_point> valid_;
  std::vector<Clock::time_point> recent_;
  int tokens_ = 0;
  int expiredCalls_ = 0;
  RestartableServer listener_{[this](kc::net::HttpServer& s) {
    s.route("POST", "/identity/token", [this](const kc::net::Request& r) { return iam(r); });
    s.routePrefix("", "/api/v1/jobs", [this](const kc::net::Request& r) { return jobs(r); });
  }};
};

}  // namespace kc::bridge::testing
