// kubecomp-fabric: an operator's first step with new composable hardware, without Kubernetes.
// Reads one chassis (or every chassis of a fabric config) with the drivers reconfig-mgr uses
// (libcore/fabric) and shows what they see, and attaches, detaches and verifies one GPU. What
// works here works in the pool; what fails here fails with the same error there.

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/cli/flags.hpp"
#include "libcore/fabric/config.hpp"

namespace {

using nlohmann::json;

struct Flags {
  std::string config;
  std::string chassis;  // with --config: only this entry
  // One chassis from flags (without --config).
  std::string name = "chassis";
  std::string dialect;
  std::string url;
  std::string auth = "session";
  std::string credentialsFile;
  std::string caFile;
  bool insecure = false;
  std::uint32_t readParallelism = 4;
  bool noExpand = false;
  std::string style = "composition";
  std::string fabric;
  std::string gpuModel;
  std::string gep = "0";
  std::string output = "table";
  std::string gpu;
  std::string host;
};

// The fabric config of --config, or the one chassis the flags describe (validated the same way).
kc::Result<kc::fabric::FabricConfig> fabricConfig(const Flags& f) {
  kc::Result<kc::fabric::FabricConfig> config = kc::makeError(kc::errc::kInvalid, "unset");
  if (!f.config.empty()) {
    config = kc::fabric::loadFabricConfig(f.config);
  } else {
    if (f.dialect.empty() || f.url.empty()) {
      return kc::makeError(kc::errc::kInvalid,
                           "give --config FILE, or --dialect and --url for one chassis");
    }
    json c = {{"name", f.name}, {"dialect", f.dialect}, {"url", f.url}};
    if (f.dialect == "redfish") {
      c["auth"] = f.auth;
      c["readParallelism"] = f.readParallelism;
      c["expand"] = !f.noExpand;
      c["style"] = f.style;
      if (!f.fabric.empty()) {
        c["fabric"] = f.fabric;
      }
    } else {
      c["gpuModel"] = f.gpuModel;
      c["gep"] = f.gep;
    }
    if (!f.credentialsFile.empty()) {
      c["credentialsFile"] = f.credentialsFile;
    }
    if (!f.caFile.empty()) {
      c["caFile"] = f.caFile;
    }
    if (f.insecure) {
      c["insecureSkipVerify"] = true;
    }
    config = kc::fabric::parseFabricConfig(json{{"chassis", json::array({c})}}.dump());
  }
  if (config && !f.chassis.empty()) {
    std::erase_if(config->chassis,
                  [&](const kc::fabric::ChassisConfig& c) { return c.name != f.chassis; });
    if (config->chassis.empty()) {
      return kc::makeError(kc::errc::kNotFound, "no chassis " + f.chassis + " in " + f.config);
    }
  }
  return config;
}

json gpuJson(const kc::fabric::GpuInfo& g) {
  return {{"id", g.id},
          {"chassis", g.chassis},
          {"localId", g.localId},
          {"uuid", g.uuid},
          {"model", g.model},
          {"host", g.hostPort ? json(*g.hostPort) : json()},
          {"health", g.health == kc::fabric::GpuHealth::kOk ? "OK" : "Unhealthy"},
          {"healthDetail", g.healthDetail}};
}

int printInventory(kc::fabric::FabricPool& pool, const std::string& output) {
  json out = {{"chassis", json::array()}};
  int failed = 0;
  for (auto& c : pool.inventoryByChassis()) {
    json entry = {{"name", c.chassis}};
    if (!c.inventory) {
      entry["error"] = c.inventory.error().message;
      ++failed;
    } else {
      entry["hosts"] = c.inventory->hosts;
      entry["skipped"] = c.inventory->skipped;
      entry["gpus"] = json::array();
      for (const auto& g : c.inventory->gpus) {
        entry["gpus"].push_back(gpuJson(g));
      }
    }
    out["chassis"].push_back(entry);
  }
  if (output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& c : out["chassis"]) {
      const std::string name = c["name"];
      if (c.contains("error")) {
        std::printf("chassis %s: error: %s\n", name.c_str(), c["error"].get<std::string>().c_str());
        continue;
      }
      std::printf("chassis %s: %zu GPU(s), hosts: %s\n", name.c_str(), c["gpus"].size(),
                  c["hosts"].empty() ? "-" : c["hosts"].dump().c_str());
      std::printf("  %-28s %-14s %-44s %-24s %s\n", "GPU", "HOST", "UUID", "MODEL", "HEALTH");
      for (const auto& g : c["gpus"]) {
        const std::string uuid = g["uuid"];
        const std::string model = g["model"];
        std::printf("  %-28s %-14s %-44s %-24s %s%s\n", g["id"].get<std::string>().c_str(),
                    g["host"].is_null() ? "-" : g["host"].get<std::string>().c_str(),
                    uuid.empty() ? "-" : uuid.c_str(), model.empty() ? "-" : model.c_str(),
                    g["health"].get<std::string>().c_str(),
                    g["healthDetail"].get<std::string>().empty()
                        ? ""
                        : (" (" + g["healthDetail"].get<std::string>() + ")").c_str());
      }
      for (const auto& s : c["skipped"]) {
        std::printf("  left out: %s\n", s.get<std::string>().c_str());
      }
    }
  }
  return failed == 0 ? kc::cli::kExitOk : kc::cli::kExitFailure;
}

int printMove(const kc::Result<kc::fabric::MoveReport>& r, const std::string& verb,
              const std::string& output) {
  if (!r) {
    std::fprintf(stderr, "kubecomp-fabric: %s: %s (%s)\n", verb.c_str(), r.error().message.c_str(),
                 r.error().code.c_str());
    return kc::cli::kExitFailure;
  }
  const json out = {{"gpu", r->gpu},
                    {"hostBefore", r->hostBefore ? json(*r->hostBefore) : json()},
                    {"hostAfter", r->hostAfter ? json(*r->hostAfter) : json()},
                    {"changed", r->changed},
                    {"requests", r->attempts},
                    {"notes", r->notes}};
  if (output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("%s %s: %s -> %s (%s, %u request(s), verified by re-reading)\n", verb.c_str(),
                r->gpu.c_str(), r->hostBefore.value_or("unattached").c_str(),
                r->hostAfter.value_or("unattached").c_str(), r->changed ? "moved" : "already there",
                r->attempts);
    for (const auto& n : r->notes) {
      std::printf("  note: %s\n", n.c_str());
    }
  }
  return kc::cli::kExitOk;
}

// verify: exit 0 when the GPU is where the operator says (HOST, or unattached without one).
int verify(kc::fabric::FabricPool& pool, const Flags& f) {
  auto inv = pool.inventory();
  if (!inv) {
    std::fprintf(stderr, "kubecomp-fabric: verify: %s\n", inv.error().message.c_str());
    return kc::cli::kExitFailure;
  }
  const kc::fabric::GpuInfo* g = inv->find(f.gpu);
  if (g == nullptr) {
    std::fprintf(stderr, "kubecomp-fabric: verify: no GPU %s in the inventory\n", f.gpu.c_str());
    return kc::cli::kExitFailure;
  }
  const std::string where = g->hostPort.value_or("");
  const bool host = !f.host.empty();
  // The pool names hosts "<chassis>/<host>"; the bare chassis-local host is accepted too.
  const bool ok = host ? (where == f.host || where == g->chassis + "/" + f.host) : where.empty();
  std::printf("%s: %s (%s)\n", g->id.c_str(), where.empty() ? "unattached" : where.c_str(),
              ok ? "as expected" : "NOT as expected");
  return ok ? kc::cli::kExitOk : kc::cli::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kubecomp-fabric: commission a composable-GPU fabric without Kubernetes. Reads the chassis\n"
      "of a fabric config (the reconfig-mgr format, docs/fabric.md) or one chassis given by\n"
      "flags, with the same drivers reconfig-mgr uses; every attach and detach is verified by\n"
      "re-reading the chassis."};
  app.require_subcommand(1);
  Flags f;
  app.add_option("--config", f.config, "fabric config file (YAML or JSON)");
  app.add_option("--chassis", f.chassis, "with --config: only this chassis");
  app.add_option("--name", f.name, "without --config: the chassis' name (GPU id prefix)")
      ->capture_default_str();
  app.add_option("--dialect", f.dialect, "without --config: h3 or redfish")
      ->check(CLI::IsMember({"h3", "redfish"}));
  app.add_option("--url", f.url, "without --config: the chassis' base URL (https://bmc)");
  app.add_option("--auth", f.auth, "redfish: session, basic or none")
      ->check(CLI::IsMember({"session", "basic", "none"}))
      ->capture_default_str();
  app.add_option("--credentials-file", f.credentialsFile,
                 "user:password file or a Secret mount directory (username, password)");
  app.add_option("--ca-file", f.caFile, "https: CA bundle that signed the chassis' certificate");
  app.add_flag("--insecure-skip-verify", f.insecure,
               "https: do not verify the chassis' certificate (never in production)");
  app.add_option("--read-parallelism", f.readParallelism,
                 "redfish: GETs in flight at once while reading (1: one after the other)")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str();
  app.add_flag("--no-expand", f.noExpand,
               "redfish: never ask for $expand, even where the service advertises it");
  app.add_option("--style", f.style,
                 "redfish: composition (CompositionService ResourceBlocks) or fabric (DSP0268\n"
                 "Fabrics: GPU Endpoints, attach by POSTing a Connection)")
      ->check(CLI::IsMember({"composition", "fabric"}))
      ->capture_default_str();
  app.add_option("--fabric", f.fabric,
                 "redfish --style fabric: the Fabric's Id (default: the service's only Fabric)");
  app.add_option("--gpu-model", f.gpuModel, "h3: the GPU model (its rows carry none)");
  app.add_option("--gep", f.gep, "h3: the GEP")->capture_default_str();
  app.add_option("-o,--output", f.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  kc::cli::addVersionFlag(app, "kubecomp-fabric");
  auto* inventory = app.add_subcommand("inventory", "the GPUs and hosts each chassis shows");
  auto* attach = app.add_subcommand("attach", "attach GPU to HOST, then verify it");
  attach->add_option("gpu", f.gpu, "GPU id as inventory prints it")->required();
  attach->add_option("host", f.host, "host as inventory prints it")->required();
  auto* detach = app.add_subcommand("detach", "detach GPU, then verify it");
  detach->add_option("gpu", f.gpu, "GPU id as inventory prints it")->required();
  auto* check = app.add_subcommand(
      "verify", "exit 0 when GPU is attached to HOST (or unattached, without HOST)");
  check->add_option("gpu", f.gpu, "GPU id as inventory prints it")->required();
  check->add_option("host", f.host, "host as inventory prints it");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }
  // The drivers' warnings (insecureSkipVerify) go to stderr: stdout is the inventory.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kubecomp-fabric"));
  auto config = fabricConfig(f);
  if (!config) {
    std::fprintf(stderr, "kubecomp-fabric: %s\n", config.error().message.c_str());
    return kc::cli::kExitUsage;
  }
  auto pool = kc::fabric::makePool(*config);
  if (!pool) {
    std::fprintf(stderr, "kubecomp-fabric: %s\n", pool.error().message.c_str());
    return kc::cli::kExitFailure;
  }
  if (*inventory) {
    return printInventory(**pool, f.output);
  }
  if (*attach) {
    return printMove((*pool)->attach(f.gpu, f.host), "attach", f.output);
  }
  if (*detach) {
    return printMove((*pool)->detach(f.gpu), "detach", f.output);
  }
  return verify(**pool, f);
}
