#pragma once
// A private, offline containerd 1.6 (Debian's) for tests: its own config, sockets, state and
// runc root under a temp dir, restrict_oom_score_adj (the CI machines lack CAP_SYS_RESOURCE),
// a locally built image (busybox-static + rtprobe) imported with ctr. Teardown removes every
// pod over CRI, stops containerd, kills leftover shims of this instance, unmounts what is
// under the temp dir and removes the test's cgroup tree bottom-up in every controller.

#include <grpcpp/client_context.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cri/runtime/v1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace kc::testing {

namespace cri = runtime::v1;

inline const char* kTestImage = "docker.io/local/rt:1";

// Why these tests cannot run here, or "" when they can.
inline std::string rtSkipReason() {
  if (::geteuid() != 0) {
    return "not root (containerd and cgroup RT budgets need root)";
  }
  if (::access("/sys/fs/cgroup/cpu/cpu.rt_runtime_us", W_OK) != 0) {
    return "no cgroup v1 RT group scheduling (/sys/fs/cgroup/cpu/cpu.rt_runtime_us)";
  }
  for (const char* p :
       {"/usr/bin/containerd", "/usr/sbin/runc", "/usr/bin/ctr", "/usr/bin/busybox"}) {
    if (::access(p, X_OK) != 0) {
      return std::string("missing ") + p +
             " (tools/setup-deps.sh installs containerd runc busybox-static)";
    }
  }
  return "";
}

inline int run(const std::vector<std::string>& argv) {
  ChildProcess p(argv, ChildOutput::kCaptureMerged);
  const std::string out = p.readAll();
  const int rc = p.wait();
  if (rc != 0) {
    std::fprintf(stderr, "%s failed (%d): %s\n", argv[0].c_str(), rc, out.c_str());
  }
  return rc;
}

class ContainerdEnv {
 public:
  // `cgroupTop`: the test's own cgroup subtree ("/kctest-rt-<pid>"), removed at teardown.
  ContainerdEnv(const std::string& imageTar, std::string cgroupTop) : top_(std::move(cgroupTop)) {
    base_ = dir_.path().string();
    std::ofstream(base_ + "/config.toml") << configToml();
    containerd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/bin/sh", "-c",
                                 "exec /usr/bin/containerd --config " + base_ + "/config.toml >>" +
                                     base_ + "/containerd.log 2>&1"});
    containerd_->waitUntil([&] { return std::filesystem::exists(socket()); },
                           std::chrono::seconds(20), "containerd socket");
    channel_ = kc::grpcx::dialUnix(socket());
    if (!kc::grpcx::waitConnected(*channel_, std::chrono::seconds(10), "containerd")) {
      throw std::runtime_error("containerd did not come up; log: " + log());
    }
    if (run({"/usr/bin/ctr", "-a", socket(), "-n", "k8s.io", "images", "import", imageTar}) != 0) {
      throw std::runtime_error("ctr images import failed");
    }
  }
  ~ContainerdEnv() { teardown(); }

  std::string socket() const { return base_ + "/containerd.sock"; }
  const std::string& base() const { return base_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::string file(const std::string& n) const { return dir_.file(n); }
  std::string log() const {
    std::ifstream in(base_ + "/containerd.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void teardown() {
    if (torn_) {
      return;
    }
    torn_ = true;
    if (channel_) {
      cri::RuntimeService::Stub stub(channel_);
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, std::chrono::seconds(10));
      cri::ListPodSandboxResponse pods;
      if (stub.ListPodSandbox(&ctx, {}, &pods).ok()) {
        for (const auto& p : pods.items()) {
          for (int step = 0; step < 2; ++step) {
            grpc::ClientContext c;
            kc::grpcx::setTimeout(c, std::chrono::seconds(10));
            if (step == 0) {
              cri::StopPodSandboxRequest r;
              r.set_pod_sandbox_id(p.id());
              cri::StopPodSandboxResponse resp;
              (void)stub.StopPodSandbox(&c, r, &resp);
            } else {
              cri::RemovePodSandboxRequest r;
              r.set_pod_sandbox_id(p.id());
              cri::RemovePodSandboxResponse resp;
              (void)stub.RemovePodSandbox(&c, r, &resp);
            }
          }
        }
      }
    }
    channel_.reset();
    if (containerd_) {
      containerd_->terminate(std::chrono::seconds(5));
    }
    for (pid_t pid : shimPids()) {
      ::kill(pid, SIGKILL);
    }
    unmountUnder(base_);
    removeCgroups();
  }

  // Processes whose command line names this instance's base dir (leftover shims).
  std::vector<pid_t> shimPids() const {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (!std::all_of(name.begin(), name.end(), ::isdigit)) {
        continue;
      }
      std::ifstream in(e.path() / "cmdline");
      std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmd.find("containerd-shim") != std::string::npos &&
          cmd.find(base_) != std::string::npos) {
        out.push_back(static_cast<pid_t>(std::stol(name)));
      }
    }
    return out;
  }

  static std::vector<std::string> mountsUnder(const std::string& base) {
    std::vector<std::string> out;
    std::ifstream in("/proc/self/mounts");
    std::string dev, mnt, rest;
    while (in >> dev >> mnt && std::getline(in, rest)) {
      if (mnt.starts_with(base)) {
        out.push_back(mnt);
      }
    }
    return out;
  }

  // Every controller's directories of the test's cgroup subtree that still exist.
  std::vector<std::string> cgroupsLeft() const {
    std::vector<std::string> out;
    for (const auto& c : std::filesystem::directory_iterator("/sys/fs/cgroup")) {
      const auto d = c.path().string() + top_;
      if (std::filesystem::exists(d)) {
        out.push_back(d);
      }
    }
    return out;
  }

 private:
  static void unmountUnder(const std::string& base) {
    auto m = mountsUnder(base);
    std::sort(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const auto& p : m) {
      ::umount2(p.c_str(), MNT_DETACH);
    }
  }

  void removeCgroups() {
    for (const auto& d : cgroupsLeft()) {
      std::vector<std::string> dirs;
      for (const auto& e : std::filesystem::recursive_directory_iterator(d)) {
        if (e.is_directory()) {
          dirs.push_back(e.path().string());
        }
      }
      std::sort(dirs.begin(), dirs.end(),
                [](const auto& a, const auto& b) { return a.size() > b.size(); });
      dirs.push_back(d);
      for (const auto& x : dirs) {
        if (std::filesystem::exists(x + "/cpu.rt_runtime_us")) {
          std::ofstream(x + "/cpu.rt_runtime_us") << "0";
        }
        ::rmdir(x.c_str());
      }
    }
  }

  std::string configToml() const {
    std::ostringstream t;
    t << "version = 2\n"
      << "root = \"" << base_ << "/root\"\n"
      << "state = \"" << base_ << "/state\"\n"
      << "disabled_plugins = [\"io.containerd.snapshotter.v1.aufs\", "
         "\"io.containerd.snapshotter.v1.btrfs\", "
         "\"io.containerd.snapshotter.v1.zfs\", \"io.containerd.snapshotter.v1.devmapper\"]\n"
      << "[grpc]\n  address = \"" << base_ << "/containerd.sock\"\n"
      << "[ttrpc]\n  address = \"" << base_ << "/containerd.sock.ttrpc\"\n"
      << "[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n"
      << "[plugins]\n"
      << "  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"" << base_ << "/opt\"\n"
      << "  [plugins.\"io.containerd.grpc.v1.cri\"]\n"
      << "    sandbox_image = \"" << kTestImage << "\"\n"
      << "    disable_apparmor = true\n"
      << "    restrict_oom_score_adj = true\n"
      << "    netns_mounts_under_state_dir = true\n"
      << "    stream_server_address = \"127.0.0.1\"\n"
      << "    stream_server_port = \"0\"\n"
      << "    [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
      << "      snapshotter = \"overlayfs\"\n"
      << "      default_runtime_name = \"runc\"\n"
      << "      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n"
      << "        runtime_type = \"io.containerd.runc.v2\"\n"
      << "        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
      << "          SystemdCgroup = false\n"
      << "          BinaryName = \"/usr/sbin/runc\"\n"
      << "          Root = \"" << base_ << "/runc-root\"\n"
      << "    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n"
      << "      bin_dir = \"/usr/lib/cni\"\n"
      << "      conf_dir = \"" << base_ << "/cni\"\n";
    return t.str();
  }

  TempDir dir_;
  std::string base_;
  std::string top_;
  std::unique_ptr<ChildProcess> containerd_;
  std::shared_ptr<grpc::Channel> channel_;
  bool torn_ = false;
};

// A small CRI client (our proto subset) for the tests.
class CriClient {
 public:
  explicit CriClient(std::shared_ptr<grpc::Channel> ch) : stub_(std::move(ch)) {}

  static cri::PodSandboxConfig podConfig(const std::string& name, const std::string& cgroupParent,
                                         const std::map<std::string, std::string>& annotations,
                                         const std::string& logDir) {
    cri::PodSandboxConfig c;
    c.mutable_metadata()->set_name(name);
    c.mutable_metadata()->set_namespace_("default");
    c.mutable_metadata()->set_uid("uid-" + name);
    c.set_log_directory(logDir);
    for (const auto& [k, v] : annotations) {
      (*c.mutable_annotations())[k] = v;
    }
    c.mutable_linux()->set_cgroup_parent(cgroupParent);
    auto* ns = c.mutable_linux()->mutable_security_context()->mutable_namespace_options();
    ns->set_network(cri::NODE);
    ns->set_pid(cri::CONTAINER);
    return c;
  }

  grpc::Status runPod(const cri::PodSandboxConfig& c, std::string& id) {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
    cri::RunPodSandboxRequest r;
    *r.mutable_config() = c;
    cri::RunPodSandboxResponse resp;
    auto st = stub_.RunPodSandbox(&ctx, r, &resp);
    id = resp.pod_sandbox_id();
    return st;
  }

  // `cmd` replaces `sleep 1000000`; `cpuset` pins the container (as kubelet's CPU manager would).
  grpc::Status createContainer(const std::string& podId, const cri::PodSandboxConfig& pod,
                               const std::string& name, std::string& id, unsigned attempt = 0,
                               const std::vector<std::string>& cmd = {},
                               const std::string& cpuset = "") {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
    cri::CreateContainerRequest r;
    r.set_pod_sandbox_id(podId);
    *r.mutable_sandbox_config() = pod;
    auto* c = r.mutable_config();
    c->mutable_metadata()->set_name(name);
    c->mutable_metadata()->set_attempt(attempt);
    c->mutable_image()->set_image(kTestImage);
    if (cmd.empty()) {
      c->add_command("/bin/sleep");
      c->add_args("1000000");
    } else {
      for (const auto& a : cmd) {
        c->add_command(a);
      }
    }
    if (!cpuset.empty()) {
      c->mutable_linux()->mutable_resources()->set_cpuset_cpus(cpuset);
    }
    c->set_log_path(name + "-" + std::to_string(attempt) + ".log");
    auto* sc = c->mutable_linux()->mutable_security_context();
    sc->mutable_capabilities()->add_add_capabilities("SYS_NICE");
    sc->mutable_namespace_options()->set_network(cri::NODE);
    sc->mutable_namespace_options()->set_pid(cri::CONTAINER);
    cri::CreateContainerResponse resp;
    auto st = stub_.CreateContainer(&ctx, r, &resp);
    id = resp.container_id();
    return st;
  }

  grpc::Status start(const std::string& id) {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
    cri::StartContainerRequest r;
    r.set_container_id(id);
    cri::StartContainerResponse resp;
    return stub_.StartContainer(&ctx, r, &resp);
  }

  grpc::Status stopRemoveContainer(const std::string& id) {
    {
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
      cri::StopContainerRequest r;
      r.set_container_id(id);
      r.set_timeout(0);
      cri::StopContainerResponse resp;
      if (auto st = stub_.StopContainer(&ctx, r, &resp); !st.ok()) {
        return st;
      }
    }
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
    cri::RemoveContainerRequest r;
    r.set_container_id(id);
    cri::RemoveContainerResponse resp;
    return stub_.RemoveContainer(&ctx, r, &resp);
  }

  grpc::Status stopRemovePod(const std::string& id) {
    {
      grpc::ClientContext ctx;
      kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
      cri::StopPodSandboxRequest r;
      r.set_pod_sandbox_id(id);
      cri::StopPodSandboxResponse resp;
      if (auto st = stub_.StopPodSandbox(&ctx, r, &resp); !st.ok()) {
        return st;
      }
    }
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(30));
    cri::RemovePodSandboxRequest r;
    r.set_pod_sandbox_id(id);
    cri::RemovePodSandboxResponse resp;
    return stub_.RemovePodSandbox(&ctx, r, &resp);
  }

  // Exit code and stdout of a command run in the container (-1 when the call failed).
  std::pair<int, std::string> exec(const std::string& id, const std::vector<std::string>& cmd,
                                   int timeoutSec = 10) {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(timeoutSec + 10));
    cri::ExecSyncRequest r;
    r.set_container_id(id);
    for (const auto& a : cmd) {
      r.add_cmd(a);
    }
    r.set_timeout(timeoutSec);
    cri::ExecSyncResponse resp;
    auto st = stub_.ExecSync(&ctx, r, &resp);
    if (!st.ok()) {
      return {-1, st.error_message()};
    }
    return {resp.exit_code(), resp.stdout()};
  }

  cri::ContainerStatusResponse status(const std::string& id) {
    grpc::ClientContext ctx;
    kc::grpcx::setTimeout(ctx, std::chrono::seconds(10));
    cri::ContainerStatusRequest r;
    r.set_container_id(id);
    cri::ContainerStatusResponse resp;
    (void)stub_.ContainerStatus(&ctx, r, &resp);
    return resp;
  }

  cri::RuntimeService::Stub& stub() { return stub_; }

 private:
  cri::RuntimeService::Stub stub_;
};

inline std::string readTrim(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
    s.pop_back();
  }
  return s;
}

}  // namespace kc::testing
