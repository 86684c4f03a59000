// kubecomp-fake-host: a TEST DOUBLE writer of a node's sysfs/procfs/dev for development control
// planes and tests (libcore/node's FakeHostTree behind a command line; the directory it keeps is
// fake_host_dir.hpp). Thin main: flags -> one FakeHostDir call -> exit code.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "libcore/cli/flags.hpp"
#include "tools/fake-host/fake_host_dir.hpp"

namespace {

struct Flags {
  std::string root;
  kc::node::FakeGpu gpu;
  bool unbound = false;
  bool noInformation = false;
  std::int32_t pid = 0;
  std::string comm;
  std::string device;
};

CLI::App* addBdf(CLI::App* sub, Flags& f) {
  sub->add_option("--bdf", f.gpu.bdf, "the GPU's PCI function, DDDD:BB:DD.F")->required();
  return sub;
}

void addGpuFlags(CLI::App* add, Flags& f) {
  addBdf(add, f);
  add->add_option("--uuid", f.gpu.uuid, "the UUID the nvidia driver reports, GPU-xxxxxxxx-...")
      ->required();
  add->add_option("--minor", f.gpu.minor, "the device minor: /dev/nvidia<minor>")
      ->required()
      ->check(CLI::Range(0, 1048575));
  add->add_option("--numa", f.gpu.numaNode, "its NUMA node (-1: none)")->capture_default_str();
  add->add_option("--model", f.gpu.model, "the model the driver reports")->capture_default_str();
  add->add_option("--driver", f.gpu.driverName, "the driver it is bound to (e.g. vfio-pci)")
      ->capture_default_str();
  add->add_flag("--unbound", f.unbound, "on the bus, bound to no driver");
  add->add_flag("--no-information", f.noInformation,
                "bound, but no /proc/driver/nvidia/gpus/<bdf>/information entry");
}

int fail(const kc::Error& e) {
  std::cerr << "kubecomp-fake-host: " << e.message << "\n";
  return kc::cli::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kubecomp-fake-host: a TEST DOUBLE writer of a node's sysfs/procfs for development control\n"
      "planes and tests. Writes <root>/sys, <root>/proc and <root>/dev with the real layout\n"
      "(PCI functions, the nvidia driver's /proc/driver/nvidia/gpus entries, device nodes,\n"
      "processes holding them open), so that disaggpu-devplugin --sysfs-root <root>/sys\n"
      "--procfs-root <root>/proc --dev-root <root>/dev sees the GPUs as on a host. It changes\n"
      "nothing on the real machine. Errors exit 1."};
  app.fallthrough();
  app.require_subcommand(1);
  Flags f;
  app.add_option("--root", f.root, "the fake host's directory (made by init)")->required();
  kc::cli::addVersionFlag(app, "kubecomp-fake-host");
  CLI::App* init = app.add_subcommand("init", "make an empty host (kept when one is there)");
  CLI::App* add = app.add_subcommand("add", "a GPU appears on the bus (hot-add)");
  addGpuFlags(add, f);
  CLI::App* remove = addBdf(app.add_subcommand("remove", "a GPU falls off the bus"), f);
  CLI::App* bind = addBdf(app.add_subcommand("bind", "bind a GPU to its driver again"), f);
  CLI::App* unbind = addBdf(app.add_subcommand("unbind", "unbind a GPU from its driver"), f);
  CLI::App* hold = app.add_subcommand("hold", "a process opens a device node");
  hold->add_option("--pid", f.pid, "its process id")->required()->check(CLI::Range(1, 4194304));
  hold->add_option("--comm", f.comm, "its command name")->required();
  hold->add_option("--device", f.device, "the device node as the host names it, /dev/nvidiaN")
      ->required();
  CLI::App* release = app.add_subcommand("release", "a process exits");
  release->add_option("--pid", f.pid, "its process id")->required()->check(CLI::Range(1, 4194304));
  CLI::App* requests =
      app.add_subcommand("requests",
                         "print the remove/rescan writes made since the last call as JSON "
                         "{\"remove\":[bdf...],\"rescan\":bool} and consume them");
  if (auto exit = kc::cli::parse(app, argc, argv)) {
    return *exit;
  }

  kc::fakehost::FakeHostDir host(f.root);
  f.gpu.driverBound = !f.unbound;
  f.gpu.withInformation = !f.noInformation;
  kc::Status s = kc::okStatus();
  if (init->parsed()) {
    s = host.init();
  } else if (add->parsed()) {
    s = host.add(f.gpu);
  } else if (remove->parsed()) {
    s = host.remove(f.gpu.bdf);
  } else if (bind->parsed() || unbind->parsed()) {
    s = host.setBound(f.gpu.bdf, bind->parsed());
  } else if (hold->parsed()) {
    s = host.hold(f.pid, f.comm, f.device);
  } else if (release->parsed()) {
    s = host.release(f.pid);
  } else if (requests->parsed()) {
    auto r = host.takeRequests();
    if (!r) {
      return fail(r.error());
    }
    std::cout << nlohmann::json{{"remove", r->remove}, {"rescan", r->rescan}}.dump() << "\n";
  }
  return s ? kc::cli::kExitOk : fail(s.error());
}
