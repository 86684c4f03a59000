#include "tools/bench/reconfig/reconfig_overhead.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "libcore/api/names.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tools/bench/bench_util.hpp"

namespace kc::bench {

namespace {

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double r1(double v) {
  return std::round(v * 10) / 10;
}

}  // namespace

double ReconfigOverhead::overheadMs() const {
  return r1(percentile(total, 0.5));
}

void ReconfigOverhead::print(std::ostream& out, const std::string& indent) const {
  auto row = [&](const char* what, const std::vector<double>& v) {
    out << fmt::format("{}{:<44} p50 {:8.1f} ms   p99 {:8.1f} ms\n", indent, what,
                       percentile(v, 0.5), percentile(v, 0.99));
  };
  row("created -> dst-node request (kubecomp-sched)", toRequest);
  row("request -> move verified (reconfig-mgr)", toMoved);
  row("verified -> allocatable (plugin + kubelet sync)", toVisible);
  row("allocatable -> bound (kubecomp-sched)", toBound);
  row("created -> bound", total);
  out << fmt::format(
      "{}anchor: the original's 1 s device-plugin poll + 1 s Permit poll add ~{} ms mean "
      "(computed)\n",
      indent, kAnchorOriginalPollingMs);
  out << fmt::format("{}goal: < {:.0f} ms\n", indent, kReconfigGoalMs);
}

json ReconfigOverhead::toJson() const {
  return {{"pods", pods},
          {"status_sync", statusSync},
          {"reconfig_overhead_ms", overheadMs()},
          {"reconfig_overhead_p99_ms", r1(percentile(total, 0.99))},
          {"request_p50_ms", r1(percentile(toRequest, 0.5))},
          {"move_p50_ms", r1(percentile(toMoved, 0.5))},
          {"visible_p50_ms", r1(percentile(toVisible, 0.5))},
          {"bind_p50_ms", r1(percentile(toBound, 0.5))},
          {"anchor_original_polling_ms", kAnchorOriginalPollingMs}};
}

ReconfigOverhead measureReconfigOverhead(int pods, const std::string& statusSync) {
  if (pods < 1) {
    throw std::runtime_error("reconfig overhead: at least 1 pod");
  }
  ClusterSpec s;
  s.nodes = {"dst", "src"};
  for (int i = 1; i <= pods; ++i) {
    s.chassis["c0"].push_back({fmt::format("{:02X}", i), "src"});
  }
  s.statusSyncPeriod = statusSync;
  SimCluster c(s);
  // Cordoned: the scheduler places nothing on src, but its GPUs can still be moved.
  if (!c.client().patch(kc::kube::gvr::nodes(), "", "src", kc::kube::PatchType::kMerge,
                        {{"spec", {{"unschedulable", true}}}})) {
    throw std::runtime_error("cannot cordon src");
  }
  c.startManager();
  c.startScheduler();
  if (!c.waitAllocatable("src", pods, std::chrono::seconds(30))) {
    throw std::runtime_error("src never showed its GPUs");
  }
  ReconfigOverhead r;
  r.pods = pods;
  r.statusSync = statusSync;
  for (int i = 1; i <= pods; ++i) {
    const std::string pod = fmt::format("p{}", i);
    const auto t0 = Clock::now();
    c.createPod(pod, 1);
    auto podIs = [&](const std::function<bool(const json&)>& pred) {
      return c.pods().until(
          [&](const kc::kube::Store& st) {
            auto p = st.get("default", pod);
            return p && pred(*p);
          },
          std::chrono::seconds(30));
    };
    if (!podIs([](const json& p) {
          return p["metadata"]
                     .value("annotations", json::object())
                     .contains(kc::api::kDstNodeAnnotation) ||
                 !p["spec"].value("nodeName", "").empty();
        })) {
      throw std::runtime_error("no request for " + pod);
    }
    const auto t1 = Clock::now();
    if (!c.poolUntil(
            [&](const json& st) {
              for (const auto& m : st.value("moves", json::array())) {
                if (m.value("pod", "") == "default/" + pod && m.value("phase", "") == "Succeeded") {
                  return true;
                }
              }
              return false;
            },
            std::chrono::seconds(30))) {
      throw std::runtime_error("no move for " + pod);
    }
    const auto t2 = Clock::now();
    if (!c.waitAllocatable("dst", i, std::chrono::seconds(30))) {
      throw std::runtime_error("dst never showed GPU " + std::to_string(i));
    }
    const auto t3 = Clock::now();
    if (!podIs([](const json& p) { return !p["spec"].value("nodeName", "").empty(); })) {
      throw std::runtime_error(pod + " never bound");
    }
    const auto t4 = Clock::now();
    r.toRequest.push_back(ms(t1 - t0));
    r.toMoved.push_back(ms(t2 - t1));
    r.toVisible.push_back(ms(t3 - t2));
    r.toBound.push_back(ms(t4 - t3));
    r.total.push_back(ms(t4 - t0));
  }
  return r;
}

}  // namespace kc::bench
