#include "libcore/kube/informer.hpp"

#include <random>

#include "libcore/net/http_client.hpp"

namespace kc::kube {
namespace {

std::function<double()> defaultRand01() {
  return [gen = std::mt19937_64(std::random_device{}()),
          dist = std::uniform_real_distribution<double>(0.0, 1.0)]() mutable { return dist(gen); };
}

}  // namespace

Informer::Informer(KubeClient& client, InformerOptions options)
    : ownedSource_(std::make_unique<ClientListerWatcher>(client, options.resource, options.ns)),
      source_(*ownedSource_),
      opts_(std::move(options)),
      clock_(opts_.clock != nullptr ? *opts_.clock : client.clock()),
      backoff_(opts_.backoff, opts_.rand01) {
  if (!opts_.rand01) {
    opts_.rand01 = defaultRand01();
  }
}

Informer::Informer(ListerWatcher& source, InformerOptions options)
    : source_(source),
      opts_(std::move(options)),
      clock_(kc::clockOr(opts_.clock)),
      backoff_(opts_.backoff, opts_.rand01) {
  if (!opts_.rand01) {
    opts_.rand01 = defaultRand01();
  }
}

Informer::~Informer() {
  stop();
}

void Informer::addHandler(ResourceEventHandler handler) {
  handlers_.push_back(std::move(handler));
}

void Informer::setTransform(ObjectTransform transform) {
  opts_.transform = std::move(transform);
}

ObjectPtr Informer::admit(nlohmann::json&& obj) {
  if (opts_.transform) {
    obj = opts_.transform(std::move(obj));
    if (objectKey(obj).empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.dropped;
      return nullptr;
    }
  }
  return std::make_shared<const nlohmann::json>(std::move(obj));
}

void Informer::start() {
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (cancel_) {
      cancel_->cancel();
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool Informer::waitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return synced_.load() || stopping_.load(); });
  return synced_.load();
}

std::string Informer::lastResourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

Informer::Stats Informer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Informer::setResourceVersion(std::string rv) {
  if (rv.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  rv_ = std::move(rv);
}

bool Informer::sleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !clock_.waitFor(lock, cv_, d, [this] { return stopping_.load(); });
}

void Informer::dispatch(const Notification& n) {
  for (const auto& h : handlers_) {
    switch (n.kind) {
      case Notification::Kind::kAdd:
        if (h.onAdd) {
          h.onAdd(n.newObj);
        }
        break;
      case Notification::Kind::kUpdate:
        if (h.onUpdate) {
          h.onUpdate(n.oldObj, n.newObj);
        }
        break;
      case Notification::Kind::kDelete:
        if (h.onDelete) {
          h.onDelete(n.oldObj);
        }
        break;
    }
  }
}

bool Informer::relist() {
  ListOptions lo;
  lo.labelSelector = opts_.labelSelector;
  lo.fieldSelector = opts_.fieldSelector;
  lo.limit = opts_.pageSize;
  std::vector<ObjectPtr> items;
  std::string listRv;
  bool paged = opts_.pageSize > 0;
  for (;;) {
    auto token = std::make_unique<net::CancelToken>();
    net::CancelToken* raw = token.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        return false;
      }
      cancel_ = std::move(token);
    }
    auto meta = source_.list(
        lo,
        [this, &items](nlohmann::json&& item) {
          if (auto obj = admit(std::move(item))) {
            items.push_back(std::move(obj));
          }
        },
        raw);
    if (!meta) {
      if (meta.error().isExpired() && !lo.continueToken.empty()) {
        // The continue token outlived its snapshot: start over with one consistent LIST.
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.expired;
        items.clear();
        listRv.clear();
        lo.continueToken.clear();
        lo.limit = 0;
        paged = false;
        continue;
      }
      return false;
    }
    if (listRv.empty()) {
      listRv = meta->resourceVersion;
    }
    if (!paged || meta->continueToken.empty()) {
      break;
    }
    lo.continueToken = meta->continueToken;
  }
  // Items of a built-in LIST carry no kind/apiVersion; handlers should not depend on them,
  // so nothing is patched in here.
  const auto diff = store_.replace(std::move(items));
  setResourceVersion(listRv);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.lists;
  }
  for (const auto& n : diff) {
    dispatch(n);
  }
  if (!synced_.exchange(true)) {
    cv_.notify_all();
  }
  return true;
}

void Informer::run() {
  bool needList = true;
  while (!stopping_) {
    if (needList) {
      if (!relist()) {
        if (!sleepFor(backoff_.next())) {
          return;
        }
        continue;
      }
      needList = false;
    }
    if (!watchOnce(needList)) {
      return;
    }
  }
}

ListOptions Informer::watchOptions() const {
  ListOptions wo;
  wo.labelSelector = opts_.labelSelector;
  wo.fieldSelector = opts_.fieldSelector;
  wo.resourceVersion = lastResourceVersion();
  wo.allowWatchBookmarks = true;
  const double r = std::clamp(opts_.rand01(), 0.0, 1.0);
  wo.timeoutSeconds =
      static_cast<int>(static_cast<double>(opts_.minWatchTimeout.count()) * (1.0 + r));
  return wo;
}

bool Informer::onWatchEvent(WatchEvent&& ev, WatchOutcome& outcome) {
  if (ev.type == "ERROR") {
    ApiError e = statusFromJson(ev.object);
    if (e.isExpired()) {
      outcome.expired = true;
    } else {
      outcome.eventError = std::move(e);
    }
    return false;
  }
  std::string rv = objectResourceVersion(ev.object);
  if (ev.type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) {
      rv_ = std::move(rv);
    }
    ++stats_.bookmarks;
    return true;
  }
  const bool upsert = ev.type == "ADDED" || ev.type == "MODIFIED";
  if (!upsert && ev.type != "DELETED") {
    return true;  // unknown event types are ignored, as client-go does
  }
  std::optional<Notification> n;
  if (auto obj = admit(std::move(ev.object))) {
    n = upsert ? store_.add(std::move(obj)) : store_.remove(std::move(obj));
  }
  ++outcome.applied;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) {
      rv_ = std::move(rv);
    }
    ++stats_.eventsApplied;
  }
  if (n) {
    dispatch(*n);
  }
  return !stopping_.load();
}

bool Informer::afterWatch(const WatchOutcome& outcome, bool failed, bool healthy, bool& needList) {
  if (outcome.expired) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.expired;
    }
    needList = true;
    // After a healthy watch relist at once; a 410 right after a LIST (the version expired
    // again at once) backs off, so repeated 410s do not loop LIST -> WATCH -> 410.
    if (healthy) {
      backoff_.reset();
      return true;
    }
    return sleepFor(backoff_.next());
  }
  if (failed || outcome.eventError) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.watchErrors;
    }
    if (healthy) {
      backoff_.reset();
    }
    return sleepFor(backoff_.next());
  }
  // Clean end (timeoutSeconds or the server closed): resume from the last seen version.
  if (healthy) {
    backoff_.reset();
    return true;
  }
  return sleepFor(backoff_.next());
}

bool Informer::watchOnce(bool& needList) {
  const ListOptions wo = watchOptions();
  auto token = std::make_unique<net::CancelToken>();
  net::CancelToken* raw = token.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return false;
    }
    cancel_ = std::move(token);
    ++stats_.watches;
  }
  const auto started = clock_.now();
  WatchOutcome outcome;
  auto st = source_.watch(
      wo, [&](WatchEvent&& ev) { return onWatchEvent(std::move(ev), outcome); }, raw,
      // Backstop for a dead connection: the server ends the stream after timeoutSeconds, so
      // silence longer than that (+30 s) means nobody is on the other end any more.
      std::chrono::seconds(*wo.timeoutSeconds + 30));
  if (stopping_) {
    return false;
  }
  if (!st && st.error().isExpired()) {
    outcome.expired = true;
  }
  const bool healthy = outcome.applied > 0 || clock_.now() - started >= opts_.healthyWatch;
  return afterWatch(outcome, !st, healthy, needList);
}

}  // namespace kc::kube
