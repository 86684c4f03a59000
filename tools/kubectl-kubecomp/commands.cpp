#include "tools/kubectl-kubecomp/commands.hpp"

#include <ostream>

#include "libcore/api/names.hpp"
#include "tools/kubectl-kubecomp/views.hpp"

namespace kc::kubectl {

using nlohmann::json;

namespace {

std::string resourceName(const kube::GroupVersionResource& r) {
  return r.group.empty() ? r.resource : r.resource + "." + r.group;
}

// The kubecomp CRD that serves a resource, for the "not installed" hint.
std::string installHint(const kube::GroupVersionResource& r) {
  if (r.group == api::kGroup || r.group == api::kBridgeGroup) {
    return "; install the kubecomp CRDs (kubectl apply -f charts/kubecomp/crds/, or the Helm "
           "chart)";
  }
  if (r.group == "resource.k8s.io") {
    return "; the cluster has no Dynamic Resource Allocation API " + r.version +
           " (Kubernetes 1.34 or newer serves it)";
  }
  return "";
}

int fail(CommandContext& c, const kube::ApiError& e, const kube::GroupVersionResource& r,
         const std::string& verb) {
  c.err << "error: " << describeFailure(e, r, verb, c.cluster.server()) << "\n";
  return 1;
}

// Lists a resource in the command's namespace scope (cluster-scoped: everything).
kube::ApiResult<kube::ObjectList> listScoped(CommandContext& c, const kube::GroupVersionResource& r,
                                             const kube::ListOptions& opts = {}) {
  return c.cluster.list(r, r.namespaced ? c.ns : std::string(), opts);
}

int print(CommandContext& c, const View& v) {
  if (c.format == OutputFormat::kJson || c.format == OutputFormat::kYaml) {
    c.out << renderItems(v, c.format);
    return 0;
  }
  c.out << v.preface;
  if (v.table.rows.empty()) {
    c.err << v.emptyMessage << "\n";
    return 0;
  }
  c.out << renderTable(v.table, c.format == OutputFormat::kWide);
  return 0;
}

}  // namespace

std::string describeFailure(const kube::ApiError& e, const kube::GroupVersionResource& r,
                            const std::string& verb, const std::string& server) {
  const std::string what = resourceName(r);
  if (e.isTransport()) {
    return "cannot reach the API server at " + server + ": " + e.message;
  }
  if (e.isUnauthorized()) {
    return "the API server at " + server +
           " refused the credentials (401 Unauthorized); check the user of the kubeconfig "
           "context: " +
           e.message;
  }
  if (e.isForbidden()) {
    return "access denied (403 Forbidden): " + e.message + " (needs RBAC permission to " + verb +
           " " + what + ")";
  }
  const bool namedObject = e.details.is_object() && e.details.contains("name");
  if (e.isNotFound() && !namedObject) {
    return "the server at " + server + " does not serve " + what + "/" + r.version +
           " (404 Not Found)" + installHint(r);
  }
  return e.describe();
}

int poolsCommand(CommandContext& c) {
  const auto r = api::gvr::gpuPools();
  auto pools = c.cluster.list(r, "");
  if (!pools) {
    return fail(c, pools.error(), r, "list");
  }
  return print(c, poolsView(pools->items));
}

int pendingCommand(CommandContext& c) {
  auto pods = listScoped(c, kube::gvr::pods());
  if (!pods) {
    return fail(c, pods.error(), kube::gvr::pods(), "list");
  }
  // The moves in flight and the Events only add detail: without them the waiting pods and the
  // scheduler's reasons are still shown.
  std::vector<json> pools;
  if (auto p = c.cluster.list(api::gvr::gpuPools(), ""); p) {
    pools = std::move(p->items);
  } else if (!p.error().isNotFound()) {
    c.err << "warning: GPU moves not shown: "
          << describeFailure(p.error(), api::gvr::gpuPools(), "list", c.cluster.server()) << "\n";
  }
  std::vector<json> events;
  if (auto e = listScoped(c, kube::gvr::events()); e) {
    events = std::move(e->items);
  } else {
    c.err << "warning: Events not shown: "
          << describeFailure(e.error(), kube::gvr::events(), "list", c.cluster.server()) << "\n";
  }
  return print(c, pendingView(pods->items, events, pools, c.now(), c.allNamespaces));
}

int vnisCommand(CommandContext& c) {
  const auto r = api::gvr::vnis();
  auto vnis = listScoped(c, r);
  if (!vnis) {
    return fail(c, vnis.error(), r, "list");
  }
  return print(c, vnisView(vnis->items, c.now(), c.allNamespaces));
}

int rtCommand(CommandContext& c, const std::string& node) {
  auto n = c.cluster.get(kube::gvr::nodes(), "", node);
  if (!n) {
    if (n.error().isNotFound()) {
      c.err << "error: node \"" << node << "\" not found\n";
      return 1;
    }
    return fail(c, n.error(), kube::gvr::nodes(), "get");
  }
  kube::ListOptions opts;
  opts.fieldSelector = "spec.nodeName=" + node;
  auto pods = c.cluster.list(kube::gvr::pods(), "", opts);
  if (!pods) {
    return fail(c, pods.error(), kube::gvr::pods(), "list");
  }
  auto v = rtView(*n, pods->items);
  if (!v) {
    c.err << "error: " << v.error().message << "\n";
    return 1;
  }
  return print(c, *v);
}

int bridgeJobsCommand(CommandContext& c) {
  const auto r = api::gvr::bridgeJobs();
  auto jobs = listScoped(c, r);
  if (!jobs) {
    return fail(c, jobs.error(), r, "list");
  }
  return print(c, bridgeJobsView(jobs->items, c.now(), c.allNamespaces));
}

int claimsCommand(CommandContext& c) {
  const auto r = api::gvr::resourceClaims();
  auto claims = listScoped(c, r);
  if (!claims) {
    return fail(c, claims.error(), r, "list");
  }
  return print(c, claimsView(claims->items, c.now(), c.allNamespaces));
}

}  // namespace kc::kubectl
