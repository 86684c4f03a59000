#include "tools/fake-host/fake_host_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "libcore/base/error_codes.hpp"
#include "tools/fake-host/tree_mirror.hpp"

namespace kc::fakehost {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRecordFile = "fake-host.json";
constexpr const char* kLockFile = ".fake-host.lock";
// The three trees under a root, as HostRoots names them.
constexpr std::array<const char*, 3> kTrees = {"sys", "proc", "dev"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
  return s;
}

node::HostRoots rootsUnder(const fs::path& dir) {
  return node::HostRoots{(dir / "sys").string(), (dir / "proc").string(), (dir / "dev").string()};
}

// An exclusive flock on <root>/.fake-host.lock for the life of the object.
class RootLock {
 public:
  explicit RootLock(const fs::path& root)
      : fd_(::open((root / kLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RootLock() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  RootLock(const RootLock&) = delete;
  RootLock& operator=(const RootLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

// A staging directory under the root (same file system: entries are renamed into place), gone
// with the object.
class Staging {
 public:
  explicit Staging(const fs::path& root) {
    std::string tmpl = (root / ".staging-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) {
      dir_ = tmpl;
    }
  }
  ~Staging() {
    std::error_code ec;
    if (!dir_.empty()) {
      fs::remove_all(dir_, ec);
    }
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

json toJson(const HostRecord& r) {
  json gpus = json::array();
  for (const node::FakeGpu& g : r.gpus) {
    gpus.push_back({{"bdf", g.bdf},
                    {"uuid", g.uuid},
                    {"minor", g.minor},
                    {"numaNode", g.numaNode},
                    {"model", g.model},
                    {"driverBound", g.driverBound},
                    {"withInformation", g.withInformation},
                    {"driverName", g.driverName}});
  }
  json processes = json::array();
  for (const FakeProcess& p : r.processes) {
    processes.push_back({{"pid", p.pid}, {"comm", p.comm}, {"devices", p.devices}});
  }
  return {{"gpus", std::move(gpus)}, {"processes", std::move(processes)}};
}

Result<HostRecord> parseRecord(const std::string& text, const std::string& path) {
  try {
    const json j = json::parse(text);
    HostRecord r;
    for (const json& g : j.at("gpus")) {
      node::FakeGpu gpu;
      gpu.bdf = g.at("bdf").get<std::string>();
      gpu.uuid = g.at("uuid").get<std::string>();
      gpu.minor = g.at("minor").get<std::int32_t>();
      gpu.numaNode = g.at("numaNode").get<std::int32_t>();
      gpu.model = g.at("model").get<std::string>();
      gpu.driverBound = g.at("driverBound").get<bool>();
      gpu.withInformation = g.at("withInformation").get<bool>();
      gpu.driverName = g.at("driverName").get<std::string>();
      r.gpus.push_back(std::move(gpu));
    }
    for (const json& p : j.at("processes")) {
      r.processes.push_back(FakeProcess{p.at("pid").get<std::int32_t>(),
                                        p.at("comm").get<std::string>(),
                                        p.at("devices").get<std::vector<std::string>>()});
    }
    return r;
  } catch (const json::exception& e) {
    return makeError(errc::kInvalid, path + " is not a fake host record: " + e.what());
  }
}

Result<HostRecord> loadRecord(const fs::path& root, bool create) {
  const fs::path path = root / kRecordFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (create) {
      return HostRecord{};
    }
    return makeError(errc::kNotFound, "no fake host under " + root.string() + " (no " +
                                          path.string() + "): run `init` first");
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parseRecord(text, path.string());
}

Status saveRecord(const fs::path& root, const HostRecord& record) {
  const fs::path path = root / kRecordFile;
  const fs::path tmp = root / (std::string(kRecordFile) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << toJson(record).dump(2) << "\n";
    out.close();
    if (!out) {
      return makeError(errc::kInternal, "cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return ec ? Status(makeError(errc::kInternal, "rename " + tmp.string() + ": " + ec.message()))
            : okStatus();
}

// The recorded host written anew by FakeHostTree.
Status replay(node::FakeHostTree& tree, const HostRecord& record) {
  if (Status s = tree.ready(); !s) {
    return s;
  }
  for (const node::FakeGpu& g : record.gpus) {
    if (Status s = tree.addGpu(g); !s) {
      return makeError(errc::kInvalid, "recorded GPU " + g.bdf + ": " + s.error().message);
    }
  }
  for (const FakeProcess& p : record.processes) {
    for (const std::string& d : p.devices) {
      if (Status s = tree.holdOpen(p.pid, p.comm, d); !s) {
        return s;
      }
    }
  }
  return okStatus();
}

}  // namespace

node::HostRoots FakeHostDir::roots() const {
  return rootsUnder(root_);
}

template <typename Change>
Status FakeHostDir::transact(bool create, Change change) {
  const fs::path root(root_);
  std::error_code ec;
  if (create) {
    fs::create_directories(root, ec);
  }
  if (!fs::is_directory(root, ec)) {
    return makeError(errc::kNotFound,
                     "no fake host at " + root_ + " (not a directory): run `init` first");
  }
  RootLock lock(root);
  if (!lock.held()) {
    return makeError(errc::kInternal, "cannot lock " + (root / kLockFile).string());
  }
  auto record = loadRecord(root, create);
  if (!record) {
    return record.error();
  }
  Staging staging(root);
  if (staging.dir().empty()) {
    return makeError(errc::kInternal, "cannot make a staging directory under " + root_);
  }
  node::FakeHostTree tree(rootsUnder(staging.dir()));
  if (Status s = replay(tree, *record); !s) {
    return s;
  }
  std::array<std::set<std::string>, kTrees.size()> pulled;
  for (std::size_t i = 0; i < kTrees.size(); ++i) {
    auto p = pullWrites(staging.dir() / kTrees[i], root / kTrees[i]);
    if (!p) {
      return p.error();
    }
    pulled[i] = std::move(*p);
  }
  std::array<std::set<std::string>, kTrees.size()> before;
  for (std::size_t i = 0; i < kTrees.size(); ++i) {
    auto listed = listTree(staging.dir() / kTrees[i]);
    if (!listed) {
      return listed.error();
    }
    before[i] = std::move(*listed);
  }
  if (Status s = change(tree, *record); !s) {
    return s;
  }
  if (Status s = saveRecord(root, *record); !s) {
    return s;
  }
  for (std::size_t i = 0; i < kTrees.size(); ++i) {
    if (Status s = mirrorTree(staging.dir() / kTrees[i], root / kTrees[i], before[i], pulled[i],
                              staging.dir() / ".mirror-tmp");
        !s) {
      return s;
    }
  }
  return okStatus();
}

Status FakeHostDir::init() {
  return transact(true, [](node::FakeHostTree&, HostRecord&) { return okStatus(); });
}

Status FakeHostDir::add(const node::FakeGpu& gpu) {
  return transact(false, [&](node::FakeHostTree& tree, HostRecord& record) {
    Status s = tree.addGpu(gpu);
    if (s) {
      record.gpus.push_back(gpu);
      record.gpus.back().bdf = lower(gpu.bdf);
    }
    return s;
  });
}

Status FakeHostDir::remove(const std::string& bdf) {
  return transact(false, [&](node::FakeHostTree& tree, HostRecord& record) {
    Status s = tree.removeGpu(bdf);
    std::erase_if(record.gpus, [&](const node::FakeGpu& g) { return g.bdf == lower(bdf); });
    return s;
  });
}

Status FakeHostDir::setBound(const std::string& bdf, bool bound) {
  return transact(false, [&](node::FakeHostTree& tree, HostRecord& record) {
    Status s = tree.setDriverBound(bdf, bound);
    for (node::FakeGpu& g : record.gpus) {
      if (s && g.bdf == lower(bdf)) {
        g.driverBound = bound;
      }
    }
    return s;
  });
}

Status FakeHostDir::hold(std::int32_t pid, const std::string& comm, const std::string& device) {
  return transact(false, [&](node::FakeHostTree& tree, HostRecord& record) {
    Status s = tree.holdOpen(pid, comm, device);
    if (!s) {
      return s;
    }
    auto it = std::find_if(record.processes.begin(), record.processes.end(),
                           [&](const FakeProcess& p) { return p.pid == pid; });
    if (it == record.processes.end()) {
      record.processes.push_back(FakeProcess{pid, comm, {}});
      it = std::prev(record.processes.end());
    }
    it->comm = comm;
    it->devices.push_back(device);
    return s;
  });
}

Status FakeHostDir::release(std::int32_t pid) {
  return transact(false, [&](node::FakeHostTree& tree, HostRecord& record) {
    Status s = tree.release(pid);
    std::erase_if(record.processes, [&](const FakeProcess& p) { return p.pid == pid; });
    return s;
  });
}

Result<PendingRequests> FakeHostDir::takeRequests() {
  PendingRequests out;
  Status s = transact(false, [&](node::FakeHostTree& tree, HostRecord&) {
    out.remove = tree.takeRemoveRequests();
    out.rescan = tree.takeRescanRequest();
    return okStatus();
  });
  if (!s) {
    return s.error();
  }
  return out;
}

}  // namespace kc::fakehost
