#pragma once
// What rt-kubelet-shim runs on a node, built from its command line: the shim (reservations,
// cgroups, what it publishes), its channel to the real runtime, the CRI proxy kubelet talks to
// on our socket, and their health checks (our socket present, the runtime reachable, the state
// rebuilt from the runtime).

#include <chrono>
#include <memory>
#include <string>

#include "libcore/base/result.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/obs/health.hpp"
#include "services/rt-kubelet-shim/command_line.hpp"
#include "services/rt-kubelet-shim/cri_proxy.hpp"
#include "services/rt-kubelet-shim/shim.hpp"

namespace kc::kube {
class KubeClient;
}
namespace kc::obs {
class Metrics;
}

namespace kc::rtshim {

class ShimServer {
 public:
  // Detects RT support, connects to the runtime (waiting c.runtimeConnect), rebuilds the shim's
  // reservations from what runs there and adds the health checks to `health`. `client` may be
  // null (--no-api). Errors: the runtime unreachable, the rebuild failed.
  static Result<std::unique_ptr<ShimServer>> create(const CommandLine& c, kube::KubeClient* client,
                                                    obs::Metrics* metrics,
                                                    obs::HealthChecks& health);

  // Serves our socket.
  Status start();
  // In-flight CRI calls get `grace`, then the shim stops; reservations stay in the cgroups for
  // the next start.
  void stop(std::chrono::milliseconds grace);

 private:
  struct Token {};  // only create() constructs one

 public:
  ShimServer(Token, const CommandLine& c, RtSupport support, kube::KubeClient* client,
             obs::Metrics* metrics);

 private:
  std::string socket_;
  std::string runtime_;
  RtShim shim_;
  std::shared_ptr<grpc::Channel> channel_;
  CriProxy proxy_;
  grpcx::UnixServer server_;
};

}  // namespace kc::rtshim
