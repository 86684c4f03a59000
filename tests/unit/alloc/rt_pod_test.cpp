#include "libcore/alloc/rt_pod.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/rng.hpp"

using namespace kc::alloc;

namespace {

RtNodeState node(RtKernel kernel, std::vector<std::uint32_t> cores,
                 RtBound bound = {950'000, 1'000'000}) {
  auto n = RtNodeState::create(RtNodeInfo{bound, std::move(cores), kernel});
  REQUIRE(n.ok());
  return *n;
}

RtPacking firstFit() {
  return *findRtPacking("first-fit");
}

}  // namespace

TEST_CASE("RT annotations resolve per container, pod-level as default", "[alloc][rt]") {
  const RtStringMap a{{"rt.kubecomp.io/runtime-us", "10000"},
                      {"rt.kubecomp.io/period-us", "100000"},
                      {"rt.kubecomp.io/app.cpus", "2"},
                      {"rt.kubecomp.io/side.runtime-us", "5000"},
                      {"other/annotation", "x"}};
  CHECK(rtReservationFor(a, "app").value() == RtReservation{10000, 100000, 2});
  CHECK(rtReservationFor(a, "side").value() == RtReservation{5000, 100000, 1});
  CHECK(rtReservationFor(a, "log").value() == RtReservation{10000, 100000, 1});
  CHECK_FALSE(rtReservationFor({}, "app").value().has_value());
  const std::vector<std::string> names{"app", "side"};
  CHECK(validateRtAnnotations(a, names).ok());
  CHECK(validateRtAnnotations(a).ok());
}

TEST_CASE("bad RT annotations are refused with the key and the reason", "[alloc][rt]") {
  auto [key, value, container, expected] =
      GENERATE(table<std::string, std::string, std::string, std::string>({
          {"rt.kubecomp.io/runtime-us", "abc", "", "not a decimal integer"},
          {"rt.kubecomp.io/runtime-us", "-5", "", "not a decimal integer"},
          {"rt.kubecomp.io/runtime-us", "200000", "", "runtime exceeds period"},
          // The refusal names the key to change (issue 24), as docs/rt.md promises.
          {"rt.kubecomp.io/runtime-us", "200000", "",
           "annotation rt.kubecomp.io/runtime-us=\"200000\" is more than annotation "
           "rt.kubecomp.io/period-us=\"100000\""},
          {"rt.kubecomp.io/app.runtime-us", "200000", "app",
           "container 'app': annotation rt.kubecomp.io/app.runtime-us=\"200000\" is more than"},
          {"rt.kubecomp.io/runtime-us", "0", "", "annotation rt.kubecomp.io/runtime-us=\"0\""},
          {"rt.kubecomp.io/period-us", "0", "", "period is zero"},
          {"rt.kubecomp.io/period-us", "0", "", "annotation rt.kubecomp.io/period-us=\"0\""},
          {"rt.kubecomp.io/cpus", "0", "", "cpus is zero"},
          {"rt.kubecomp.io/cpus", "0", "", "annotation rt.kubecomp.io/cpus=\"0\""},
          {"rt.kubecomp.io/cpus", "99999999", "", "exceeds"},
          {"rt.kubecomp.io/bogus", "1", "", "unknown real-time field"},
          {"rt.kubecomp.io/nosuch.cpus", "1", "app", "no container named 'nosuch'"},
          {"rt.kubecomp.io/.cpus", "1", "", "empty container name"},
      }));
  RtStringMap a{{"rt.kubecomp.io/runtime-us", "10000"}, {"rt.kubecomp.io/period-us", "100000"}};
  a[key] = value;
  const std::vector<std::string> names{"app"};
  auto s = container.empty() ? validateRtAnnotations(a) : validateRtAnnotations(a, names);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "invalid");
  CHECK_THAT(s.error().message, Catch::Contains(expected));
  // Half a reservation is an error too, as is cpus alone.
  CHECK_THAT(rtReservationFor({{"rt.kubecomp.io/runtime-us", "5"}}, "c").error().message,
             Catch::Contains("no period-us"));
  CHECK_THAT(rtReservationFor({{"rt.kubecomp.io/c.cpus", "2"}}, "c").error().message,
             Catch::Contains("without"));
}

TEST_CASE("cpu lists and assignments round-trip, malformed ones are refused", "[alloc][rt]") {
  CHECK(parseCpuList("0-2,5,7-8").value() == std::vector<std::uint32_t>{0, 1, 2, 5, 7, 8});
  CHECK(formatCpuList(std::vector<std::uint32_t>{0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
  for (const char* bad : {"", "1,", "2-1", "1,1", "3,2", "a", "1--2", "0-99999999"}) {
    CHECK(parseCpuList(bad).error().code == "invalid");
  }
  const RtAssignment a{{"app", {0, 1}}, {"side", {3}}};
  CHECK(formatRtAssignment(a) == "app=0-1;side=3");
  CHECK(parseRtAssignment("app=0-1;side=3").value() == a);
  CHECK(parseRtAssignment("app").error().code == "invalid");
  CHECK(parseRtAssignment("app=1;app=2").error().code == "invalid");
}

TEST_CASE("RT node labels and annotations round-trip", "[alloc][rt]") {
  const RtNodeInfo info{RtBound{950'000, 1'000'000}, {0, 1, 2, 3}, RtKernel::kRtGroup};
  const RtStringMap labels{{std::string(kRtCapableLabel), "true"}};
  const auto parsed = parseRtNode(labels, formatRtNodeAnnotations(info)).value();
  REQUIRE(parsed.has_value());
  CHECK(parsed->cores == info.cores);
  CHECK(parsed->bound.runtimeUs == 950'000);
  CHECK(parsed->kernel == RtKernel::kRtGroup);
  CHECK_FALSE(parseRtNode({}, formatRtNodeAnnotations(info)).value().has_value());
  auto ann = formatRtNodeAnnotations(info);
  ann[std::string(kRtBoundAnnotation)] = "2/1";
  CHECK(parseRtNode(labels, ann).error().code == "invalid");
  ann.erase(std::string(kRtBoundAnnotation));
  CHECK(parseRtNode(labels, ann).error().code == "invalid");
}

TEST_CASE("rt-group kernels also limit the sum over all RT containers", "[alloc][rt]") {
  // 0.5 + 0.5 on two different cores: fine per core, but cgroup v1 RT group scheduling
  // checks the sum of siblings' runtime/period against the root's 0.95.
  auto group = node(RtKernel::kRtGroup, {0, 1});
  auto hcbs = node(RtKernel::kHcbs, {0, 1});
  const RtReservation half{500'000, 1'000'000, 1};
  for (auto* n : {&group, &hcbs}) {
    auto c = n->place(half, firstFit());
    REQUIRE(c.ok());
    REQUIRE(n->admit(half, *c).ok());
  }
  CHECK(group.place(half, firstFit()).error().code == "insufficient");
  CHECK_THAT(group.place(half, firstFit()).error().message, Catch::Contains("group"));
  CHECK(hcbs.place(half, firstFit()).value() == std::vector<std::uint32_t>{1});
  REQUIRE(group.release(half, std::vector<std::uint32_t>{0}).ok());
  CHECK(group.groupUsedPpb() == 0);
  CHECK(group.place(half, firstFit()).ok());
}

TEST_CASE("placeRtPod: every container or none, the failure names the container", "[alloc][rt]") {
  const auto n = node(RtKernel::kHcbs, {0, 1});
  const std::vector<RtContainerRequest> pod{{"a", {510'000, 1'000'000, 1}},
                                            {"b", {510'000, 1'000'000, 1}},
                                            {"c", {510'000, 1'000'000, 1}}};
  auto r = placeRtPod(n, pod, firstFit());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("container 'c'"));
  // The paper's sum test would have admitted it (1.53 <= 2 * 0.95).
  CHECK(utilizationSumAdmits(n.cores(), RtReservation{510'000, 1'000'000, 3}));
  auto two = placeRtPod(n, std::span(pod).first(2), firstFit());
  REQUIRE(two.ok());
  CHECK(two->at("a") == std::vector<std::uint32_t>{0});
  CHECK(two->at("b") == std::vector<std::uint32_t>{1});
  CHECK(n.cores().usedPpb(0) == 0);  // the node itself is unchanged
}

TEST_CASE("placeRtPod agrees with the node placing the containers one by one (random)",
          "[alloc][rt]") {
  SplitMix64 rng(14);
  for (int round = 0; round < 500; ++round) {
    const auto kernel = rng.below(2) == 0 ? RtKernel::kRtGroup : RtKernel::kHcbs;
    auto n = node(kernel, {0, 1, 2, 3}, RtBound{1'000'000, 1'000'000});
    std::vector<RtContainerRequest> pod;
    for (std::uint64_t i = 0, k = 1 + rng.below(4); i < k; ++i) {
      pod.push_back(
          {"c" + std::to_string(i), RtReservation{1 + rng.below(600'000), 1'000'000,
                                                  static_cast<std::uint32_t>(1 + rng.below(3))}});
    }
    const auto planned = placeRtPod(n, pod, firstFit());
    bool nodeOk = true;
    RtAssignment got;
    for (const auto& c : pod) {
      auto cpus = n.place(c.reservation, firstFit());
      if (!cpus) {
        nodeOk = false;
        break;
      }
      REQUIRE(n.admit(c.reservation, *cpus).ok());
      got[c.container] = *cpus;
    }
    REQUIRE(planned.ok() == nodeOk);
    if (nodeOk) {
      CHECK(*planned == got);
    }
  }
}
