// WATCH: registering watchers, delivering change events to them (selectors applied to the
// old and new state), bookmarks, timeouts and the change window.

#include <algorithm>

#include "tools/kube-apiserver-double/store_internal.hpp"

namespace kc::apiserver {

void ObjectStore::deliver(Watcher& w, const Event& e) {
  if (w.ended) {
    return;
  }
  const bool newMatch = w.matches(*e.object);
  const bool oldMatch = e.previous && w.matches(*e.previous);
  const char* type = nullptr;
  switch (e.type) {
    case Event::Type::kAdded:
      type = newMatch ? "ADDED" : nullptr;
      break;
    case Event::Type::kModified:
      type = newMatch ? (oldMatch ? "MODIFIED" : "ADDED") : (oldMatch ? "DELETED" : nullptr);
      break;
    case Event::Type::kDeleted:
      type = (newMatch || oldMatch) ? "DELETED" : nullptr;
      break;
  }
  if (!type) {
    return;
  }
  if (w.render) {
    writeTo(w,
            std::string("{\"type\":\"") + type + "\",\"object\":" + w.objectJson(*e.object) + "}\n",
            true);
    return;
  }
  std::string cacheKey = std::string(type) + "|" + w.apiVersion;
  auto& lines = const_cast<Event&>(e).lines;  // guarded by mu_, a cache only
  auto cached =
      std::find_if(lines.begin(), lines.end(), [&](const auto& p) { return p.first == cacheKey; });
  if (cached == lines.end()) {
    std::string line = std::string("{\"type\":\"") + type +
                       "\",\"object\":" + e.object->fullJson(w.apiVersion, w.kind) + "}\n";
    lines.emplace_back(cacheKey, std::move(line));
    cached = std::prev(lines.end());
  }
  writeTo(w, cached->second, true);
}

void ObjectStore::writeTo(Watcher& w, const std::string& line, bool countsAsEvent) {
  if (w.ended) {
    return;
  }
  if (w.sink->closed() || !w.sink->write(line)) {
    w.ended = true;
    return;
  }
  if (!countsAsEvent) {
    return;
  }
  ++w.eventsSent;
  if (options_.dropWatchAfterEvents > 0 && w.eventsSent >= options_.dropWatchAfterEvents) {
    endWatcher(w);
    return;
  }
  if (options_.dropWatchProbability > 0) {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    if (d(rng_) < options_.dropWatchProbability) {
      endWatcher(w);
    }
  }
}

void ObjectStore::endWatcher(Watcher& w) {
  if (!w.ended) {
    w.ended = true;
    w.sink->end();
  }
}

std::string ObjectStore::bookmarkLine(const Watcher& w) const {
  return "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":" + quote(w.kind) +
         ",\"apiVersion\":" + quote(w.apiVersion) + ",\"metadata\":{\"resourceVersion\":\"" +
         std::to_string(rv_) + "\"}}}\n";
}

void ObjectStore::checkWatchable(const std::optional<std::string>& rv) const {
  if (!rv || rv->empty() || *rv == "0") {
    return;
  }
  std::lock_guard lock(mu_);
  std::uint64_t v = parseRv(*rv);
  if (v < compactedRv_ && !options_.expiredAsEvent) {
    throw expired("too old resource version: " + std::to_string(v) + " (" +
                  std::to_string(compactedRv_ + 1) + ")");
  }
}

std::uint64_t ObjectStore::watch(const ResourceInfo& res, const WatchOptions& opt,
                                 std::shared_ptr<WatchSink> sink) {
  auto labels = LabelSelector::parse(opt.labelSelector);
  if (!labels) {
    throw badRequest(labels.error().message);
  }
  auto fields = FieldSelector::parse(opt.fieldSelector, res.fieldLabels);
  if (!fields) {
    throw badRequest(fields.error().message);
  }
  std::lock_guard lock(mu_);
  auto w = std::make_shared<Watcher>();
  w->tableKey = res.tableKey();
  w->apiVersion = res.apiVersion(res.versions.front());
  w->kind = res.kind;
  w->ns = res.namespaced ? opt.ns : "";
  w->labels = std::move(labels.value());
  w->fields = std::move(fields.value());
  w->bookmarks = opt.allowBookmarks;
  w->deadline = opt.deadline;
  w->lastBookmark = std::chrono::steady_clock::now();
  w->sink = std::move(sink);
  w->render = opt.render;
  const bool fromRv =
      opt.resourceVersion && !opt.resourceVersion->empty() && *opt.resourceVersion != "0";
  if (fromRv) {
    std::uint64_t v = parseRv(*opt.resourceVersion);
    if (v < compactedRv_) {
      auto err = expired("too old resource version: " + std::to_string(v) + " (" +
                         std::to_string(compactedRv_ + 1) + ")");
      if (!options_.expiredAsEvent) {
        throw err;
      }
      w->sink->write(errorLine(err));
      w->sink->end();
      return 0;
    }
    for (const auto& e : history_) {
      if (e->rv > v && e->tableKey == w->tableKey) {
        deliver(*w, *e);
      }
    }
  } else {
    const Table* t = findTable(w->tableKey);
    if (t) {
      const std::string prefix = w->ns.empty() ? "" : w->ns + "/";
      for (auto it = t->objects.lower_bound(prefix); it != t->objects.end(); ++it) {
        if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) {
          break;
        }
        if (w->matches(*it->second)) {
          writeTo(*w, "{\"type\":\"ADDED\",\"object\":" + w->objectJson(*it->second) + "}\n", true);
        }
      }
    }
    if (opt.sendInitialEvents && w->bookmarks) {
      writeTo(*w,
              "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":" + quote(w->kind) +
                  ",\"apiVersion\":" + quote(w->apiVersion) +
                  ",\"metadata\":{\"resourceVersion\":\"" + std::to_string(rv_) +
                  "\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
              false);
    }
  }
  if (w->ended) {
    return 0;
  }
  w->id = nextWatcherId_++;
  watchers_[w->id] = w;
  table(w->tableKey).watchers.push_back(w);
  return w->id;
}

void ObjectStore::stopWatch(std::uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = watchers_.find(id);
  if (it != watchers_.end()) {
    endWatcher(*it->second);
    watchers_.erase(it);
  }
}

void ObjectStore::tick(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = *it->second;
    if (!w.ended && w.sink->closed()) {
      w.ended = true;
    }
    if (!w.ended && w.deadline && now >= *w.deadline) {
      endWatcher(w);
    }
    if (!w.ended && w.bookmarks && now - w.lastBookmark >= options_.bookmarkInterval) {
      writeTo(w, bookmarkLine(w), false);
      w.lastBookmark = now;
    }
    it = w.ended ? watchers_.erase(it) : std::next(it);
  }
  for (auto& [key, t] : tables_) {
    std::erase_if(t.watchers, [](const auto& w) { return w->ended; });
  }
}

void ObjectStore::compact() {
  std::lock_guard lock(mu_);
  if (!history_.empty()) {
    compactedRv_ = history_.back()->rv;
  }
  compactedRv_ = std::max(compactedRv_, rv_);
  history_.clear();
}

}  // namespace kc::apiserver
