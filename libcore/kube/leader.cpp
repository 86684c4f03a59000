#include "libcore/kube/leader.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "libcore/base/rfc3339.hpp"

namespace kc::kube {

namespace {

std::chrono::seconds ceilSeconds(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d + std::chrono::milliseconds(999));
}

}  // namespace

kc::Result<std::unique_ptr<LeaderElector>> LeaderElector::create(KubeClient& client,
                                                                 LeaderElectionConfig config) {
  if (config.name.empty() || config.identity.empty() || config.ns.empty()) {
    return kc::makeError(kc::errc::kInvalid,
                         "leader election: namespace, lease name and identity are required");
  }
  if (!(config.leaseDuration > config.renewDeadline)) {
    return kc::makeError(kc::errc::kInvalid,
                         "leader election: leaseDuration must be greater than renewDeadline");
  }
  if (!(static_cast<double>(config.renewDeadline.count()) >
        config.jitterFactor * static_cast<double>(config.retryPeriod.count()))) {
    return kc::makeError(
        kc::errc::kInvalid,
        "leader election: renewDeadline must be greater than jitterFactor*retryPeriod");
  }
  if (config.retryPeriod.count() <= 0 || config.jitterFactor < 1.0) {
    return kc::makeError(kc::errc::kInvalid,
                         "leader election: retryPeriod must be positive and jitterFactor >= 1");
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config)
    : client_(client),
      cfg_(std::move(config)),
      clock_(cfg_.clock != nullptr ? *cfg_.clock : client.clock()) {
  if (!cfg_.rand01) {
    cfg_.rand01 = [gen = std::mt19937_64(std::random_device{}()),
                   dist = std::uniform_real_distribution<double>(0.0, 1.0)]() mutable {
      return dist(gen);
    };
  }
}

LeaderElector::~LeaderElector() {
  stop();
}

std::string LeaderElector::observedHolder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observedHolder_;
}

std::chrono::milliseconds LeaderElector::jittered(std::chrono::milliseconds d) {
  const double extra = (cfg_.jitterFactor - 1.0) * std::clamp(cfg_.rand01(), 0.0, 1.0);
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(d.count()) * (1.0 + extra)));
}

bool LeaderElector::sleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !clock_.waitFor(lock, cv_, d, [this] { return stopping_.load(); });
}

bool LeaderElector::tryAcquireOrRenew() {
  return tryAcquireOrRenew(clock_.now() + cfg_.renewDeadline);
}

CallOptions LeaderElector::bounded(std::chrono::steady_clock::time_point deadline) const {
  // No retries inside the client (this loop is the retry), no wait for the shared QPS bucket,
  // and never past the deadline: a renewal gives up in time for the leader to step down.
  CallOptions call;
  call.deadline = deadline;
  call.maxRetries = 0;
  call.bypassRateLimit = true;
  return call;
}

bool LeaderElector::tryAcquireOrRenew(std::chrono::steady_clock::time_point deadline) {
  const CallOptions call = bounded(deadline);
  const auto now = clock_.now();
  const std::string nowMicro = kc::formatRfc3339(clock_.wallNow(), kc::Rfc3339Precision::kMicros);
  const auto leaseSeconds = ceilSeconds(cfg_.leaseDuration).count();
  auto current = client_.get(gvr::leases(), cfg_.ns, cfg_.name, {}, call);
  if (!current) {
    if (!current.error().isNotFound()) {
      noteFailure("reading", current.error().message);
      return false;
    }
    nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                            {"kind", "Lease"},
                            {"metadata", {{"name", cfg_.name}, {"namespace", cfg_.ns}}},
                            {"spec",
                             {{"holderIdentity", cfg_.identity},
                              {"leaseDurationSeconds", leaseSeconds},
                              {"acquireTime", nowMicro},
                              {"renewTime", nowMicro},
                              {"leaseTransitions", 0}}}};
    auto created = client_.create(gvr::leases(), cfg_.ns, lease, {}, call);
    if (!created) {
      if (!created.error().isAlreadyExists()) {  // AlreadyExists: someone was faster
        noteFailure("creating", created.error().message);
      }
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    lastFailure_.clear();
    observedLease_ = std::move(created).value();
    observedSpec_ = observedLease_["spec"].dump();
    observedTime_ = now;
    observedHolder_ = cfg_.identity;
    return true;
  }
  nlohmann::json lease = std::move(current).value();
  if (!lease["spec"].is_object()) {
    lease["spec"] = nlohmann::json::object();
  }
  const nlohmann::json& spec = lease["spec"];
  const std::string holder = spec.value("holderIdentity", "");
  std::chrono::milliseconds holderDuration = cfg_.leaseDuration;
  if (auto it = spec.find("leaseDurationSeconds"); it != spec.end() && it->is_number_integer()) {
    holderDuration = std::chrono::seconds(it->get<std::int64_t>());
  }
  std::chrono::steady_clock::time_point observedTime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string dumped = spec.dump();
    if (dumped != observedSpec_) {
      observedSpec_ = dumped;
      observedTime_ = now;
    }
    observedLease_ = lease;
    observedHolder_ = holder;
    observedTime = observedTime_;
  }
  const bool mine = holder == cfg_.identity;
  if (!holder.empty() && !mine && observedTime + holderDuration > now) {
    return false;  // held by someone else and not expired by our clock
  }
  nlohmann::json next = lease;
  nlohmann::json& ns = next["spec"];
  ns["holderIdentity"] = cfg_.identity;
  ns["leaseDurationSeconds"] = leaseSeconds;
  ns["renewTime"] = nowMicro;
  if (!mine) {
    ns["acquireTime"] = nowMicro;
    ns["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  auto updated =
      client_.update(gvr::leases(), cfg_.ns, next, call);  // carries metadata.resourceVersion
  if (!updated) {
    if (!updated.error().isConflict()) {  // 409: the record changed under us
      noteFailure("updating", updated.error().message);
    }
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  lastFailure_.clear();
  observedLease_ = std::move(updated).value();
  observedSpec_ = observedLease_["spec"].dump();
  observedTime_ = now;
  observedHolder_ = cfg_.identity;
  return true;
}

void LeaderElector::noteFailure(std::string_view what, const std::string& message) {
  // Logged once per distinct failure, not on every retry: a Lease that cannot be written (its
  // namespace missing, RBAC, ...) must not leave a replica silently never leading.
  std::string text = "leader election: " + std::string(what) + " Lease " + cfg_.ns + "/" +
                     cfg_.name + " failed: " + message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (text == lastFailure_) {
      return;
    }
    lastFailure_ = text;
  }
  spdlog::warn("{}", text);
}

void LeaderElector::release() {
  nlohmann::json lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = observedLease_;
  }
  if (!lease.is_object() || !lease.contains("spec")) {
    return;
  }
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = kc::formatRfc3339(clock_.wallNow(), kc::Rfc3339Precision::kMicros);
  (void)client_.update(
      gvr::leases(), cfg_.ns, lease,
      bounded(clock_.now() + cfg_.renewDeadline));  // best effort; 409 means someone took it
}

void LeaderElector::start() {
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  joinStarted();
}

void LeaderElector::joinStarted() {
  if (started_.joinable()) {
    started_.join();
  }
}

void LeaderElector::run() {
  std::string lastHolder;
  auto noteHolder = [&] {
    std::string h = observedHolder();
    if (h != lastHolder) {
      lastHolder = h;
      if (cfg_.onNewLeader && !h.empty()) {
        cfg_.onNewLeader(h);
      }
    }
  };
  while (!stopping_) {
    // The previous term's onStartedLeading must have returned before a new term begins.
    joinStarted();
    // Campaign. A successful write is dated from the start of its attempt (conservative:
    // the server stored it later than that).
    auto lastRenew = clock_.now();
    while (!stopping_) {
      const auto attemptStart = clock_.now();
      if (tryAcquireOrRenew(attemptStart + cfg_.renewDeadline)) {
        lastRenew = attemptStart;
        break;
      }
      noteHolder();
      if (!sleepFor(jittered(cfg_.retryPeriod))) {
        return;
      }
    }
    if (stopping_) {
      return;
    }
    leader_ = true;
    noteHolder();
    if (cfg_.onStartedLeading) {
      started_ = std::thread([cb = cfg_.onStartedLeading] { cb(); });
    }
    // Lead: renew every retryPeriod. Every request is bounded by lastRenew + renewDeadline,
    // so once that passes without a successful renewal the leader steps down at once.
    bool lost = false;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          lastRenew + cfg_.renewDeadline - clock_.now());
      if (left.count() <= 0) {
        lost = true;
        break;
      }
      if (!sleepFor(std::min(cfg_.retryPeriod, left))) {
        break;  // stopping
      }
      left = std::chrono::duration_cast<std::chrono::milliseconds>(lastRenew + cfg_.renewDeadline -
                                                                   clock_.now());
      if (left.count() <= 0) {
        lost = true;
        break;
      }
      const auto attemptStart = clock_.now();
      if (tryAcquireOrRenew(attemptStart + left)) {
        lastRenew = attemptStart;
        continue;
      }
      if (observedHolder() != cfg_.identity && !observedHolder().empty()) {
        lost = true;  // someone else holds it now
        break;
      }
    }
    leader_ = false;
    if (cfg_.onStoppedLeading) {
      cfg_.onStoppedLeading();
    }
    if (stopping_) {
      if (!lost && cfg_.releaseOnStop) {
        release();
      }
      return;
    }
  }
}

}  // namespace kc::kube
