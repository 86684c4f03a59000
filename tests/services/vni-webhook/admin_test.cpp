#include "services/vni-webhook/admin.hpp"

#include <catch2/catch.hpp>

using kc::vni::AllocationRow;
using kc::vni::OwnerKey;

TEST_CASE("Admin audit reads live owners from kubectl JSON or lines and finds orphans", "[vni]") {
  const std::string kubectlJson = R"({"apiVersion":"v1","kind":"List","items":[
      {"kind":"Job","metadata":{"name":"a","namespace":"ml","uid":"u-a"}},
      {"kind":"Deployment","metadata":{"name":"b","namespace":"web","uid":"u-b"}}]})";
  const std::string lines = "# live owners\nml/u-a\nweb/u-b\n\n";
  for (const std::string& text : {kubectlJson, lines}) {
    auto live = kc::vni::parseLiveOwners(text);
    REQUIRE(live.ok());
    CHECK(live->size() == 2);
    const std::vector<AllocationRow> rows{{"u-a", "ml", 1024, "Job", "a", 0},
                                          {"u-b", "web", 1025, "Deployment", "b", 0},
                                          {"u-gone", "ml", 1026, "Job", "old", 0},
                                          {"u-a", "other", 1027, "Job", "a", 0}};
    auto orphans = kc::vni::findOrphans(rows, *live, 0);
    REQUIRE(orphans.size() == 2);
    CHECK(orphans[0].vni == 1026);
    CHECK(orphans[1].vni == 1027);  // same uid in another namespace is another owner
  }
  CHECK(kc::vni::parseLiveOwners("no-slash\n").error().code == "invalid");
  CHECK(kc::vni::parseLiveOwners(R"({"items":[{"metadata":{"name":"x"}}]})").error().code ==
        "invalid");
}

TEST_CASE("Admin audit never judges rows written after the live list was taken", "[vni]") {
  auto live = kc::vni::parseLiveOwners("ml/u-a\n");
  REQUIRE(live.ok());
  // Allocated at t=1000 s (before the list) and t=5000 s (after it: its owner may be newer).
  const std::vector<AllocationRow> rows{{"u-a", "ml", 1024, "Job", "a", 1'000'000},
                                        {"u-old", "ml", 1025, "Job", "old", 1'000'000},
                                        {"u-new", "ml", 1026, "Job", "new", 5'000'000}};
  std::size_t tooRecent = 0;
  auto orphans = kc::vni::findOrphans(rows, *live, 4'000'000, &tooRecent);
  REQUIRE(orphans.size() == 1);
  CHECK(orphans[0].uid == "u-old");
  CHECK(tooRecent == 1);
  CHECK(kc::vni::findOrphans(rows, *live, 5'000'000).size() == 2);
}
