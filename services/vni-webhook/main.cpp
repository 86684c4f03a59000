// vni-webhook: Metacontroller DecoratorController hooks (/sync, /finalize, /customize) that
// allocate Slingshot VNIs to job-like objects. Thin main: flags -> library -> run.
// `vni-webhook admin ...` is the operator CLI (list, audit, release orphans).

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "libcore/cli/flags.hpp"
#include "services/vni-webhook/admin_cli.hpp"
#include "services/vni-webhook/webhook_cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"vni-webhook: Slingshot VNI allocation for Metacontroller DecoratorControllers"};
  app.set_config();
  kc::vni::WebhookFlags flags;
  kc::vni::addWebhookFlags(app, flags);
  kc::vni::AdminCliOptions adminOptions;
  CLI::App* admin = kc::vni::addAdminCommand(app, adminOptions);
  kc::cli::addVersionFlag(app, "vni-webhook");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  if (admin->parsed()) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return kc::vni::runAdminCommand(
        adminOptions, std::cin, std::cout, std::cerr,
        std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  }
  return kc::vni::runWebhook(flags);
}
