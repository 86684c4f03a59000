#pragma once
// ApiServer: the Kubernetes REST surface of the test double. It parses paths and query
// parameters the way kube-apiserver does, calls the ObjectStore and renders responses
// (objects, lists without item kind/apiVersion, Status errors, newline-delimited watch
// streams). It is HTTP-library neutral apart from kc::net's Request/ResponseStream types,
// so tests drive it directly with a fake stream.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "libcore/net/http_server.hpp"
#include "tools/kube-apiserver-double/object_store.hpp"

namespace kc::apiserver {

struct Faults {
  double errorFraction = 0.0;              // answer 500 InternalError on this share of API requests
  std::chrono::milliseconds delay{0};      // added before every API response
  bool delayWatchesOnly = false;           // apply the delay to watch requests only
  std::uint64_t dropWatchAfterEvents = 0;  // end every watch after N events (0 = never)
  double dropWatchProbability = 0.0;       // end a watch after an event with this probability
  bool expiredAsEvent = true;              // 410 for an old watch RV as ERROR event (else HTTP 410)
};

struct ApiServerOptions {
  std::string bearerToken;  // empty: no authentication
  std::uint64_t seed = 1;
  std::chrono::seconds defaultWatchTimeout{1800};  // --min-request-timeout of the real server
  std::string gitVersion = "v1.30.0-kubecomp-test-double";
};

class ApiServer {
 public:
  ApiServer(ObjectStore& store, ApiServerOptions options, Faults faults = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Serves any request (register as the server's stream fallback).
  void serve(const net::Request& request, std::shared_ptr<net::ResponseStream> stream);
  // Non-streaming requests only (watch requests answer 400 here); convenient for tests.
  net::Response handle(const net::Request& request);

  void setFaults(const Faults& faults);
  Faults faults() const;

 private:
  struct Route;
  net::Response dispatch(const net::Request& request,
                         const std::shared_ptr<net::ResponseStream>& stream, bool& streamed,
                         bool delayApplied = false);
  net::Response serveResource(const net::Request& request, const Route& route,
                              const std::shared_ptr<net::ResponseStream>& stream, bool& streamed);
  net::Response control(const net::Request& request);
  bool shouldFail();
  // The delay fault: a delayed request waits in this queue and is answered by one worker
  // thread when due (through its ResponseStream), so io threads never sleep and
  // other requests (and /_double/faults) keep being served.
  struct Delayed {
    std::chrono::steady_clock::time_point due;
    net::Request request;
    std::shared_ptr<net::ResponseStream> stream;
  };
  void enqueueDelayed(const net::Request& request, std::shared_ptr<net::ResponseStream> stream,
                      std::chrono::milliseconds delay);
  void delayLoop();

  ObjectStore& store_;
  const ApiServerOptions options_;
  mutable std::mutex faultsMu_;  // guards faults_ and rng_
  Faults faults_;
  std::mt19937_64 rng_;
  std::mutex delayMu_;  // guards delayed_, stopping_, delayThread_ start
  std::condition_variable delayCv_;
  std::vector<Delayed> delayed_;
  bool stopping_ = false;
  std::thread delayThread_;
};

}  // namespace kc::apiserver
