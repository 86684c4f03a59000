#pragma once
// The vni-webhook server as main() runs it: its flags (each also read from a VNI_WEBHOOK_*
// environment variable) and the run itself: logging, the single-writer lock on the
// database, the VNI service, the HTTP frontend, and the SIGTERM sequence.

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/alloc/vni_range.hpp"
#include "libcore/base/result.hpp"
#include "libcore/obs/daemon_flags.hpp"
#include "services/vni-webhook/admin_cli.hpp"

namespace CLI {
class App;
}

namespace kc::vni {

struct WebhookFlags {
  // --listen, --port (the hooks' port, health and metrics too), --log-level, --log-format and
  // --port-file; all but --port-file also from VNI_WEBHOOK_*.
  obs::DaemonFlags daemon{
      .port = 8842,
      .style = {.listenHelp = "bind address",
                .portHelp = "TCP port (0 = ephemeral)",
                .portFileHelp = "write the bound port here once serving (tests)",
                .envPrefix = "VNI_WEBHOOK_",
                .showDefaults = false}};
  std::string db = kDefaultDbPath;
  std::uint32_t vniMin = alloc::kDefaultVniMin;
  std::uint32_t vniMax = alloc::kDefaultVniMax;
  std::string reserved = "1,10";
  double cooldownSec = 60;
  std::int64_t podWaitSec = 300;
  std::string durability = "full";
  std::size_t bodyLimit = 16u << 20;
  unsigned ioThreads = 2;
  std::size_t maxBatch = 1024;
  std::string tlsCert;
  std::string tlsKey;
  int lockWaitSec = 30;
  double shutdownDelaySec = 0;
  double drainSec = 10;
};

void addWebhookFlags(CLI::App& app, WebhookFlags& flags);

// "1,10" -> {0, 1, 10} (0 is always reserved). Error "invalid" on anything but decimal VNIs
// below 65536.
Result<std::vector<alloc::Vni>> parseReservedVnis(const std::string& text);

// Serves until SIGTERM/SIGINT. Exit status: 0 after a graceful stop, 1 when it cannot start,
// 2 on bad flags.
int runWebhook(const WebhookFlags& flags);

}  // namespace kc::vni
