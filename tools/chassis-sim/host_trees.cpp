#include "tools/chassis-sim/host_trees.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace kc::chassis_sim {
namespace {

namespace fs = std::filesystem;

bool isNvidiaDeviceNode(const std::string& name) {
  constexpr std::string_view kPrefix = "nvidia";
  return name.size() > kPrefix.size() && name.compare(0, kPrefix.size(), kPrefix) == 0 &&
         std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// chassis-sim persists nothing: the PCIe side an earlier run left in a host's tree (sysfs, the
// nvidia procfs entries, /dev/nvidia<n>) goes, so a restart begins from the topology. Other
// entries (processes a test made hold a GPU open) stay.
Status clearPciSide(const node::HostRoots& roots) {
  std::error_code ec;
  fs::remove_all(roots.sysfs, ec);  // a missing path is no error
  if (!ec) {
    fs::remove_all(roots.procfs + "/driver/nvidia", ec);
  }
  std::error_code listed;
  for (fs::directory_iterator it(roots.dev, listed), end; !ec && !listed && it != end;
       it.increment(listed)) {
    if (isNvidiaDeviceNode(it->path().filename().string())) {
      fs::remove(it->path(), ec);
    }
  }
  // No dev directory yet is fine: FakeHostTree makes it.
  if (ec || (listed && listed != std::errc::no_such_file_or_directory)) {
    return makeError(errc::kInternal, "cannot clear the host tree under " +
                                          fs::path(roots.sysfs).parent_path().string() + ": " +
                                          (ec ? ec : listed).message());
  }
  return okStatus();
}

}  // namespace

std::string hostGpuBdf(std::size_t n) {
  char text[16];
  std::snprintf(text, sizeof text, "0000:%02zx:00.0", (n + 0x10) & 0xff);
  return text;
}

std::int32_t hostGpuMinor(std::size_t n) {
  return static_cast<std::int32_t>(n);
}

node::HostRoots hostTreeRoots(std::string_view root, std::string_view system) {
  const std::string base = std::string(root) + "/" + std::string(system);
  return node::HostRoots{base + "/sys", base + "/proc", base + "/dev"};
}

HostTrees::HostTrees(HostTreeOptions options)
    : options_(std::move(options)), clock_(clockOr(options_.clock)) {}

HostTrees::~HostTrees() {
  stop();
}

Result<std::unique_ptr<HostTrees>> HostTrees::create(const std::vector<Chassis>& state,
                                                     HostTreeOptions options) {
  std::size_t gpus = 0;
  for (const auto& c : state) {
    gpus += c.gpus.size();
  }
  if (gpus > kMaxHostGpus) {
    return makeError(errc::kInvalid, "--host-root: the topology has " + std::to_string(gpus) +
                                         " GPUs; host trees give each its own PCI bus, so at "
                                         "most " +
                                         std::to_string(kMaxHostGpus));
  }
  // No other thread knows the trees yet: nothing below needs mutex_.
  std::unique_ptr<HostTrees> trees(new HostTrees(std::move(options)));  // private constructor
  for (const auto& c : state) {
    for (const auto& h : c.hosts) {
      auto it = std::find_if(trees->hosts_.begin(), trees->hosts_.end(),
                             [&](const HostTree& t) { return t.system == h.system; });
      if (it == trees->hosts_.end()) {
        const node::HostRoots roots = hostTreeRoots(trees->options_.root, h.system);
        if (Status cleared = clearPciSide(roots); !cleared) {
          return cleared.error();
        }
        auto tree = std::make_unique<node::FakeHostTree>(roots);
        if (Status ready = tree->ready(); !ready) {
          return ready.error();
        }
        trees->hosts_.push_back(HostTree{h.system, std::move(tree)});
        it = std::prev(trees->hosts_.end());
      }
      trees->ports_.push_back(
          PortOfChassis{c.name, h.port, static_cast<std::size_t>(it - trees->hosts_.begin())});
    }
  }
  for (const auto& c : state) {
    for (const auto& g : c.gpus) {
      Slot s{trees->slots_.size(), c.name, g.gid, g.uuid, g.model, {}, g.healthy};
      if (g.host) {
        s.host = trees->hostOf(c.name, *g.host);
      }
      trees->slots_.push_back(std::move(s));
    }
  }
  for (auto& s : trees->slots_) {
    if (s.host) {
      const Status shown = trees->show(s);
      if (!shown) {
        return shown.error();
      }
    }
  }
  return trees;
}

std::optional<std::size_t> HostTrees::hostOf(std::string_view chassis, std::uint32_t port) const {
  for (const auto& p : ports_) {
    if (p.chassis == chassis && p.port == port) {
      return p.host;
    }
  }
  return std::nullopt;
}

HostTrees::Slot* HostTrees::slot(std::string_view chassis, std::string_view gid) {
  for (auto& s : slots_) {
    if (s.chassis == chassis && s.gid == gid) {
      return &s;
    }
  }
  return nullptr;
}

Status HostTrees::show(Slot& s) {
  node::FakeGpu gpu;
  gpu.bdf = hostGpuBdf(s.index);
  gpu.uuid = s.uuid;
  gpu.minor = hostGpuMinor(s.index);
  gpu.numaNode = kHostGpuNumaNode;
  gpu.model = s.model;
  gpu.driverBound = s.healthy;  // a lost GPU stays on the bus, but no driver holds it
  s.seen = Seen::kShown;
  return hosts_[*s.host].tree->addGpu(gpu);
}

void HostTrees::unshow(Slot& s) {
  if (s.seen == Seen::kShown && s.host) {
    report(hosts_[*s.host].tree->removeGpu(hostGpuBdf(s.index)));
  }
  s.seen = Seen::kAbsent;
}

void HostTrees::report(const Status& status) const {
  if (!status && options_.onError) {
    options_.onError(status.error().message);
  }
}

void HostTrees::onChange(const GpuChange& change) {
  std::lock_guard lock(mutex_);
  Slot* s = slot(change.chassis, change.gid);
  if (s == nullptr) {
    return;
  }
  const std::optional<std::size_t> host =
      change.host ? hostOf(change.chassis, *change.host) : std::nullopt;
  if (host != s->host) {
    unshow(*s);  // detached, or attached elsewhere: off the old host's bus at once
    s->host = host;
    if (host && options_.needsRescan) {
      s->seen = Seen::kAwaitRescan;
    } else if (host && options_.visibleDelay.count() <= 0) {
      report(show(*s));
    } else if (host) {
      s->seen = Seen::kPending;
      s->due = clock_.now() + options_.visibleDelay;
    }
  }
  if (change.healthy != s->healthy) {
    s->healthy = change.healthy;
    if (s->seen == Seen::kShown) {
      report(hosts_[*s->host].tree->setDriverBound(hostGpuBdf(s->index), s->healthy));
    }
  }
}

void HostTrees::pollHost(std::size_t host) {
  node::FakeHostTree& tree = *hosts_[host].tree;
  // Removes before the rescan: a remove and a rescan written in one interval bring it back.
  for (const auto& bdf : tree.takeRemoveRequests()) {
    for (auto& s : slots_) {
      if (s.host == host && s.seen == Seen::kShown && hostGpuBdf(s.index) == bdf) {
        unshow(s);
        s.seen = Seen::kAwaitRescan;  // hot-removed: the chassis still has it attached here
      }
    }
  }
  if (tree.takeRescanRequest()) {
    for (auto& s : slots_) {
      if (s.host == host && s.seen != Seen::kShown) {
        report(show(s));
      }
    }
  }
}

void HostTrees::poll() {
  std::lock_guard lock(mutex_);
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    pollHost(h);
  }
  const auto now = clock_.now();
  for (auto& s : slots_) {
    if (s.seen == Seen::kPending && s.due <= now) {
      report(show(s));
    }
  }
}

void HostTrees::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable() || stopping_) {
    return;
  }
  thread_ = std::thread([this] {
    while (true) {
      {
        std::unique_lock lock(mutex_);
        if (clock_.waitFor(lock, wake_, options_.pollInterval, [this] { return stopping_; })) {
          return;
        }
      }
      poll();
    }
  });
}

void HostTrees::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

std::vector<std::string> HostTrees::systems() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& h : hosts_) {
    out.push_back(h.system);
  }
  return out;
}

Result<std::shared_ptr<HostTrees>> attachHostTrees(ChassisModel& model, HostTreeOptions options) {
  auto made = HostTrees::create(model.snapshotAll(), std::move(options));
  if (!made) {
    return made.error();
  }
  std::shared_ptr<HostTrees> trees = std::move(*made);
  model.setChangeListener([weak = std::weak_ptr<HostTrees>(trees)](const GpuChange& change) {
    if (auto t = weak.lock()) {
      t->onChange(change);
    }
  });
  trees->start();
  return trees;
}

}  // namespace kc::chassis_sim
