// The chassis-sim executable as a separate process: flags, --help, and both drivers against it.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;

namespace {

// A child process with its stdout (and stderr) on a pipe.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      for (auto& a : args) {
        argv.push_back(a.data());
      }
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) {
      fclose(out_);
    }
  }
  std::string readLine() {
    std::string line;
    int c = 0;
    while ((c = fgetc(out_)) != EOF && c != '\n') {
      line.push_back(static_cast<char>(c));
    }
    return line;
  }
  std::string readAll() {
    std::string all;
    int c = 0;
    while ((c = fgetc(out_)) != EOF) {
      all.push_back(static_cast<char>(c));
    }
    return all;
  }
  void signal(int sig) { kill(pid_, sig); }
  // Exit status, or -1 if it did not exit within `limit`.
  int wait(std::chrono::seconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
};

const std::string kBin = CHASSIS_SIM_BIN;
const std::string kTestbed = CHASSIS_SIM_TESTBED;

}  // namespace

TEST_CASE("chassis-sim process: --help says it is a test double that persists nothing",
          "[fabric][sim-process]") {
  Child child({kBin, "--help"});
  const std::string help = child.readAll();
  CHECK(child.wait() == 0);
  CHECK_THAT(help, Catch::Contains("PERSISTS NOTHING"));
  CHECK_THAT(help, Catch::Contains("--latency-scale"));
  CHECK_THAT(help, Catch::Contains("--dialect"));
  CHECK_THAT(help, Catch::Contains("--basic-auth"));
  CHECK_THAT(help, Catch::Contains("--redfish-profile"));
}

TEST_CASE("chassis-sim process: a bad topology fails fast with the reason",
          "[fabric][sim-process]") {
  test::TempDir dir;
  const std::string bad =
      dir.write("bad.yaml", "chassis: [{name: a, hosts: [{port: 999}], gpus: []}]\n");
  Child child({kBin, "--topology", bad, "--port", "0"});
  const std::string out = child.readAll();
  CHECK(child.wait() == 2);
  CHECK_THAT(out, Catch::Contains("0..255"));
}

TEST_CASE("chassis-sim process: both drivers against the executable, then SIGTERM",
          "[fabric][sim-process]") {
  Child child({kBin, "--topology", kTestbed, "--port", "0", "--latency-scale", "0", "--basic-auth",
               "ops:pw"});
  const std::string first = child.readLine();
  INFO(first);
  const auto at = first.find("http://");
  REQUIRE(at != std::string::npos);
  const std::string base = first.substr(at, first.find(' ', at) - at);

  H3Options h3;
  h3.chassis = "falcon-0";
  h3.baseUrl = base + "/chassis/falcon-0";
  h3.credentials = Credentials{"ops", "pw"};
  h3.sleeper = [](Millis) {};
  auto h3d = H3Driver::create(h3);
  REQUIRE(h3d.ok());
  auto inv = (*h3d)->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->gpus.size() == 4);
  CHECK(inv->find("falcon-0.001300")->uuid == "GPU-16a0c321-fc4f-fd47-26e7-770eb9ecf5f9");
  REQUIRE((*h3d)->attach("falcon-0.000500", "0").ok());

  RedfishOptions rf;
  rf.chassis = "falcon-1";
  rf.baseUrl = base + "/chassis/falcon-1";
  rf.credentials = Credentials{"ops", "pw"};
  rf.sleeper = [](Millis) {};
  auto rfd = RedfishDriver::create(rf);
  REQUIRE(rfd.ok());
  REQUIRE((*rfd)->detach("falcon-1.002F00").ok());
  REQUIRE((*rfd)->attach("falcon-1.002F00", "css-host-129").ok());
  auto rinv = (*rfd)->inventory();
  REQUIRE(rinv.ok());
  CHECK(rinv->find("falcon-1.002F00")->hostPort == "css-host-129");
  rfd->reset();  // logs out while the simulator still runs

  child.signal(SIGTERM);
  CHECK(child.wait() == 0);
}

TEST_CASE("chassis-sim process: --redfish-profile emulator serves the second Redfish profile",
          "[fabric][sim-process]") {
  Child child({kBin, "--topology", kTestbed, "--port", "0", "--latency-scale", "0", "--dialect",
               "redfish", "--redfish-profile", "emulator"});
  const std::string first = child.readLine();
  INFO(first);
  CHECK_THAT(first, Catch::Contains("redfish profile emulator"));
  const auto at = first.find("http://");
  REQUIRE(at != std::string::npos);
  const std::string base = first.substr(at, first.find(' ', at) - at);
  RedfishOptions rf;
  rf.chassis = "falcon-1";
  rf.baseUrl = base + "/chassis/falcon-1";
  rf.auth = RedfishAuth::kNone;
  rf.sleeper = [](Millis) {};
  auto rfd = RedfishDriver::create(rf);
  REQUIRE(rfd.ok());
  REQUIRE((*rfd)->detach("falcon-1.002F00").ok());  // DELETE of the composed system
  REQUIRE((*rfd)->attach("falcon-1.002F00", "css-host-129").ok());  // POST to Systems
  auto inv = (*rfd)->inventory();
  REQUIRE(inv.ok());
  CHECK(inv->find("falcon-1.002F00")->hostPort == "css-host-129");
  child.signal(SIGTERM);
  CHECK(child.wait() == 0);
}
