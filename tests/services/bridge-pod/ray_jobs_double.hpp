#pragma once
// TEST DOUBLE of the Ray Jobs REST API (Ray dashboard, port 8265), as documented in Ray's
// openapi.yml and job_head.py, with its quirks: POST only on "/api/jobs/" (trailing slash), a
// duplicate submission_id answered 400 text/plain "Job with submission_id X already exists.
// Please use a different submission_id.", an unknown id 404 text "Job X does not exist",
// stop answering {"stopped": bool}, times in milliseconds, unknown request fields 400, DELETE
// only for finished jobs. Packages as job_head.py serves them: PUT
// /api/packages/{protocol}/{package_name} stores the body, GET answers 200 when it is stored and
// 404 text "Package gcs://X does not exist" otherwise; a job whose runtime_env.working_dir is
// a gcs:// URI runs inside that package, unpacked (by python3's zipfile, not by the pod's
// libzip), or fails at runtime env setup when the package was never uploaded. Jobs really run
// (LocalJob): the entrypoint under /bin/sh with the runtime_env's env_vars. Optional token auth
// (Ray >= 2.52: Authorization: Bearer). down()/up() stop and restart the listener on the same port,
// keeping the jobs.

#include <nlohmann/json.hpp>

#include "libcore/net/http_server.hpp"
#include "tests/services/bridge-pod/local_jobs.hpp"

namespace kc::bridge::testing {

class RayJobsDouble {
 public:
  RayJobsDouble(std::string dir, std::string token = {})
      : dir_(std::move(dir)), token_(std::move(token)) {
    listener_.up();
  }
  // Stop the listener first: its handlers use the jobs.
  ~RayJobsDouble() { listener_.down(); }

  std::string url() const { return listener_.base(); }
  void down() { listener_.down(); }
  void up() { listener_.up(); }

  std::size_t submissions() {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  std::shared_ptr<LocalJob> job(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second.job;
  }
  int packageUploads() {
    std::lock_guard lock(mu_);
    return uploads_;
  }
  std::map<std::string, std::string> packages() {
    std::lock_guard lock(mu_);
    return packages_;
  }
  nlohmann::json lastBody(const std::string& id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id).request;
  }

 private:
  struct Entry {
    std::shared_ptr<LocalJob> job;
    nlohmann::json request;
    bool stopped = false;
  };

  static kc::net::Response text(unsigned status, const std::string& body) {
    kc::net::Response r;
    r.status = status;
    r.body = body;
    r.withHeader("Content-Type", "text/plain; charset=utf-8");
    return r;
  }

  std::optional<kc::net::Response> auth(const kc::net::Request& r) const {
    if (token_.empty()) {
      return std::nullopt;
    }
    if (r.header("Authorization").value_or("") != "Bearer " + token_) {
      return text(401, "Unauthorized: missing or invalid authentication token");
    }
    return std::nullopt;
  }

  kc::net::Response submit(const kc::net::Request& r) {
    if (auto denied = auth(r)) {
      return *denied;
    }
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return text(400, "Failed to parse request body");
    }
    static const std::set<std::string> known{
        "entrypoint",          "submission_id",     "job_id",
        "runtime_env",         "metadata",          "entrypoint_num_cpus",
        "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources"};
    for (const auto& [k, v] : body.items()) {
      if (!known.count(k)) {
        return text(400,
                    "JobSubmitRequest.__init__() got an unexpected keyword argument '" + k + "'");
      }
    }
    if (!body.contains("entrypoint") || !body["entrypoint"].is_string()) {
      return text(
          400, "JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'");
    }
    std::lock_guard lock(mu_);
    std::string id = body.value("submission_id", "");
    if (id.empty()) {
      id = "raysubmit_" + std::to_string(jobs_.size() + 1);
    }
    if (jobs_.count(id)) {
      return text(400, "Job with submission_id " + id +
                           " already exists. Please use a different submission_id.");
    }
    std::vector<std::string> env;
    if (body.contains("runtime_env") && body["runtime_env"].contains("env_vars")) {
      for (const auto& [k, v] : body["runtime_env"]["env_vars"].items()) {
        env.push_back(k + "=" + v.get<std::string>());
      }
    }
    env.push_back("RAY_JOB_ID=" + id);
    std::string entrypoint = body["entrypoint"].get<std::string>();
    const std::string jobDir = dir_ + "/" + id;
    std::filesystem::create_directories(jobDir);
    if (body.contains("runtime_env") && body["runtime_env"].contains("working_dir")) {
      const std::string uri = body["runtime_env"]["working_dir"].get<std::string>();
      auto pkg = packages_.find(uri);
      if (uri.rfind("gcs://", 0) != 0 || pkg == packages_.end()) {
        // Ray accepts the submission; setting up the runtime env fails on the node.
        entrypoint = "echo 'runtime_env setup failed: " + uri + " does not exist' >&2; exit 1";
      } else {
        const std::string zip = dir_ + "/" + id + ".zip";
        std::ofstream(zip, std::ios::binary) << pkg->second;
        kc::testing::ChildProcess unzip({"/usr/bin/python3", "-m", "zipfile", "-e", zip, jobDir},
                                        kc::testing::ChildOutput::kInherit);
        if (unzip.wait() != 0) {
          entrypoint =
              "echo 'runtime_env setup failed: " + uri + " is not a zip archive' >&2; exit 1";
        }
      }
    }
    Entry e;
    e.request = body;
    e.job = std::make_shared<LocalJob>(jobDir, entrypoint, env);
    jobs_.emplace(id, std::move(e));
    return kc::net::Response::json(
        200, {{"job_id", "0" + std::to_string(jobs_.size()) + "000000"}, {"submission_id", id}});
  }

  kc::net::Response job(const kc::net::Request& r) {
    if (auto denied = auth(r)) {
      return *denied;
    }
    std::string rest = r.path.substr(std::string("/api/jobs/").size());
    std::string action;
    if (auto slash = rest.find('/'); slash != std::string::npos) {
      action = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    std::lock_guard lock(mu_);
    auto it = jobs_.find(rest);
    if (it == jobs_.end()) {
      return text(404, "Job " + rest + " does not exist");
    }
    Entry& e = it->second;
    const auto exit = e.job->exitStatus();
    if (r.method == "GET" && action.empty()) {
      std::string status = "RUNNING", message = "Job is currently running.";
      if (exit) {
        if (e.stopped) {
          status = "STOPPED";
          message = "Job was intentionally stopped.";
        } else if (*exit == 0) {
          status = "SUCCEEDED";
          message = "Job finished successfully.";
        } else {
          status = "FAILED";
          message = "Job entrypoint command failed with exit code " + std::to_string(*exit) +
                    ", last available logs (truncated to 20,000 chars):\n" + e.job->log();
        }
      }
      nlohmann::json j{{"type", "SUBMISSION"},
                       {"job_id", nullptr},
                       {"submission_id", rest},
                       {"entrypoint", e.request["entrypoint"]},
                       {"status", status},
                       {"message", message},
                       {"error_type", nullptr},
                       {"start_time", millis(e.job->started())},
                       {"end_time", nullptr},
                       {"metadata", e.request.value("metadata", nlohmann::json::object())},
                       {"runtime_env", e.request.value("runtime_env", nlohmann::json::object())}};
      if (auto end = e.job->ended()) {
        j["end_time"] = millis(*end);
      }
      return kc::net::Response::json(200, j);
    }
    if (r.method == "POST" && action == "stop") {
      if (exit) {
        return kc::net::Response::json(200, {{"stopped", false}});
      }
      e.stopped = true;
      e.job->kill();
      return kc::net::Response::json(200, {{"stopped", true}});
    }
    if (r.method == "GET" && action == "logs") {
      return kc::net::Response::json(200, {{"logs", e.job->log()}});
    }
    if (r.method == "DELETE" && action.empty()) {
      if (!exit) {
        return text(400, "Job " + rest + " is not in a terminal state.");
      }
      jobs_.erase(it);
      return kc::net::Response::json(200, {{"deleted", true}});
    }
    return text(404, "Not Found");
  }

  kc::net::Response package(const kc::net::Request& r) {
    if (auto denied = auth(r)) {
      return *denied;
    }
    // /api/packages/{protocol}/{package_name}
    const std::string rest = r.path.substr(std::string("/api/packages/").size());
    const auto slash = rest.find('/');
    if (slash == std::string::npos || rest.find('/', slash + 1) != std::string::npos) {
      return text(404, "Not Found");
    }
    const std::string protocol = rest.substr(0, slash), name = rest.substr(slash + 1);
    if (protocol != "gcs" || name.size() < 5 || name.substr(name.size() - 4) != ".zip") {
      return text(500, "ValueError: package_uri (" + protocol + "://" + name +
                           ") is not a gcs:// .zip package");
    }
    const std::string uri = protocol + "://" + name;
    std::lock_guard lock(mu_);
    if (r.method == "PUT") {
      packages_[uri] = r.body;
      ++uploads_;
      return text(200, "");
    }
    if (!packages_.count(uri)) {
      return text(404, "Package " + uri + " does not exist");
    }
    return text(200, "");
  }

  std::string dir_;
  std::string token_;
  std::mutex mu_;
  std::map<std::string, Entry> jobs_;
  std::map<std::string, std::string> packages_;  // URI -> zip bytes
  int uploads_ = 0;
  RestartableServer listener_{[this](kc::net::HttpServer& s) {
    s.route("GET", "/api/version", [this](const kc::net::Request& r) {
      if (auto denied = auth(r)) {
        return *denied;
      }
      return kc::net::Response::json(
          200, {{"version", "4"}, {"ray_version", "2.9.3"}, {"ray_commit", "double"}});
    });
    s.route("POST", "/api/jobs/", [this](const kc::net::Request& r) { return submit(r); });
    s.routePrefix("GET", "/api/packages/",
                  [this](const kc::net::Request& r) { return package(r); });
    s.routePrefix("PUT", "/api/packages/",
                  [this](const kc::net::Request& r) { return package(r); });
    s.routePrefix("", "/api/jobs/", [this](const kc::net::Request& r) { return job(r); });
  }};
};

}  // namespace kc::bridge::testing
