#include "tools/kubelet-standin/control.hpp"

namespace kc::kubelet {

void installControlEndpoints(net::HttpServer& server, KubeletStandin& standin,
                             bool debuggingHandlers) {
  server.route("GET", "/debug/pods", [&standin](const net::Request&) {
    return net::Response::json(200, standin.debugState());
  });
  if (debuggingHandlers) {
    server.route("POST", "/debug/simulate-restart", [&standin](const net::Request&) {
      if (auto st = standin.simulateRestart(); !st) {
        return net::Response::error(500, st.error().code, st.error().message);
      }
      return net::Response::json(
          200, {{"restarted", true}, {"registrationSocket", standin.registrationSocket()}});
    });
    // Runs one node status sync now (tests pin "device counts reach the Node only on a
    // status sync" with a long --node-status-update-frequency and this trigger).
    server.route("POST", "/debug/sync-node-status", [&standin](const net::Request&) {
      standin.requestNodeStatusSync();
      return net::Response::json(202, {{"queued", true}});
    });
  }
}

}  // namespace kc::kubelet
