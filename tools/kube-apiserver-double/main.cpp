// kube-apiserver-double: an in-memory Kubernetes API server TEST DOUBLE.
// For tests and the local demo only. Not for production: no persistence, no admission,
// no RBAC, and of the controllers only PodDisruptionBudget status and the resourceclaim
// controller. See docs/apiserver-double.md.

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "tools/kube-apiserver-double/double_server.hpp"

namespace {

bool writeFile(const std::string& path, const std::string& content, bool secret) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) {
      return false;
    }
    out << content;
    if (!out) {
      return false;
    }
  }
  if (secret) {
    std::error_code ec;
    std::filesystem::permissions(
        tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
        std::filesystem::perm_options::replace, ec);
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see half a file
}

}  // namespace

int main(int argc, char** argv) {
  kc::apiserver::DoubleOptions o;
  std::string tokenFile;
  std::string kubeconfigOut;
  std::string caOut;
  std::string expiredAs = "event";
  std::size_t historyWindow = o.store.historyWindow;
  std::int64_t bookmarkMs = o.store.bookmarkInterval.count();
  std::int64_t delayMs = 0;

  CLI::App app{
      "kube-apiserver-double: an in-memory Kubernetes API server TEST DOUBLE for tests and local "
      "demos.\n"
      "NOT FOR PRODUCTION: memory only; no admission, no RBAC, two in-process controllers.",
      "kube-apiserver-double"};
  app.add_option("--bind-address", o.bindAddress, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "Port (0 = pick a free one; see --kubeconfig-out)")
      ->capture_default_str();
  app.add_flag("--plain-http", o.plainHttp, "Serve plain HTTP instead of HTTPS");
  app.add_option("--tls-cert-file", o.tlsCertFile,
                 "Serving certificate (default: generate a CA + certificate)");
  app.add_option("--tls-private-key-file", o.tlsKeyFile, "Serving key for --tls-cert-file");
  app.add_option("--token", o.bearerToken,
                 "Bearer token clients must send (empty: no authentication)");
  app.add_option("--token-file", tokenFile, "Read the bearer token from this file")
      ->check(CLI::ExistingFile);
  app.add_option("--kubeconfig-out", kubeconfigOut,
                 "Write a kubeconfig for this server here once it listens");
  app.add_option("--ca-out", caOut, "Write the generated CA certificate (PEM) here");
  app.add_option("--history-window", historyWindow,
                 "Changes kept for WATCH/exact LIST; older RVs get 410")
      ->capture_default_str()
      ->check(CLI::Range(static_cast<std::size_t>(1), static_cast<std::size_t>(100'000'000)));
  app.add_option("--bookmark-interval-ms", bookmarkMs,
                 "Bookmark period for watches that allow them")
      ->capture_default_str()
      ->check(CLI::Range(10, 3'600'000));
  app.add_option("--expired-as", expiredAs,
                 "How an expired watch RV is answered: event (200 + ERROR) or http (410)")
      ->check(CLI::IsMember({"event", "http"}))
      ->capture_default_str();
  app.add_option("--drop-watch-after", o.faults.dropWatchAfterEvents,
                 "Fault: end each watch after N events (0 = off)");
  app.add_option("--drop-watch-probability", o.faults.dropWatchProbability,
                 "Fault: end a watch after an event with p")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--error-fraction", o.faults.errorFraction,
                 "Fault: answer 500 on this fraction of API requests")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--delay-ms", delayMs, "Fault: delay every API response")
      ->check(CLI::Range(0, 600'000));
  app.add_option("--seed", o.seed, "Seed for uids, generated names and fault randomness")
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.maxBodyBytes, "Request body limit")->capture_default_str();
  app.add_option("--io-threads", o.ioThreads, "HTTP io threads")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  kc::cli::addVersionFlag(app, "kube-apiserver-double");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }

  if (!tokenFile.empty()) {
    std::ifstream in(tokenFile);
    std::getline(in, o.bearerToken);
    if (o.bearerToken.empty()) {
      std::cerr << "kube-apiserver-double: --token-file " << tokenFile << " is empty\n";
      return 2;
    }
  }
  o.store.historyWindow = historyWindow;
  o.store.bookmarkInterval = std::chrono::milliseconds(bookmarkMs);
  o.faults.expiredAsEvent = expiredAs == "event";
  o.faults.delay = std::chrono::milliseconds(delayMs);

  // Block the stop signals before any thread starts, then wait for one below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kc::apiserver::DoubleServer server(o);
  auto port = server.start();
  if (!port) {
    std::cerr << "kube-apiserver-double: cannot start: " << port.error().message << "\n";
    return 1;
  }
  if (!caOut.empty() && !server.caCertPem().empty() &&
      !writeFile(caOut, server.caCertPem(), false)) {
    std::cerr << "kube-apiserver-double: cannot write " << caOut << "\n";
    return 1;
  }
  if (!kubeconfigOut.empty() && !writeFile(kubeconfigOut, server.kubeconfig(), true)) {
    std::cerr << "kube-apiserver-double: cannot write " << kubeconfigOut << "\n";
    return 1;
  }
  std::cerr << "kube-apiserver-double (TEST DOUBLE, in-memory, not for production) listening on "
            << server.baseUrl() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kube-apiserver-double: signal " << sig << ", stopping" << std::endl;
  server.stop();
  return 0;
}
