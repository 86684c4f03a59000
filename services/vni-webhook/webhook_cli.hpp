#pragma once
// The vni-webhook server as main() runs it: its flags (each also read from a VNI_WEBHOOK_*
// environment variable) and the run itself: logging, the single-writer lock on the
// database, the VNI service, the HTTP frontend, and the SIGTERM sequence.

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/alloc/vni_range.hpp"
#include "libcore/base/result.hpp"
#include "services/vni-webhook/admin_cli.hpp"

namespace CLI {
class App;
}

namespace kc::vni {

struct WebhookFlags {
  std::string listen = "0.0.0.0";
  std::uint16_t port = 8842;
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
  std::string logLevel = "info";
  std::string logFormat = "text";
  int lockWaitSec = 30;
  std::string portFile;
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
