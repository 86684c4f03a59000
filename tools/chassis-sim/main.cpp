// chassis-sim: a simulated PCIe-fabric GPU chassis (test double) serving the H3 Falcon and
// DMTF Redfish dialects from one in-memory model. Thin main: flags, build, run.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "libcore/cli/flags.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/obs/shutdown.hpp"
#include "tools/chassis-sim/host_trees.hpp"
#include "tools/chassis-sim/model.hpp"
#include "tools/chassis-sim/server.hpp"

namespace {

struct HostTreeFlags {
  std::string root;
  std::int64_t visibleDelayMs = 300;
  bool needsRescan = false;
};

void addHostTreeFlags(CLI::App& app, HostTreeFlags& f) {
  auto* root =
      app.add_option("--host-root", f.root,
                     "also play the hosts' side: a sysfs/procfs/dev tree per host at\n"
                     "DIR/<system>/{sys,proc,dev} (<system> as in the topology; the demo names\n"
                     "systems after the Kubernetes nodes) showing the GPUs attached to it; the\n"
                     "topology's n-th GPU (from 0, all chassis in file order) is at BDF\n"
                     "0000:<0x10+n>:00.0 with minor n. Acts on a node agent's writes to\n"
                     "bus/pci/rescan and bus/pci/devices/<bdf>/remove (docs/fabric.md)")
          ->option_text("DIR");
  app.add_option("--host-visible-delay-ms", f.visibleDelayMs,
                 "an attached GPU appears in its host's tree this long after the attach (PCIe\n"
                 "hot-add and driver probe), times --latency-scale; a detached one goes at once")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{3'600'000}))
      ->capture_default_str()
      ->needs(root);
  app.add_flag("--host-needs-rescan", f.needsRescan,
               "an attached GPU appears only after its host's agent writes bus/pci/rescan (a\n"
               "kernel that missed the hot-add)")
      ->needs(root);
}

// Starts the host trees when --host-root is given; null otherwise.
kc::Result<std::shared_ptr<kc::chassis_sim::HostTrees>> startHostTrees(
    kc::chassis_sim::ChassisModel& model, const HostTreeFlags& f, double latencyScale) {
  if (f.root.empty()) {
    return std::shared_ptr<kc::chassis_sim::HostTrees>();
  }
  kc::chassis_sim::HostTreeOptions options;
  options.root = f.root;
  options.visibleDelay = kc::chassis_sim::Millis{
      static_cast<std::int64_t>(static_cast<double>(f.visibleDelayMs) * latencyScale)};
  options.needsRescan = f.needsRescan;
  options.onError = [](const std::string& message) {
    std::cerr << "chassis-sim: host tree: " << message << std::endl;
  };
  return kc::chassis_sim::attachHostTrees(model, std::move(options));
}

// How the Redfish side is served: a BMC's per-GET time, and HTTPS.
struct ServingFlags {
  std::int64_t redfishGetLatencyMs = 0;
  std::string tlsCertFile;
  std::string tlsKeyFile;
};

void addServingFlags(CLI::App& app, ServingFlags& f) {
  app.add_option("--redfish-get-latency-ms", f.redfishGetLatencyMs,
                 "added to every Redfish GET, x --latency-scale (a BMC's time per request;\n"
                 "concurrent GETs wait concurrently)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{60'000}))
      ->capture_default_str();
  auto* cert = app.add_option("--tls-cert-file", f.tlsCertFile,
                              "serve HTTPS with this PEM certificate chain (leaf first)");
  auto* key = app.add_option("--tls-key-file", f.tlsKeyFile, "its PEM private key");
  cert->needs(key);
  key->needs(cert);
}

void applyServingFlags(const ServingFlags& f, double latencyScale,
                       kc::chassis_sim::SimServerOptions& options) {
  options.redfishGetLatency = kc::chassis_sim::Millis{
      static_cast<std::int64_t>(static_cast<double>(f.redfishGetLatencyMs) * latencyScale)};
  if (!f.tlsCertFile.empty()) {
    kc::net::ServerTlsOptions tls;
    tls.certFile = f.tlsCertFile;
    tls.keyFile = f.tlsKeyFile;
    options.tls = tls;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "chassis-sim: simulated PCIe-fabric GPU chassis (a TEST DOUBLE, not a chassis).\n"
      "Serves the H3 Falcon h3api/v1 and DMTF Redfish composition dialects from one in-memory\n"
      "model loaded from --topology, with per-operation latency (defaults: the measured H3\n"
      "figures, inventory 3-4 s, unassign 5-8 s, assign 8-16 s, times --latency-scale) and\n"
      "fault injection through the control API (GET /sim/v1/state, POST|DELETE /sim/v1/faults,\n"
      "DELETE /sim/v1/sessions). With --host-root it also plays the hosts' PCIe side (fake\n"
      "sysfs/procfs trees a node agent reads).\n"
      "It PERSISTS NOTHING: every start begins from the topology file and all state is lost\n"
      "on exit."};
  std::string topologyPath;
  std::string bind = "127.0.0.1";
  std::uint16_t port = 8080;
  double latencyScale = 1.0;
  std::string dialect = "both";
  std::string redfishProfile;
  std::string basicAuth;
  std::string credentialsFile;
  std::uint64_t seed = 1;
  unsigned ioThreads = 2;
  HostTreeFlags hostTrees;
  app.add_option("--topology", topologyPath, "chassis topology, JSON or YAML (see docs/fabric.md)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--bind-address", bind, "address to listen on")->capture_default_str();
  kc::cli::addDeprecatedFlag(app, "--bind", "--bind-address",
                             [&bind](const std::string& v) { bind = v; });
  app.add_option("--port", port, "port to listen on (0 = ephemeral, printed at start)")
      ->capture_default_str();
  app.add_option("--latency-scale", latencyScale, "multiplies every operation latency; 0 = instant")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--dialect", dialect, "dialects to serve")
      ->check(CLI::IsMember({"h3", "redfish", "both"}))
      ->capture_default_str();
  app.add_option("--redfish-profile", redfishProfile,
                 "Redfish profile, overriding the topology's redfish.profile (default classic).\n"
                 "classic: DSP0266 as written (Members lists, Add/RemoveResourceBlock actions).\n"
                 "emulator: what public implementations do: 308 redirects to trailing-slash\n"
                 "routes, collections listing Links.Members, hosts as Compute ResourceBlocks,\n"
                 "composition only by POST to Systems and DELETE of the composed system.\n"
                 "fabric: DSP0268 Fabrics: Endpoints, attach by POSTing a Connection,\n"
                 "detach by DELETE of it")
      ->check(CLI::IsMember({"classic", "emulator", "fabric"}));
  auto* basic =
      app.add_option("--basic-auth", basicAuth, "require these credentials, user:password");
  app.add_option("--credentials-file", credentialsFile,
                 "require credentials from a file (user:password) or a Secret directory (username, "
                 "password)")
      ->excludes(basic);
  app.add_option("--seed", seed, "seed of the latency sampling")->capture_default_str();
  app.add_option("--io-threads", ioThreads, "HTTP io threads")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  addHostTreeFlags(app, hostTrees);
  ServingFlags serving;
  addServingFlags(app, serving);
  kc::cli::addVersionFlag(app, "chassis-sim");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }

  auto topology = kc::chassis_sim::loadTopology(topologyPath);
  if (!topology) {
    std::cerr << "chassis-sim: " << topology.error().message << "\n";
    return 2;
  }
  topology->latencies.scale = latencyScale;
  if (!redfishProfile.empty()) {
    topology->redfishProfile = *kc::chassis_sim::parseRedfishProfile(redfishProfile);
  }
  kc::chassis_sim::SimServerOptions options;
  options.bindAddress = bind;
  options.port = port;
  options.h3 = dialect != "redfish";
  options.redfish = dialect != "h3";
  options.ioThreads = ioThreads;
  applyServingFlags(serving, latencyScale, options);
  if (!basicAuth.empty() || !credentialsFile.empty()) {
    auto creds = basicAuth.empty() ? kc::fabric::loadCredentials(credentialsFile)
                                   : kc::fabric::parseUserPass(basicAuth);
    if (!creds) {
      std::cerr << "chassis-sim: " << creds.error().message << "\n";
      return 2;
    }
    options.credentials = *creds;
  }
  auto model = std::make_shared<kc::chassis_sim::ChassisModel>(*topology, seed);
  auto trees = startHostTrees(*model, hostTrees, latencyScale);
  if (!trees) {
    std::cerr << "chassis-sim: " << trees.error().message << "\n";
    return 1;
  }
  kc::chassis_sim::SimServer server(model, options);
  auto bound = server.start();
  if (!bound) {
    std::cerr << "chassis-sim: cannot listen on " << bind << ":" << port << ": "
              << bound.error().message << "\n";
    return 1;
  }
  std::cout << "chassis-sim listening on " << server.baseUrl() << " (dialects: " << dialect
            << ", redfish profile " << kc::chassis_sim::toString(topology->redfishProfile)
            << ", latency scale " << latencyScale << ", persists nothing)\n";
  for (const auto& name : model->chassisNames()) {
    std::cout << "  chassis " << name << ": " << server.chassisUrl(name) << "\n";
  }
  for (const auto& system : *trees ? (*trees)->systems() : std::vector<std::string>{}) {
    std::cout << "  host " << system << ": " << hostTrees.root << "/" << system
              << "/{sys,proc,dev}\n";
  }
  std::cout << std::flush;

  kc::obs::ShutdownHandler shutdown({nullptr, {}, [&server] { server.stop(); }});
  if (auto st = shutdown.install(); !st) {
    std::cerr << "chassis-sim: " << st.error().message << "\n";
    return 1;
  }
  shutdown.wait();
  if (*trees) {
    (*trees)->stop();
  }
  std::cout << "chassis-sim stopped (" << shutdown.reason() << ")\n";
  return 0;
}
