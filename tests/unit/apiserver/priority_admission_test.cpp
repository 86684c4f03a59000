// The double's Priority admission (priority_admission.hpp), as the real plugin answers.

#include "tools/kube-apiserver-double/priority_admission.hpp"

#include <catch2/catch.hpp>

#include "tools/kube-apiserver-double/api_error.hpp"

namespace kc::apiserver {
namespace {

using nlohmann::json;

json cls(const std::string& name, int value, bool globalDefault = false,
         const std::string& policy = "") {
  json pc = {{"metadata", {{"name", name}}}, {"value", value}, {"globalDefault", globalDefault}};
  if (!policy.empty()) {
    pc["preemptionPolicy"] = policy;
  }
  return pc;
}

json podWith(const json& spec) {
  json pod = {{"metadata", {{"name", "p"}}}, {"spec", spec}};
  pod["spec"]["containers"] = json::array({{{"name", "c"}, {"image", "busybox"}}});
  return pod;
}

// The 403's message, or "" when admitted.
std::string admit(json& pod, const std::vector<json>& classes) {
  std::vector<const json*> ptrs;
  for (const auto& c : classes) {
    ptrs.push_back(&c);
  }
  try {
    admitPodPriority("p", pod, ptrs);
  } catch (const ApiError& e) {
    CHECK(e.code() == 403);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("priority admission fills spec.priority from the class", "[api][priority]") {
  const std::vector<json> classes = {cls("high", 1000, false, "Never"), cls("low", 10)};
  json pod = podWith({{"priorityClassName", "high"}});
  CHECK(admit(pod, classes).empty());
  CHECK(pod["spec"]["priority"] == 1000);
  CHECK(pod["spec"]["preemptionPolicy"] == "Never");

  json none = podWith(json::object());
  CHECK(admit(none, classes).empty());
  CHECK(none["spec"]["priority"] == 0);
  CHECK(none["spec"]["preemptionPolicy"] == "PreemptLowerPriority");
  CHECK_FALSE(none["spec"].contains("priorityClassName"));

  json builtin = podWith({{"priorityClassName", "system-node-critical"}});
  CHECK(admit(builtin, classes).empty());
  CHECK(builtin["spec"]["priority"] == 2000001000);
}

TEST_CASE("priority admission: the global default names itself on the pod", "[api][priority]") {
  const std::vector<json> classes = {cls("standard", 100, true)};
  json pod = podWith(json::object());
  CHECK(admit(pod, classes).empty());
  CHECK(pod["spec"]["priority"] == 100);
  CHECK(pod["spec"]["priorityClassName"] == "standard");
}

TEST_CASE("priority admission refuses what the real plugin refuses", "[api][priority]") {
  const std::vector<json> classes = {cls("high", 1000, false, "Never")};
  json unknown = podWith({{"priorityClassName", "gold"}});
  CHECK(admit(unknown, classes) ==
        "pods \"p\" is forbidden: no PriorityClass with name gold was found");
  json given = podWith({{"priorityClassName", "high"}, {"priority", 5}});
  CHECK(admit(given, classes) ==
        "pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod "
        "spec; priority admission controller computed 1000 from the given PriorityClass name");
  json policy =
      podWith({{"priorityClassName", "high"}, {"preemptionPolicy", "PreemptLowerPriority"}});
  CHECK(admit(policy, classes) ==
        "pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must "
        "not be provided in pod spec; priority admission controller computed Never from the given "
        "PriorityClass name");
  json same = podWith({{"priorityClassName", "high"}, {"priority", 1000}});
  CHECK(admit(same, classes).empty());
}

TEST_CASE("priority admission checks new PriorityClasses", "[api][priority]") {
  const json existing = cls("standard", 100, true);
  const std::vector<const json*> classes = {&existing};
  CHECK_NOTHROW(admitPriorityClass("batch", cls("batch", 50), classes));
  try {
    admitPriorityClass("second", cls("second", 50, true), classes);
    FAIL("a second global default was accepted");
  } catch (const ApiError& e) {
    CHECK(e.code() == 403);
    CHECK(std::string(e.what()) ==
          "priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass standard is "
          "already marked as default. Only one default can exist");
  }
  try {
    admitPriorityClass("huge", cls("huge", 1'000'000'001), classes);
    FAIL("a value above one billion was accepted");
  } catch (const ApiError& e) {
    CHECK(e.code() == 422);
  }
  try {
    admitPriorityClass("system-mine", cls("system-mine", 5), classes);
    FAIL("a reserved name was accepted");
  } catch (const ApiError& e) {
    CHECK(e.code() == 422);
  }
}

}  // namespace kc::apiserver
