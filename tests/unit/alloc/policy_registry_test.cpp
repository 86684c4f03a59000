#include "libcore/alloc/policy_registry.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace kc::alloc;

TEST_CASE("registry: every node policy is found by its name", "[alloc][registry]") {
  const std::string name = GENERATE("eq1", "best-fit", "least-demand", "none");
  auto p = findNodePolicy(name);
  REQUIRE(p.ok());
  CHECK(p->name == name);
  CHECK(p->compare != nullptr);
  CHECK_FALSE(p->description.empty());
}

TEST_CASE("registry: every GPU policy is found by its name", "[alloc][registry]") {
  const std::string name =
      GENERATE("alg1", "unattached-first", "chassis-spread", "random", "first-fit");
  auto p = findGpuPolicy(name);
  REQUIRE(p.ok());
  CHECK(p->name == name);
  CHECK(p->needsRng == (name == "random"));
}

TEST_CASE("registry: unknown names are an error listing the known ones", "[alloc][registry]") {
  const std::string name = GENERATE("", "EQ1", "eq1 ", "best_fit", "alg2");
  auto n = findNodePolicy(name);
  REQUIRE_FALSE(n.ok());
  CHECK(n.error().code == "not_found");
  CHECK(n.error().message.find("least-demand") != std::string::npos);
  auto g = findGpuPolicy(name);
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().code == "not_found");
  CHECK(g.error().message.find("unattached-first") != std::string::npos);
}

TEST_CASE("registry: names are unique and the defaults are registered", "[alloc][registry]") {
  std::set<std::string_view> nodeNames;
  for (const auto& p : nodePolicies()) {
    CHECK(nodeNames.insert(p.name).second);
  }
  std::set<std::string_view> gpuNames;
  for (const auto& p : gpuPolicies()) {
    CHECK(gpuNames.insert(p.name).second);
  }
  CHECK(nodeNames.size() == 4);
  CHECK(gpuNames.size() == 5);
  CHECK(findNodePolicy(kDefaultNodePolicy).ok());
  CHECK(findGpuPolicy(kDefaultGpuPolicy).ok());
}
