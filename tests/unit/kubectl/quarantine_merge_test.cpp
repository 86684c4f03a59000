// reconfig-mgr folds an operator's edit of status.quarantine into its own quarantine
// (services/reconfig-mgr/pool_view.hpp, mergeOperatorQuarantine): `kubectl kubecomp gpu
// quarantine|release` writes the status, and reconfig-mgr's next status write must keep it
// rather than put back what it wrote before.

#include <catch2/catch.hpp>

#include "services/reconfig-mgr/pool_view.hpp"

using kc::reconfig::mergeOperatorQuarantine;
using kc::reconfig::Quarantine;

TEST_CASE("an operator's quarantine edit is kept, reconfig-mgr's own newer entries too") {
  // ours: reconfig-mgr's quarantine now; base: what it last wrote; theirs: the object now.
  const auto [what, ours, base, theirs, want, changed] =
      GENERATE(table<std::string, Quarantine, Quarantine, Quarantine, Quarantine, bool>({
          {"nobody changed anything",
           {{"a", "lie"}},
           {{"a", "lie"}},
           {{"a", "lie"}},
           {{"a", "lie"}},
           false},
          {"operator released a", {{"a", "lie"}}, {{"a", "lie"}}, {}, {}, true},
          {"operator quarantined b",
           {{"a", "lie"}},
           {{"a", "lie"}},
           {{"a", "lie"}, {"b", "fan"}},
           {{"a", "lie"}, {"b", "fan"}},
           true},
          {"operator changed a's reason",
           {{"a", "lie"}},
           {{"a", "lie"}},
           {{"a", "checked"}},
           {{"a", "checked"}},
           true},
          {"reconfig-mgr quarantined c since its write, operator released a",
           {{"a", "lie"}, {"c", "new lie"}},
           {{"a", "lie"}},
           {},
           {{"c", "new lie"}},
           true},
          {"an entry reconfig-mgr added but never wrote is not taken for a release",
           {{"c", "new lie"}},
           {},
           {},
           {{"c", "new lie"}},
           false},
          {"operator quarantined what reconfig-mgr already holds",
           {{"b", "fan"}},
           {},
           {{"b", "fan"}},
           {{"b", "fan"}},
           false},
      }));
  CAPTURE(what);
  Quarantine merged = ours;
  CHECK(mergeOperatorQuarantine(merged, base, theirs) == changed);
  CHECK(merged == want);
}
