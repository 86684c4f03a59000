// RtCgroupTree on a directory tree of plain files (no kernel): budgets are written top-down
// with each ancestor holding the rounded-up sum beneath it, released bottom-up, a refused
// write leaves nothing changed; cgroup paths and RT support detection.

#include "services/rt-kubelet-shim/rt_cgroups.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using kc::alloc::RtReservation;
using kc::rtshim::RtCgroupOptions;
using kc::rtshim::RtCgroupTree;

namespace {

std::string read(const std::string& p) {
  std::ifstream in(p);
  std::string s;
  in >> s;
  return s;
}

void mkcg(const std::string& dir, const std::string& period = "1000000") {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/cpu.rt_period_us") << period;
  std::ofstream(dir + "/cpu.rt_runtime_us") << "0";
}

}  // namespace

TEST_CASE("cgroup paths: cgroupfs parents only", "[rt]") {
  CHECK(kc::rtshim::containerCgroupPath("/kubepods/burstable/pod1", "abc").value() ==
        "/kubepods/burstable/pod1/abc");
  CHECK(kc::rtshim::containerCgroupPath("/kubepods/", "abc").value() == "/kubepods/abc");
  CHECK(kc::rtshim::containerCgroupPath("kubepods-burstable.slice", "abc").error().code ==
        "invalid");
  CHECK(kc::rtshim::containerCgroupPath("/a/../b", "abc").error().code == "invalid");
  CHECK(kc::rtshim::containerCgroupPath("/a", "x/y").error().code == "invalid");
  CHECK(kc::rtshim::containerCgroupPath("", "abc").error().code == "invalid");
}

TEST_CASE("RtCgroupTree: top-down apply, shared ancestors, bottom-up release", "[rt]") {
  kc::testing::TempDir dir;
  const std::string root = dir.path().string();
  mkcg(root + "/kp");
  mkcg(root + "/kp/be");
  mkcg(root + "/kp/be/pod1");
  mkcg(root + "/kp/be/pod2", "500000");  // a pod whose period is not 1 s
  RtCgroupOptions o;
  o.cpuRoot = root;
  RtCgroupTree tree(o);
  // 1/3 rounds up: 333334 us at period 1 s, never below the kernel's own rounding.
  REQUIRE(tree.apply("/kp/be/pod1/c1", RtReservation{100000, 300000, 1}).ok());
  CHECK(read(root + "/kp/be/pod1/c1/cpu.rt_period_us") == "300000");
  CHECK(read(root + "/kp/be/pod1/c1/cpu.rt_runtime_us") == "100000");
  CHECK(read(root + "/kp/be/pod1/cpu.rt_runtime_us") == "333334");
  CHECK(read(root + "/kp/cpu.rt_runtime_us") == "333334");
  REQUIRE(tree.apply("/kp/be/pod2/c2", RtReservation{200000, 1000000, 2}).ok());
  CHECK(read(root + "/kp/be/pod2/cpu.rt_runtime_us") == "100000");  // 0.2 of 500 ms
  CHECK(read(root + "/kp/be/cpu.rt_runtime_us") == "533334");
  CHECK(tree.ancestorPpb("/kp") == 533'333'334);
  // Same leaf, same budget: idempotent; a different budget: conflict, nothing written.
  CHECK(tree.apply("/kp/be/pod1/c1", RtReservation{100000, 300000, 1}).ok());
  CHECK(tree.apply("/kp/be/pod1/c1", RtReservation{1000, 300000, 1}).error().code == "conflict");
  CHECK(read(root + "/kp/be/pod1/c1/cpu.rt_runtime_us") == "100000");
  // Invalid reservations are refused before anything is written.
  CHECK(tree.apply("/kp/be/pod1/c3", RtReservation{5, 1, 1}).error().code == "invalid");
  CHECK_FALSE(std::filesystem::exists(root + "/kp/be/pod1/c3"));

  REQUIRE(tree.release("/kp/be/pod1/c1").ok());
  CHECK(read(root + "/kp/be/pod1/c1/cpu.rt_runtime_us") == "0");  // (rmdir works only on cgroupfs)
  CHECK(read(root + "/kp/be/pod1/cpu.rt_runtime_us") == "0");
  CHECK(read(root + "/kp/cpu.rt_runtime_us") == "200000");
  CHECK(tree.release("/kp/be/pod1/c1").ok());  // idempotent
  REQUIRE(tree.release("/kp/be/pod2/c2").ok());
  CHECK(read(root + "/kp/cpu.rt_runtime_us") == "0");
  CHECK(tree.ancestorPpb("/kp") == 0);
}

TEST_CASE("RtCgroupTree: a failed write rolls the ancestors back", "[rt]") {
  kc::testing::TempDir dir;
  const std::string root = dir.path().string();
  mkcg(root + "/kp");
  mkcg(root + "/kp/pod");
  std::filesystem::create_directories(root + "/kp/pod/leaf");
  std::filesystem::create_directories(root + "/kp/pod/leaf/cpu.rt_runtime_us");  // unwritable
  std::ofstream(root + "/kp/pod/leaf/cpu.rt_period_us") << "0";
  RtCgroupOptions o;
  o.cpuRoot = root;
  RtCgroupTree tree(o);
  CHECK_FALSE(tree.apply("/kp/pod/leaf", RtReservation{100, 1000, 1}).ok());
  CHECK(read(root + "/kp/cpu.rt_runtime_us") == "0");
  CHECK(read(root + "/kp/pod/cpu.rt_runtime_us") == "0");
  CHECK_FALSE(tree.has("/kp/pod/leaf"));
}

TEST_CASE("detectRtSupport says what is missing", "[rt]") {
  kc::testing::TempDir dir;
  const std::string root = dir.path().string();
  RtCgroupOptions o;
  o.cpuRoot = root + "/cpu";
  o.cpusetRoot = root + "/cpuset";
  o.unifiedRoot = root + "/unified";
  o.sysctlDir = root + "/sys";
  auto s = kc::rtshim::detectRtSupport(o);
  CHECK_FALSE(s.capable);
  CHECK_THAT(s.reason, Catch::Contains("sched_rt_runtime_us"));
  std::filesystem::create_directories(o.sysctlDir);
  std::ofstream(o.sysctlDir + "/sched_rt_runtime_us") << "950000\n";
  std::ofstream(o.sysctlDir + "/sched_rt_period_us") << "1000000\n";
  s = kc::rtshim::detectRtSupport(o);
  CHECK_FALSE(s.capable);
  CHECK_THAT(s.reason, Catch::Contains("no RT group scheduling"));
  std::filesystem::create_directories(o.unifiedRoot);
  std::ofstream(o.unifiedRoot + "/cpu.rt.max") << "max 1000000\n";
  s = kc::rtshim::detectRtSupport(o);
  CHECK_FALSE(s.capable);
  CHECK_THAT(s.reason, Catch::Contains("HCBS"));
  std::filesystem::remove(o.unifiedRoot + "/cpu.rt.max");
  mkcg(o.cpuRoot);
  std::filesystem::create_directories(o.cpusetRoot);
  std::ofstream(o.cpusetRoot + "/cpuset.effective_cpus") << "0-3\n";
  s = kc::rtshim::detectRtSupport(o);
  if (::geteuid() == 0) {
    CHECK(s.capable);
    CHECK(s.info.cores == std::vector<std::uint32_t>{0, 1, 2, 3});
    CHECK(s.info.bound.runtimeUs == 950000);
  } else {
    CHECK_THAT(s.reason, Catch::Contains("not root"));
  }
  std::ofstream(o.sysctlDir + "/sched_rt_runtime_us") << "2000000\n";
  s = kc::rtshim::detectRtSupport(o);
  CHECK_FALSE(s.capable);
  CHECK_THAT(s.reason, Catch::Contains("exceeds period"));
}
