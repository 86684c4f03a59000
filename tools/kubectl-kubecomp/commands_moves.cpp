// moves [--pool P] [--watch] and gpu quarantine|release: the GPUPool journal and quarantine.

#include <ostream>

#include "libcore/api/gpupool.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/rfc3339.hpp"
#include "tools/kubectl-kubecomp/commands.hpp"
#include "tools/kubectl-kubecomp/views.hpp"

namespace kc::kubectl {

using nlohmann::json;

namespace {

std::string nameOf(const json& obj) {
  return obj.value("metadata", json::object()).value("name", std::string());
}

void emitChange(CommandContext& c, const PhaseChange& change) {
  if (c.format == OutputFormat::kJson) {
    c.out << change.toJson().dump() << "\n";
  } else if (c.format == OutputFormat::kYaml) {
    c.out << "---\n" << toYaml(change.toJson());
  } else {
    c.out << change.line() << "\n";
  }
  c.out.flush();
}

struct Watcher {
  CommandContext& c;
  const MovesOptions& o;
  std::map<MoveKey, SeenMove> seen;
  std::uint32_t printed = 0;

  bool wanted(const json& pool) const { return o.pool.empty() || nameOf(pool) == o.pool; }
  // Records (report false) or prints the changes of one pool; false once enough were printed.
  bool take(const json& pool, bool report) {
    if (!wanted(pool)) {
      return true;
    }
    for (const PhaseChange& change : phaseChanges(pool, seen, report)) {
      emitChange(c, change);
      if (o.maxChanges > 0 && ++printed >= o.maxChanges) {
        return false;
      }
    }
    return true;
  }
};

int failed(CommandContext& c, const kube::ApiError& e, const std::string& verb) {
  c.err << "error: " << describeFailure(e, api::gvr::gpuPools(), verb, c.cluster.server()) << "\n";
  return 1;
}

// Follows the GPUPools with a watch from `rv`, printing each phase change, until the deadline
// (none: until interrupted) or o.maxChanges changes. A watch the server ends is resumed from the
// last resourceVersion; an expired one lists again and reports what changed meanwhile.
int follow(CommandContext& c, const MovesOptions& o, Watcher& w, std::string rv) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = o.watchTimeout.count() > 0
                            ? std::optional<Clock::time_point>(Clock::now() + o.watchTimeout)
                            : std::nullopt;
  while (true) {
    kube::ListOptions opts;
    opts.resourceVersion = rv;
    opts.allowWatchBookmarks = true;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::seconds>(*deadline - Clock::now());
      if (left.count() <= 0) {
        return 0;
      }
      opts.timeoutSeconds = static_cast<int>(left.count());
    }
    bool enough = false;
    bool expired = false;
    std::optional<kube::ApiError> streamError;
    auto st = c.cluster.watch(api::gvr::gpuPools(), "", opts, [&](kube::WatchEvent&& ev) {
      if (ev.type == "ERROR") {
        auto e = kube::statusFromJson(ev.object);
        (e.isExpired() ? expired : enough) = true;
        if (!e.isExpired()) {
          streamError = std::move(e);
        }
        return false;
      }
      const std::string next =
          ev.object.value("metadata", json::object()).value("resourceVersion", std::string());
      if (!next.empty()) {
        rv = next;
      }
      if (ev.type == "ADDED" || ev.type == "MODIFIED") {
        enough = !w.take(ev.object, true);
      }
      return !enough;
    });
    if (streamError) {
      return failed(c, *streamError, "watch");
    }
    if (!st && !st.error().isExpired()) {
      return failed(c, st.error(), "watch");
    }
    if (enough) {
      return 0;
    }
    if (expired || !st) {
      auto pools = c.cluster.list(api::gvr::gpuPools(), "");
      if (!pools) {
        return failed(c, pools.error(), "list");
      }
      for (const json& p : pools->items) {
        if (!w.take(p, true)) {
          return 0;
        }
      }
      rv = pools->resourceVersion;
    }
  }
}

}  // namespace

int movesCommand(CommandContext& c, const MovesOptions& o) {
  auto pools = c.cluster.list(api::gvr::gpuPools(), "");
  if (!pools) {
    return failed(c, pools.error(), "list");
  }
  if (!o.pool.empty() && std::none_of(pools->items.begin(), pools->items.end(),
                                      [&](const json& p) { return nameOf(p) == o.pool; })) {
    c.err << "error: GPUPool \"" << o.pool << "\" not found\n";
    return 1;
  }
  const View v = movesView(pools->items, o.pool, c.now());
  if (c.format == OutputFormat::kJson || c.format == OutputFormat::kYaml) {
    c.out << renderItems(v, c.format);
  } else if (v.table.rows.empty()) {
    c.err << v.emptyMessage << "\n";
  } else {
    c.out << renderTable(v.table, c.format == OutputFormat::kWide);
  }
  if (!o.watch) {
    return 0;
  }
  c.out.flush();
  Watcher w{c, o, {}, 0};
  for (const json& p : pools->items) {
    (void)w.take(p, false);
  }
  return follow(c, o, w, pools->resourceVersion);
}

namespace {

bool hasGpu(const json& pool, const std::string& gpu) {
  for (const api::PoolGpu& g : api::parsePoolGpus(pool).gpus) {
    if (g.id == gpu) {
      return true;
    }
  }
  return false;
}

json quarantineOf(const json& pool) {
  const json status = pool.value("status", json::object());
  const auto q = status.find("quarantine");
  return q != status.end() && q->is_array() ? *q : json::array();
}

json::const_iterator findEntry(const json& quarantine, const std::string& gpu) {
  return std::find_if(quarantine.begin(), quarantine.end(), [&](const json& e) {
    return e.is_object() && e.value("gpu", std::string()) == gpu;
  });
}

// The pool that holds the GPU: the named one, or the only pool listing it.
kube::ApiResult<json> findPool(CommandContext& c, const QuarantineOptions& o, std::string& why) {
  if (!o.pool.empty()) {
    auto p = c.cluster.get(api::gvr::gpuPools(), "", o.pool);
    if (!p && p.error().isNotFound() && p.error().details.is_object() &&
        p.error().details.contains("name")) {
      why = "GPUPool \"" + o.pool + "\" not found";
    }
    return p;
  }
  auto pools = c.cluster.list(api::gvr::gpuPools(), "");
  if (!pools) {
    return pools.error();
  }
  std::vector<json> holders;
  for (const json& p : pools->items) {
    const json quarantine = quarantineOf(p);
    if (hasGpu(p, o.gpu) || findEntry(quarantine, o.gpu) != quarantine.end()) {
      holders.push_back(p);
    }
  }
  if (holders.size() == 1) {
    return holders.front();
  }
  why = holders.empty() ? "no GPUPool lists GPU " + o.gpu
                        : "GPU " + o.gpu + " is listed by several GPUPools; name one with --pool";
  kube::ApiError e;
  e.httpCode = 404;
  e.message = why;
  return e;
}

void recordEvent(CommandContext& c, const json& pool, const QuarantineOptions& o) {
  const std::string now = formatRfc3339(c.now());
  const json meta = pool.value("metadata", json::object());
  const json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", nameOf(pool) + "."}, {"namespace", "default"}}},
      {"involvedObject",
       {{"apiVersion", std::string(api::kGpuPoolApiVersion)},
        {"kind", std::string(api::kGpuPoolKind)},
        {"name", nameOf(pool)},
        {"uid", meta.value("uid", std::string())}}},
      {"reason", o.quarantine ? "GPUQuarantined" : "GPUQuarantineReleased"},
      {"message", "GPU " + o.gpu + (o.quarantine ? " quarantined" : " released") +
                      " by an operator: " + o.reason},
      {"type", o.quarantine ? "Warning" : "Normal"},
      {"source", {{"component", "kubectl-kubecomp"}}},
      {"reportingComponent", "kubectl-kubecomp"},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1}};
  if (auto r = c.cluster.create(kube::gvr::events(), "default", event); !r) {
    c.err << "warning: the Event was not recorded: "
          << describeFailure(r.error(), kube::gvr::events(), "create", c.cluster.server()) << "\n";
  }
}

}  // namespace

int gpuCommand(CommandContext& c, const QuarantineOptions& o) {
  if (!api::isValidGpuId(o.gpu) || o.reason.empty()) {
    c.err << "error: " << (o.reason.empty() ? "--reason is required" : "invalid GPU id " + o.gpu)
          << "\n";
    return 2;
  }
  std::string why;
  auto pool = findPool(c, o, why);
  for (int attempt = 0; pool && attempt < 5; ++attempt) {
    const std::string name = nameOf(*pool);
    json quarantine = quarantineOf(*pool);
    const auto entry = findEntry(quarantine, o.gpu);
    if (o.quarantine && entry != quarantine.end()) {
      c.out << "GPU " << o.gpu << " of pool " << name
            << " is already quarantined: " << entry->value("reason", std::string()) << "\n";
      return 0;
    }
    if (!o.quarantine && entry == quarantine.end()) {
      c.out << "GPU " << o.gpu << " of pool " << name << " is not quarantined\n";
      return 0;
    }
    if (o.quarantine && !hasGpu(*pool, o.gpu)) {
      c.err << "error: GPUPool " << name << " has no GPU " << o.gpu
            << " (kubectl kubecomp pools lists its GPUs)\n";
      return 1;
    }
    if (o.quarantine) {
      quarantine.push_back({{"gpu", o.gpu}, {"reason", o.reason}});
    } else {
      quarantine.erase(entry);
    }
    json updated = *pool;
    updated["status"]["quarantine"] = quarantine;
    auto r = c.cluster.updateStatus(api::gvr::gpuPools(), updated);
    if (r) {
      recordEvent(c, *r, o);
      c.out << "GPU " << o.gpu << " of pool " << name
            << (o.quarantine ? " quarantined: " : " released: ") << o.reason << "\n";
      return 0;
    }
    if (!r.error().isConflict()) {
      return failed(c, r.error(), "update");
    }
    pool = c.cluster.get(api::gvr::gpuPools(), "", name);  // changed meanwhile: read it again
  }
  if (!pool) {
    if (!why.empty()) {
      c.err << "error: " << why << "\n";
      return 1;
    }
    return failed(c, pool.error(), o.pool.empty() ? "list" : "get");
  }
  c.err << "error: GPUPool " << nameOf(*pool) << " kept changing; try again\n";
  return 1;
}

}  // namespace kc::kubectl
