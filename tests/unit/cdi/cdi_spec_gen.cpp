// Writes the CDI specs of the real-peer schema test (validate_cdi.py) into a directory through
// SpecDir, as the node agent would, and prints each file's path: the device-plugin form with 1
// and 8 GPUs, a DRA claim's spec with control nodes, and a spec without control nodes.
// Usage: cdi_spec_gen <directory>   Exit 0 when every spec was written, 1 otherwise.
#include <iostream>
#include <string>
#include <vector>

#include "libcore/cdi/cdi_spec.hpp"
#include "libcore/cdi/cdi_store.hpp"

namespace {

using kc::cdi::CdiGpu;

CdiGpu gpu(const std::string& id, const std::string& uuid, std::int32_t minor) {
  return CdiGpu{.name = kc::cdi::cdiDeviceName(id), .gpuId = id, .uuid = uuid, .minor = minor};
}

struct Sample {
  std::string tag;
  std::vector<CdiGpu> gpus;
  kc::cdi::SpecOptions options;
  bool claimEnv = false;
};

std::vector<Sample> samples() {
  const std::vector<std::string> allControl = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};
  std::vector<Sample> out;
  out.push_back({"node-1", {gpu("c0.1", "GPU-0b6c1f2e", 0)}, {"/dev", allControl}, false});
  Sample eight{"node-8", {}, {"/host/dev", {"nvidiactl", "nvidia-uvm"}}, false};
  for (int i = 0; i < 8; ++i) {
    // Ids a chassis may report, some not valid CDI names (mapped), one starting with a digit.
    const std::string id = i == 5   ? "Chassis 1/GPU:5"
                           : i == 6 ? "6"
                                    : "c" + std::to_string(i / 4) + "." + std::to_string(i);
    eight.gpus.push_back(gpu(id, "GPU-8e7d-" + std::to_string(i), i));
  }
  out.push_back(std::move(eight));
  out.push_back({"claim-5f0c8a1e-2b7d-4c35-9d43-0a1b2c3d4e5f",
                 {gpu("c0.2", "GPU-aaa", 2), gpu("c1.3", "", 3)},
                 {"/dev", allControl},
                 true});
  out.push_back({"no-control", {gpu("c2.0", "GPU-ccc", 4)}, {"/dev", {}}, false});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cdi_spec_gen <directory>\n";
    return 1;
  }
  kc::cdi::SpecDir specs(argv[1]);
  for (const Sample& s : samples()) {
    const kc::Status wrote = specs.write(s.tag, kc::cdi::buildSpec(s.gpus, s.options, s.claimEnv));
    if (!wrote) {
      std::cerr << "cdi_spec_gen: " << s.tag << ": " << wrote.error().message << "\n";
      return 1;
    }
    std::cout << specs.pathFor(s.tag) << "\n";
  }
  return 0;
}
