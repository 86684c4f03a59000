#include "services/bridge-pod/runner.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <sstream>

#include "libcore/base/rfc3339.hpp"

namespace kc::bridge::pod {

namespace {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  return kc::formatRfc3339(t);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) {
      out.push_back(item.substr(b, e - b + 1));
    }
  }
  return out;
}

// Thrown by a wait (or a step boundary) once a stop was requested; caught only in run(). A
// stop may land in any wait, deep inside retry loops that return values rather than errors.
struct Stopped {};

class Runner {
 public:
  Runner(JobStore& store, const BackendFactory& factory, const RunnerOptions& options)
      : store_(store),
        factory_(factory),
        options_(options),
        clock_(kc::clockOr(options.clock)),
        backoff_(options.backoff) {}

  int run() {
    int code = 1;
    try {
      code = runJob();
    } catch (const Stopped&) {
      spdlog::info(
          "stop requested (SIGTERM): ending without a final state; the remote job, if any, is left "
          "to a "
          "replacement pod");
      code = 1;
    }
    if (backend_) {
      backend_->release();
    }
    return code;
  }

 private:
  int runJob() {
    Data data = retryForever("read ConfigMap", [&] { return store_.read(); });
    auto params = parametersFromData(data);
    if (!params.ok()) {
      spdlog::error("ConfigMap parameters unreadable: {}", params.error().message);
      return 1;  // the operator rewrites a hand-broken ConfigMap; the next pod reads it
    }
    ctx_.params = *params;
    ctx_.jobName = value(data, cmkey::kJobName);
    ctx_.jobNamespace = value(data, cmkey::kJobNamespace);
    ctx_.uid = value(data, cmkey::kJobUid);
    if (ctx_.jobName.empty() || ctx_.uid.empty()) {
      spdlog::error("ConfigMap has no {} or {}", cmkey::kJobName, cmkey::kJobUid);
      return 1;
    }
    if (auto s = parseJobStatus(value(data, cmkey::kStatus)); s && isTerminal(*s)) {
      spdlog::info("job {} already final ({}); nothing to do", ctx_.jobName, jobStatusName(*s));
      return *s == JobStatus::kDone ? 0 : 1;
    }
    auto backend = factory_(ctx_.params);
    if (!backend.ok()) {
      return fail("backend: " + backend.error().message);
    }
    backend_ = std::move(backend).value();
    spdlog::info("bridge pod for {}/{} (uid {}), backend {}", ctx_.jobNamespace, ctx_.jobName,
                 ctx_.uid, backend_->name());

    auto prepared =
        retryBackend("reach " + std::string(backend_->name()), [&] { return backend_->prepare(); });
    if (!prepared.ok()) {
      return fail(prepared.error().message);
    }
    std::string id = value(data, cmkey::kRemoteId);
    if (id.empty()) {
      auto got = obtainId(data);
      if (!got.ok()) {
        return got.error().code == "killed" ? finish(JobStatus::kKilled, got.error().message)
                                            : fail(got.error().message);
      }
      id = *got;
    } else {
      spdlog::info("resuming remote job {}", id);
    }
    return poll(id, data);
  }

  static std::string value(const Data& d, const char* key) {
    auto it = d.find(key);
    return it == d.end() ? std::string() : it->second;
  }

  void pause(std::chrono::milliseconds d) {
    if (options_.stop == nullptr) {
      clock_.sleepFor(d);
    } else if (options_.stop->waitFor(clock_, d)) {
      throw Stopped{};
    }
  }
  void checkStop() const {
    if (options_.stop != nullptr && options_.stop->requested()) {
      throw Stopped{};
    }
  }

  template <typename F>
  auto retryForever(const std::string& what, F&& f) -> std::decay_t<decltype(f().value())> {
    for (;;) {
      auto r = f();
      if (r.ok()) {
        backoff_.reset();
        return std::move(r).value();
      }
      const auto d = backoff_.next();
      spdlog::warn("{} failed ({}: {}); retrying in {} ms", what, r.error().code, r.error().message,
                   d.count());
      pause(d);
    }
  }

  // Retries transient errors without limit; returns the first success or permanent error.
  template <typename F>
  auto retryTransient(const std::string& what, F&& f) -> decltype(f()) {
    for (;;) {
      auto r = f();
      if (r.ok() || !isTransient(r.error())) {
        if (r.ok()) {
          backoff_.reset();
        }
        return r;
      }
      const auto d = backoff_.next();
      spdlog::warn("{} failed ({}: {}); retrying in {} ms", what, r.error().code, r.error().message,
                   d.count());
      pause(d);
    }
  }

  // retryTransient for a call to the backend, an expired credential waited for in between.
  template <typename F>
  auto retryBackend(const std::string& what, F&& f) -> decltype(f()) {
    return retryTransient(what, [&]() -> decltype(f()) {
      for (;;) {
        auto r = f();
        if (r.ok()) {
          credentialWorks();
          return r;
        }
        if (!waitedForCredential(r.error())) {
          return r;
        }
      }
    });
  }

  // After a failed backend call: when the backend's credential has expired (every call fails
  // until a person renews it), says so in status.message and a Warning Event, once per expiry,
  // and waits the slow credential retry instead of the backoff. False for any other failure.
  bool waitedForCredential(const Error& e) {
    if (e.code != errc::kUnauthorized && e.code != errc::kForbidden &&
        e.code != errc::kServerError) {
      return false;
    }
    const auto alert = backend_->credentialAlert();
    if (!alert || !alert->expired) {
      return false;
    }
    const auto retry = options_.credentialRetry;
    if (alert->message != credentialExpiryTold_) {
      const std::string every = retry.count() % 1000 == 0
                                    ? std::to_string(retry.count() / 1000) + " s"
                                    : std::to_string(retry.count()) + " ms";
      writeKeys(
          {{cmkey::kMessage, alert->message + "; renew the credential in Secret " +
                                 ctx_.params.resourceSecret + " (retrying every " + every + ")"}});
      tell(alert->reason, alert->message);
      credentialExpiryTold_ = alert->message;
    }
    spdlog::warn("{}; the call failed ({}: {}); retrying in {} ms", alert->message, e.code,
                 e.message, retry.count());
    pause(retry);
    return true;
  }

  // After a backend call that worked: an expiry told before is over (the status is rewritten at
  // the next poll), and a credential that expires soon is warned of once.
  void credentialWorks() {
    if (!credentialExpiryTold_.empty()) {
      spdlog::info("the {} backend accepts the renewed credential", backend_->name());
      credentialExpiryTold_.clear();
      credentialRenewed_ = true;
    }
    const auto alert = backend_->credentialAlert();
    if (alert && !alert->expired && alert->message != credentialWarningTold_) {
      spdlog::warn("{}; renew it in Secret {} before then", alert->message,
                   ctx_.params.resourceSecret);
      tell(alert->reason, alert->message);
      credentialWarningTold_ = alert->message;
    }
  }

  void tell(const std::string& reason, const std::string& message) {
    if (options_.events != nullptr) {
      options_.events->warning(ctx_, reason, message);
    }
  }

  void writeKeys(const Data& keys) {
    retryForever("write ConfigMap", [&] { return store_.write(keys); });
  }

  int fail(const std::string& message) { return finish(JobStatus::kFailed, message); }

  int finish(JobStatus status, const std::string& message, const Data& extra = {}) {
    Data keys = extra;
    keys[cmkey::kStatus] = jobStatusName(status);
    keys[cmkey::kMessage] = message;
    if (!keys.count(cmkey::kCompletionTime)) {
      keys[cmkey::kCompletionTime] = rfc3339(clock_.wallNow());
    }
    writeKeys(keys);
    spdlog::info("job {} {}: {}", ctx_.jobName, jobStatusName(status), message);
    return status == JobStatus::kDone ? 0 : 1;
  }

  Result<std::unique_ptr<S3Client>> s3() {
    S3Options o;
    o.endpoint = ctx_.params.s3Endpoint;
    o.secure = ctx_.params.s3Secure;
    o.region = options_.s3Region;
    o.credentialsDir = options_.s3CredentialsDir;
    o.caFile = options_.s3CaFile;
    o.clock = options_.clock;
    return S3Client::create(o);
  }

  Result<std::string> fromS3(const std::string& ref, const std::string& what) {
    auto bo = splitBucketObject(ref);
    if (!bo.ok()) {
      return makeError(errc::kInvalid, what + ": " + bo.error().message);
    }
    auto client = s3();
    if (!client.ok()) {
      return client.error();
    }
    auto got = retryTransient("fetch " + what + " from S3",
                              [&] { return (*client)->getObject(bo->first, bo->second); });
    if (!got.ok()) {
      return makeError(got.error().code, what + ": " + got.error().message);
    }
    return got;
  }

  Status loadInputs() {
    const JobParameters& p = ctx_.params;
    if (p.scriptLocation == "s3") {
      auto s = fromS3(p.jobScript, "jobscript");
      if (!s.ok()) {
        return s.error();
      }
      ctx_.script = *s;
    } else {
      ctx_.script = p.jobScript;
    }
    for (auto [src, dst, what] :
         {std::tuple{&p.scriptMetadata, &ctx_.scriptMetadata, "scriptmetadata"},
          std::tuple{&p.jobParameters, &ctx_.jobParametersJson, "jobparameters"}}) {
      if (src->empty()) {
        continue;
      }
      if (p.scriptExtraLocation == "s3") {
        auto s = fromS3(*src, what);
        if (!s.ok()) {
          return s.error();
        }
        *dst = *s;
      } else {
        *dst = *src;
      }
    }
    return okStatus();
  }

  // jobdata.additionaldata: every object's name checked and its size bounded (HEAD) before
  // anything is downloaded; then the objects are fetched into ctx_.additionalFiles.
  Status stageAdditionalData() {
    const std::string& list = ctx_.params.additionalData;
    if (list.empty()) {
      return okStatus();
    }
    const std::uint64_t limit = backend_->stagingLimit();
    if (limit == 0) {
      return makeError(errc::kUnsupported,
                       std::string("additionaldata: the ") + backend_->name() +
                           " backend cannot stage files to the remote side (see docs/bridge.md)");
    }
    struct Item {
      std::string bucket, key, name;
    };
    std::vector<Item> items;
    std::map<std::string, std::string> seen;  // file name -> the reference that took it
    for (const std::string& ref : splitList(list)) {
      auto bo = splitBucketObject(ref);
      if (!bo.ok()) {
        return makeError(errc::kInvalid, "additionaldata: " + bo.error().message);
      }
      auto name = stagedFileName(bo->second);
      if (!name.ok()) {
        return name.error();
      }
      if (auto [it, fresh] = seen.emplace(*name, ref); !fresh) {
        return makeError(errc::kInvalid, "additionaldata: '" + ref + "' and '" + it->second +
                                             "' would both be staged as '" + *name + "'");
      }
      items.push_back({bo->first, bo->second, *name});
    }
    if (items.empty()) {
      return makeError(errc::kInvalid, "additionaldata names no bucket:object");
    }
    auto client = s3();
    if (!client.ok()) {
      return makeError(client.error().code, "additionaldata: " + client.error().message);
    }
    const auto tooBig = [&](std::uint64_t total) {
      return makeError(errc::kInvalid, "additionaldata: " + std::to_string(total) +
                                           " bytes in total, more than the " + backend_->name() +
                                           " backend stages (" + std::to_string(limit) + " bytes)");
    };
    std::uint64_t total = 0;
    for (const Item& i : items) {
      auto size = retryTransient("size of s3://" + i.bucket + "/" + i.key,
                                 [&] { return (*client)->objectSize(i.bucket, i.key); });
      if (!size.ok()) {
        return makeError(size.error().code, "additionaldata: " + size.error().message);
      }
      total += *size;
      if (total > limit) {
        return tooBig(total);
      }
    }
    total = 0;
    for (const Item& i : items) {
      auto got = retryTransient("fetch s3://" + i.bucket + "/" + i.key,
                                [&] { return (*client)->getObject(i.bucket, i.key); });
      if (!got.ok()) {
        return makeError(got.error().code, "additionaldata: " + got.error().message);
      }
      total += got->size();
      if (total > limit) {
        return tooBig(total);  // an object replaced by a bigger one since its HEAD
      }
      ctx_.additionalFiles.push_back({i.name, std::move(got).value()});
    }
    spdlog::info("staging {} additional file(s), {} bytes", ctx_.additionalFiles.size(), total);
    return okStatus();
  }

  // Adoption or submission; the id is in the ConfigMap when this returns ok.
  Result<std::string> obtainId(const Data& data) {
    bool inputsLoaded = false;
    for (;;) {
      checkStop();
      auto tagged = retryBackend("look for a job tagged " + ctx_.uid,
                                 [&] { return backend_->findTagged(ctx_); });
      if (!tagged.ok()) {
        return tagged.error();
      }
      if (*tagged) {
        spdlog::info("adopting remote job {} (tagged with uid {})", **tagged, ctx_.uid);
        writeKeys({{cmkey::kRemoteId, **tagged},
                   {cmkey::kStatus, jobStatusName(JobStatus::kSubmitted)},
                   {cmkey::kSubmitTime, value(data, cmkey::kSubmitTime).empty()
                                            ? rfc3339(clock_.wallNow())
                                            : value(data, cmkey::kSubmitTime)},
                   {cmkey::kMessage, "adopted remote job " + **tagged}});
        return **tagged;
      }
      // Re-read kill: a job killed before it was ever submitted is never submitted.
      Data now = retryForever("read ConfigMap", [&] { return store_.read(); });
      if (value(now, cmkey::kKill) == "true") {
        return makeError("killed", "killed before submission");
      }
      if (!inputsLoaded) {
        auto staged = stageAdditionalData();
        if (!staged.ok()) {
          return staged.error();
        }
        auto in = loadInputs();
        if (!in.ok()) {
          return in.error();
        }
        inputsLoaded = true;
      }
      auto id = backend_->submit(ctx_);
      if (!id.ok() && waitedForCredential(id.error())) {
        continue;  // nothing reached the backend: look for the tag, then submit again
      }
      if (id.ok()) {
        credentialWorks();
        spdlog::info("submitted remote job {}", *id);
        writeKeys({{cmkey::kRemoteId, *id},
                   {cmkey::kStatus, jobStatusName(JobStatus::kSubmitted)},
                   {cmkey::kSubmitTime, rfc3339(clock_.wallNow())},
                   {cmkey::kMessage, "submitted"}});
        backoff_.reset();
        return *id;
      }
      if (!isTransient(id.error())) {
        return makeError(id.error().code, "submit refused: " + id.error().message);
      }
      // The request may have reached the backend: look for the tag again before resubmitting.
      const auto d = backoff_.next();
      spdlog::warn("submit failed ({}: {}); looking for the tag again in {} ms", id.error().code,
                   id.error().message, d.count());
      pause(d);
    }
  }

  std::chrono::milliseconds interval() const {
    if (options_.pollIntervalOverride.count() > 0) {
      return options_.pollIntervalOverride;
    }
    return std::chrono::seconds(ctx_.params.updateIntervalSec);
  }

  int poll(const std::string& id, Data last) {
    bool cancelSent = false;
    std::string written = value(last, cmkey::kStatus);
    std::string writtenStart = value(last, cmkey::kStartTime);
    bool first = true;
    for (;;) {
      if (!first) {
        pause(interval());
      }
      checkStop();
      first = false;
      auto cm = store_.read();
      if (cm.ok()) {
        last = *cm;
      } else {
        spdlog::warn("reading ConfigMap failed ({}); using the last copy", cm.error().message);
      }
      auto q = backend_->query(id);
      if (!q.ok()) {
        if (waitedForCredential(q.error())) {
          first = true;  // the credential retry was the wait
          continue;
        }
        if (isTransient(q.error())) {
          const auto d = backoff_.next();
          spdlog::warn("status of {} failed ({}: {}); retrying in {} ms", id, q.error().code,
                       q.error().message, d.count());
          pause(d);
          first = true;  // the backoff was the wait
          continue;
        }
        writeKeys(
            {{cmkey::kMessage, "polling remote job " + id + " failed: " + q.error().message}});
        spdlog::error("polling remote job {} failed: {}", id, q.error().message);
        return 1;
      }
      backoff_.reset();
      credentialWorks();
      if (credentialRenewed_) {
        written.clear();  // status.message told of the expiry: write the job's own again
        credentialRenewed_ = false;
      }
      if (q->gone) {
        if (cancelSent) {
          return finish(JobStatus::kKilled, "remote job " + id + " cancelled and gone");
        }
        return finish(JobStatus::kUnknown,
                      "remote job " + id +
                          " is gone: the backend no longer knows it (purged before its final "
                          "state was seen)");
      }
      const RemoteJob& job = q->job;
      if (isTerminal(job.status)) {
        if (cancelSent && job.status == JobStatus::kFailed) {
          // Backends without a cancelled state (LSF: EXIT) report the kill as a failure.
          RemoteJob killed = job;
          killed.status = JobStatus::kKilled;
          killed.message += " (after the kill request)";
          return complete(id, killed);
        }
        return complete(id, job);
      }
      Data keys;
      if (jobStatusName(job.status) != written) {
        keys[cmkey::kStatus] = jobStatusName(job.status);
        keys[cmkey::kMessage] = job.message;
      }
      if (job.startTime && writtenStart.empty() && job.status == JobStatus::kRunning) {
        keys[cmkey::kStartTime] = rfc3339(*job.startTime);
      }
      if (!keys.empty()) {
        writeKeys(keys);
        written = jobStatusName(job.status);
        if (keys.count(cmkey::kStartTime)) {
          writtenStart = keys[cmkey::kStartTime];
        }
        spdlog::info("remote job {}: {} ({})", id, jobStatusName(job.status), job.nativeState);
      }
      if (value(last, cmkey::kKill) == "true") {
        auto c = backend_->cancel(id);
        if (c.ok()) {
          if (!cancelSent) {
            spdlog::info("kill requested: cancelled remote job {}", id);
          }
          cancelSent = true;
        } else {
          spdlog::warn("cancel of {} failed ({}); trying again", id, c.error().message);
        }
      }
    }
  }

  int complete(const std::string& id, const RemoteJob& job) {
    Data keys;
    if (job.submitTime) {
      keys[cmkey::kSubmitTime] = rfc3339(*job.submitTime);
    }
    if (job.startTime) {
      keys[cmkey::kStartTime] = rfc3339(*job.startTime);
    }
    keys[cmkey::kCompletionTime] = rfc3339(job.endTime ? *job.endTime : clock_.wallNow());
    std::string message = job.message;
    JobStatus status = job.status;
    const auto files = splitList(ctx_.params.s3UploadFiles);
    if (!ctx_.params.s3UploadBucket.empty() && !files.empty()) {
      std::vector<std::string> uploaded, problems;
      auto client = s3();
      for (const std::string& f : files) {
        if (!client.ok()) {
          problems.push_back(f + ": " + client.error().message);
          continue;
        }
        auto bytes = backend_->fetchOutput(ctx_, id, f);
        if (!bytes.ok()) {
          problems.push_back(f + ": " + bytes.error().message);
          continue;
        }
        const std::string key = ctx_.jobName + "/" + f;
        Status put = okStatus();
        for (int attempt = 0; attempt < options_.uploadAttempts; ++attempt) {
          put = (*client)->putObject(ctx_.params.s3UploadBucket, key, *bytes);
          if (put.ok() || !isTransient(put.error())) {
            break;
          }
          pause(backoff_.next());
        }
        backoff_.reset();
        if (put.ok()) {
          uploaded.push_back(ctx_.params.s3UploadBucket + "/" + key);
        } else {
          problems.push_back(f + ": " + put.error().message);
        }
      }
      if (!uploaded.empty()) {
        message += "; uploaded " + std::to_string(uploaded.size()) + " output(s) to " +
                   ctx_.params.s3UploadBucket + "/" + ctx_.jobName + "/";
      }
      if (!problems.empty()) {
        std::string joined;
        for (const auto& p : problems) {
          joined += (joined.empty() ? "" : "; ") + p;
        }
        message += "; output upload failed: " + joined;
        if (status == JobStatus::kDone) {
          status = JobStatus::kFailed;  // the job ran, but what it was for did not arrive
        }
      }
    }
    return finish(status, message, keys);
  }

  JobStore& store_;
  const BackendFactory& factory_;
  const RunnerOptions& options_;
  kc::Clock& clock_;
  kc::Backoff backoff_;
  JobContext ctx_;
  std::unique_ptr<Backend> backend_;
  std::string credentialExpiryTold_;   // the expiry in status.message; empty once calls work
  std::string credentialWarningTold_;  // the last "expires soon" warning
  bool credentialRenewed_ = false;     // calls work again since the expiry was told
};

}  // namespace

void StopRequest::request() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool StopRequest::requested() const {
  std::lock_guard lock(mu_);
  return stop_;
}

bool StopRequest::waitFor(kc::Clock& clock, std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return clock.waitFor(lock, cv_, d, [&] { return stop_; });
}

int runBridgePod(JobStore& store, const BackendFactory& makeBackend, const RunnerOptions& options) {
  return Runner(store, makeBackend, options).run();
}

}  // namespace kc::bridge::pod
