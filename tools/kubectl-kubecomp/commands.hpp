#pragma once
// The commands of kubectl-kubecomp over a Cluster: read what they need, build the view
// (views.hpp), print it; gpu quarantine|release write the pool's status.quarantine. Each returns
// the process exit code: 0 done, 1 the API refused or failed (the message says why: CRDs not
// installed, access denied, unreachable), 2 bad arguments.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "libcore/kube/api_error.hpp"
#include "libcore/kube/resource.hpp"
#include "tools/kubectl-kubecomp/cluster.hpp"
#include "tools/kubectl-kubecomp/output.hpp"

namespace kc::kubectl {

struct CommandContext {
  Cluster& cluster;
  std::ostream& out;
  std::ostream& err;
  std::function<std::chrono::system_clock::time_point()> now;
  OutputFormat format = OutputFormat::kTable;
  std::string ns;  // the namespace to read ("" with allNamespaces)
  bool allNamespaces = false;
};

int poolsCommand(CommandContext& c);

struct MovesOptions {
  std::string pool;
  bool watch = false;
  // Stop watching after this long (0: when interrupted) or after this many phase changes
  // (0: no limit).
  std::chrono::milliseconds watchTimeout{0};
  std::uint32_t maxChanges = 0;
};
int movesCommand(CommandContext& c, const MovesOptions& o);

int pendingCommand(CommandContext& c);
int vnisCommand(CommandContext& c);
int rtCommand(CommandContext& c, const std::string& node);
int bridgeJobsCommand(CommandContext& c);
int claimsCommand(CommandContext& c);

struct QuarantineOptions {
  bool quarantine = true;  // false: release
  std::string gpu;
  std::string pool;  // "" find the pool that has the GPU
  std::string reason;
};
int gpuCommand(CommandContext& c, const QuarantineOptions& o);

// The sentence for a failed call on resource `r` ("gpupools.kubecomp.io"): a 404 on a collection
// means the API is not served (CRDs not installed), 403 access denied (with the verb and
// resource), 401 refused credentials, no answer the server unreachable.
std::string describeFailure(const kube::ApiError& e, const kube::GroupVersionResource& r,
                            const std::string& verb, const std::string& server);

}  // namespace kc::kubectl
