#include "libcore/node/host_scan.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "libcore/base/file_io.hpp"

namespace kc::node {
namespace {

namespace fs = std::filesystem;

// vendor, class, numa_node and comm are a few bytes; more means the file is not what we think.
constexpr std::size_t kMaxAttributeBytes = 256;
constexpr std::string_view kDeletedSuffix = " (deleted)";

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

std::string errnoText(int err) {
  return std::strerror(err);
}

Error openError(const std::string& path, int err) {
  const char* code = (err == ENOENT || err == ENOTDIR) ? errc::kNotFound
                     : (err == EACCES || err == EPERM) ? errc::kForbidden
                                                       : errc::kUnavailable;
  return makeError(code, "cannot open " + path + ": " + errnoText(err));
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) {
    s.pop_back();
  }
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
  return out;
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The information file as classify wants it: text, absent, or the reason it was not read.
void readInformation(const HostRoots& roots, const std::string& bdf, PciFunctionFiles& f,
                     std::vector<std::string>& problems) {
  const std::string path = roots.procfs + "/driver/nvidia/gpus/" + bdf + "/information";
  auto text = readFileBounded(path, kMaxInformationBytes);
  if (text) {
    f.information = std::move(*text);
  } else if (text.error().code == errc::kTooLarge) {
    f.informationError = "information file too large";
    problems.push_back(bdf + ": " + text.error().message + "; not read");
  } else if (text.error().code != errc::kNotFound) {
    f.informationError = "information file unreadable";
    problems.push_back(bdf + ": " + text.error().message);
  }
}

// One entry of <sysfs>/bus/pci/devices; nullopt for anything but an NVIDIA display controller.
std::optional<HostGpu> scanFunction(const HostRoots& roots, const std::string& name,
                                    std::vector<std::string>& problems) {
  const std::string dir = roots.sysfs + "/bus/pci/devices/" + name;
  PciFunctionFiles f;
  f.bdf = name;
  auto vendor = readFileBounded(dir + "/vendor", kMaxAttributeBytes);
  auto pciClass = readFileBounded(dir + "/class", kMaxAttributeBytes);
  if (!vendor || !pciClass) {
    const Error& e = vendor ? pciClass.error() : vendor.error();
    if (e.code != errc::kNotFound) {  // not_found: removed while we listed
      problems.push_back(name + ": " + e.message);
    }
    return std::nullopt;
  }
  f.vendor = std::move(*vendor);
  f.pciClass = std::move(*pciClass);
  if (!isNvidiaDisplay(f.vendor, f.pciClass)) {
    return std::nullopt;  // most of a host's functions: skip before reading more
  }
  // No numa_node file (or -1 in it) is a host without NUMA.
  f.numaNode = readFileBounded(dir + "/numa_node", kMaxAttributeBytes).valueOr("");
  std::error_code ec;
  const fs::path driver = fs::read_symlink(dir + "/driver", ec);
  if (!ec) {
    f.driver = driver.filename().string();
  } else if (ec != std::errc::no_such_file_or_directory) {
    problems.push_back(name + ": cannot read the driver link: " + ec.message());
  }
  readInformation(roots, lower(name), f, problems);
  return classify(f);
}

// The device paths that one process holds open, of those asked.
Result<std::set<std::string>> heldBy(const fs::path& fdDir,
                                     const std::set<std::string, std::less<>>& wanted) {
  std::error_code ec;
  fs::directory_iterator it(fdDir, ec);
  if (ec) {
    return makeError(ec == std::errc::permission_denied ? errc::kForbidden : errc::kNotFound,
                     ec.message());
  }
  std::set<std::string> held;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code linkEc;
    std::string target = fs::read_symlink(it->path(), linkEc).string();
    if (linkEc) {
      continue;  // closed since the listing
    }
    // A node unlinked while open (a GPU removed under a process) still holds the GPU.
    if (target.size() > kDeletedSuffix.size() && target.ends_with(kDeletedSuffix)) {
      target.resize(target.size() - kDeletedSuffix.size());
    }
    if (wanted.count(target) != 0) {
      held.insert(std::move(target));
    }
  }
  return held;
}

Status writeOne(const std::string& path, const std::string& missing) {
  // O_TRUNC as a shell's `echo 1 >` does: sysfs ignores it, a fake tree's plain file needs it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return makeError(errc::kNotFound, missing);
    }
    return openError(path, err);
  }
  FdCloser closer(fd);
  if (::write(fd, "1", 1) != 1) {
    return makeError(errc::kUnavailable, "write 1 to " + path + ": " + errnoText(errno));
  }
  return okStatus();
}

}  // namespace

HostView scanHost(const HostRoots& roots) {
  std::vector<std::string> problems;
  std::vector<HostGpu> gpus;
  const fs::path devices = fs::path(roots.sysfs) / "bus/pci/devices";
  std::error_code ec;
  fs::directory_iterator it(devices, ec);
  if (ec) {
    problems.push_back("cannot list " + devices.string() + ": " + ec.message());
    return assembleHostView({}, std::move(problems));
  }
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (auto gpu = scanFunction(roots, it->path().filename().string(), problems)) {
      gpus.push_back(std::move(*gpu));
    }
  }
  if (ec) {
    problems.push_back("listing " + devices.string() + " stopped: " + ec.message());
  }
  return assembleHostView(std::move(gpus), std::move(problems));
}

HoldersReport openHolders(const HostRoots& roots, const std::vector<std::string>& devicePaths) {
  HoldersReport report;
  if (devicePaths.empty()) {
    return report;
  }
  const std::set<std::string, std::less<>> wanted(devicePaths.begin(), devicePaths.end());
  std::error_code ec;
  fs::directory_iterator it(roots.procfs, ec);
  if (ec) {
    // Nothing seen is not "nobody holds it": count procfs itself as unreadable.
    ++report.unreadable;
    return report;
  }
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!allDigits(name) || name.size() > 9) {
      continue;  // not a process (self, driver, ...)
    }
    auto held = heldBy(it->path() / "fd", wanted);
    if (!held) {
      if (held.error().code == errc::kForbidden) {
        ++report.unreadable;
      }
      continue;  // otherwise exited since the listing
    }
    if (held->empty()) {
      continue;
    }
    const std::string comm =
        trimmed(readFileBounded((it->path() / "comm").string(), kMaxAttributeBytes).valueOr(""));
    for (const std::string& path : *held) {
      report.holders[path].push_back({std::stoi(name), comm});
    }
  }
  if (ec) {
    ++report.unreadable;  // the listing stopped early: processes may have been missed
  }
  for (auto& [path, holders] : report.holders) {
    std::sort(holders.begin(), holders.end(),
              [](const OpenHolder& a, const OpenHolder& b) { return a.pid < b.pid; });
  }
  return report;
}

Status requestPciRescan(const HostRoots& roots) {
  const std::string path = roots.sysfs + "/bus/pci/rescan";
  return writeOne(path, "no " + path + " (sysfs not mounted or not PCI)");
}

Status removePciFunction(const HostRoots& roots, std::string_view bdf) {
  if (!isBdf(bdf)) {
    return makeError(errc::kInvalid, "PCI function '" + std::string(bdf.substr(0, 64)) +
                                         "' is not of the form DDDD:BB:DD.F");
  }
  const std::string name = lower(bdf);
  return writeOne(roots.sysfs + "/bus/pci/devices/" + name + "/remove",
                  "PCI function " + name + " is not on the bus");
}

}  // namespace kc::node
