#include "libcore/node/fake_host.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

namespace kc::node {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNvidia = "nvidia";

Status fsError(const std::string& what, const std::error_code& ec) {
  return makeError(errc::kInternal, what + ": " + ec.message());
}

Status makeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  return ec ? fsError("create " + path, ec) : okStatus();
}

Status writeFile(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    return makeError(errc::kInternal, "cannot write " + path);
  }
  return okStatus();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status makeLink(const std::string& target, const std::string& link) {
  std::error_code ec;
  fs::create_symlink(target, link, ec);
  return ec ? fsError("link " + link + " -> " + target, ec) : okStatus();
}

Status removePath(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? fsError("remove " + path, ec) : okStatus();
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
  return out;
}

// The driver's own layout and spacing (535 series).
std::string informationText(const FakeGpu& gpu, const std::string& bdf) {
  return "Model: \t\t " + gpu.model +
         "\n"
         "IRQ:   \t\t 0\n"
         "GPU UUID: \t " +
         gpu.uuid +
         "\n"
         "Video BIOS: \t 96.00.74.00.01\n"
         "Bus Type: \t PCIe\n"
         "DMA Size: \t 52 bits\n"
         "DMA Mask: \t 0xfffffffffffff\n"
         "Bus Location: \t " +
         bdf +
         "\n"
         "Device Minor: \t " +
         std::to_string(gpu.minor) +
         "\n"
         "GPU Firmware: \t 535.161.07\n"
         "GPU Excluded:\t No\n";
}

// Runs each step until one fails.
template <typename... Steps>
Status all(Steps&&... steps) {
  Status s = okStatus();
  ((s.ok() ? (s = steps(), 0) : 0), ...);
  return s;
}

}  // namespace

FakeHostTree::FakeHostTree(HostRoots roots) : roots_(std::move(roots)), ready_(okStatus()) {
  const std::string pci = roots_.sysfs + "/bus/pci";
  ready_ = all([&] { return makeDirs(pci + "/devices"); },
               [&] { return makeDirs(pci + "/drivers/nvidia"); },
               [&] { return makeDirs(roots_.sysfs + "/devices/pci0000:00"); },
               [&] { return writeFile(pci + "/rescan", ""); },
               [&] { return makeDirs(roots_.procfs + "/driver/nvidia/gpus"); },
               [&] { return makeDirs(roots_.dev); });
}

std::string FakeHostTree::deviceDir(const std::string& bdf) const {
  return roots_.sysfs + "/devices/pci0000:00/" + bdf;
}

Status FakeHostTree::writeInformation(const FakeGpu& gpu) {
  const std::string dir = roots_.procfs + "/driver/nvidia/gpus/" + gpu.bdf;
  return all([&] { return makeDirs(dir); },
             [&] { return writeFile(dir + "/information", informationText(gpu, gpu.bdf)); });
}

Status FakeHostTree::bind(const FakeGpu& gpu) {
  const std::string driverDir = roots_.sysfs + "/bus/pci/drivers/" + gpu.driverName;
  return all([&] { return makeDirs(driverDir); },
             [&] {
               return makeLink("../../../bus/pci/drivers/" + gpu.driverName,
                               deviceDir(gpu.bdf) + "/driver");
             },
             [&] {
               return makeLink("../../../../devices/pci0000:00/" + gpu.bdf,
                               driverDir + "/" + gpu.bdf);
             },
             [&] {
               // The nvidia driver's procfs entry exists while it holds the GPU.
               return gpu.driverName == kNvidia && gpu.withInformation ? writeInformation(gpu)
                                                                       : okStatus();
             });
}

Status FakeHostTree::unbind(const FakeGpu& gpu) {
  return all(
      [&] { return removePath(deviceDir(gpu.bdf) + "/driver"); },
      [&] {
        return removePath(roots_.sysfs + "/bus/pci/drivers/" + gpu.driverName + "/" + gpu.bdf);
      },
      [&] { return removePath(roots_.procfs + "/driver/nvidia/gpus/" + gpu.bdf); });
}

Status FakeHostTree::addGpu(const FakeGpu& gpu) {
  if (!ready_) {
    return ready_;
  }
  if (!isBdf(gpu.bdf)) {
    return makeError(errc::kInvalid, "fake GPU bdf '" + gpu.bdf + "' is not DDDD:BB:DD.F");
  }
  FakeGpu g = gpu;
  g.bdf = lower(gpu.bdf);
  if (gpus_.count(g.bdf) != 0 || others_.count(g.bdf) != 0) {
    return makeError(errc::kAlreadyExists, "fake GPU " + g.bdf + " is already on the bus");
  }
  const std::string dir = deviceDir(g.bdf);
  Status s =
      all([&] { return makeDirs(dir); }, [&] { return writeFile(dir + "/vendor", "0x10de\n"); },
          [&] { return writeFile(dir + "/device", "0x2330\n"); },
          [&] { return writeFile(dir + "/class", "0x030200\n"); },
          [&] { return writeFile(dir + "/numa_node", std::to_string(g.numaNode) + "\n"); },
          [&] { return writeFile(dir + "/remove", ""); },
          [&] {
            return makeLink("../../../devices/pci0000:00/" + g.bdf,
                            roots_.sysfs + "/bus/pci/devices/" + g.bdf);
          },
          [&] { return g.driverBound ? bind(g) : okStatus(); },
          [&] { return writeFile(roots_.dev + "/nvidia" + std::to_string(g.minor), ""); });
  if (s) {
    gpus_.emplace(g.bdf, std::move(g));
  }
  return s;
}

Status FakeHostTree::addPciFunction(std::string_view bdf, std::string_view vendor,
                                    std::string_view pciClass) {
  if (!ready_) {
    return ready_;
  }
  if (!isBdf(bdf)) {
    return makeError(errc::kInvalid,
                     "fake PCI function '" + std::string(bdf) + "' is not DDDD:BB:DD.F");
  }
  const std::string name = lower(bdf);
  if (gpus_.count(name) != 0 || others_.count(name) != 0) {
    return makeError(errc::kAlreadyExists, "fake PCI function " + name + " is already on the bus");
  }
  const std::string dir = deviceDir(name);
  Status s = all([&] { return makeDirs(dir); },
                 [&] { return writeFile(dir + "/vendor", std::string(vendor) + "\n"); },
                 [&] { return writeFile(dir + "/class", std::string(pciClass) + "\n"); },
                 [&] {
                   return makeLink("../../../devices/pci0000:00/" + name,
                                   roots_.sysfs + "/bus/pci/devices/" + name);
                 });
  if (s) {
    others_.insert(name);
  }
  return s;
}

Status FakeHostTree::removeGpu(std::string_view bdf) {
  if (const auto other = others_.find(lower(bdf)); other != others_.end()) {
    const std::string name = *other;
    others_.erase(other);
    return all([&] { return removePath(roots_.sysfs + "/bus/pci/devices/" + name); },
               [&] { return removePath(deviceDir(name)); });
  }
  const auto it = gpus_.find(lower(bdf));
  if (it == gpus_.end()) {
    return makeError(errc::kNotFound, "fake GPU " + std::string(bdf) + " is not on the bus");
  }
  const FakeGpu& g = it->second;
  Status s = all([&] { return unbind(g); },
                 [&] { return removePath(roots_.sysfs + "/bus/pci/devices/" + g.bdf); },
                 [&] { return removePath(deviceDir(g.bdf)); },
                 [&] { return removePath(roots_.dev + "/nvidia" + std::to_string(g.minor)); });
  gpus_.erase(it);
  return s;
}

Status FakeHostTree::setDriverBound(std::string_view bdf, bool bound) {
  const auto it = gpus_.find(lower(bdf));
  if (it == gpus_.end()) {
    return makeError(errc::kNotFound, "fake GPU " + std::string(bdf) + " is not on the bus");
  }
  FakeGpu& g = it->second;
  if (g.driverBound == bound) {
    return okStatus();
  }
  g.driverBound = bound;
  return bound ? bind(g) : unbind(g);
}

Status FakeHostTree::holdOpen(std::int32_t pid, std::string comm, std::string_view devicePath) {
  if (!ready_) {
    return ready_;
  }
  if (pid <= 0) {
    return makeError(errc::kInvalid, "pid " + std::to_string(pid) + " is not a process id");
  }
  const std::string dir = roots_.procfs + "/" + std::to_string(pid);
  const std::int32_t fd = nextFd_.try_emplace(pid, 3).first->second++;  // 0-2 are stdio
  return all([&] { return makeDirs(dir + "/fd"); },
             [&] { return writeFile(dir + "/comm", comm + "\n"); },
             [&] { return makeLink(std::string(devicePath), dir + "/fd/" + std::to_string(fd)); });
}

Status FakeHostTree::release(std::int32_t pid) {
  if (nextFd_.erase(pid) == 0) {
    return makeError(errc::kNotFound, "fake process " + std::to_string(pid) + " holds nothing");
  }
  return removePath(roots_.procfs + "/" + std::to_string(pid));
}

std::vector<std::string> FakeHostTree::takeRemoveRequests() {
  std::vector<std::string> out;
  for (const auto& [bdf, gpu] : gpus_) {
    const std::string path = deviceDir(bdf) + "/remove";
    if (!readFile(path).empty() && writeFile(path, "")) {
      out.push_back(bdf);
    }
  }
  return out;
}

bool FakeHostTree::takeRescanRequest() {
  const std::string path = roots_.sysfs + "/bus/pci/rescan";
  return !readFile(path).empty() && writeFile(path, "").ok();
}

}  // namespace kc::node
