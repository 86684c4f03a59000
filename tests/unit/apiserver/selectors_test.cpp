#include "tools/kube-apiserver-double/selectors.hpp"

#include <catch2/catch.hpp>

using kc::apiserver::FieldSelector;
using kc::apiserver::LabelSelector;
using nlohmann::json;

TEST_CASE("label selectors follow apimachinery semantics", "[selectors]") {
  const json labels = {{"app", "web"}, {"tier", "front"}, {"n", "7"}};
  auto [text, expected] = GENERATE(table<std::string, bool>({
      {"", true},
      {"app=web", true},
      {"app==web", true},
      {"app!=web", false},
      {"app!=db", true},
      {"missing!=x", true},
      {"app in (db, web)", true},
      {"app notin (db,web)", false},
      {"app,tier", true},
      {"!app", false},
      {"!missing", true},
      {"missing", false},
      {"app=web,tier=back", false},
      {"n>5", true},
      {"n<5", false},
      // apimachinery parses "()" as the one-element set {""} (parseValues), it does not reject it.
      {"app in ()", false},
      {"app notin ()", true},
      {"missing in ()", false},
      {"missing notin ()", true},
  }));
  CAPTURE(text);
  auto sel = LabelSelector::parse(text);
  REQUIRE(sel.ok());
  CHECK(sel->matches(labels) == expected);
}

TEST_CASE("malformed label selectors are rejected", "[selectors]") {
  auto text =
      GENERATE(as<std::string>{}, "app in web", "a=b,,c", "bad key!=x", "n>x", "app=has space");
  CAPTURE(text);
  CHECK_FALSE(LabelSelector::parse(text).ok());
}

TEST_CASE("field selectors use the resource's supported labels", "[selectors]") {
  const json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
                    {"spec", {{"schedulerName", "kubecomp-sched"}}},
                    {"status", {{"phase", "Pending"}}}};
  const std::vector<std::string> podFields = {"spec.nodeName", "spec.schedulerName",
                                              "status.phase"};
  auto [text, expected] = GENERATE(table<std::string, bool>({
      {"spec.nodeName=", true},  // unbound pods: the field is absent
      {"spec.schedulerName=kubecomp-sched,spec.nodeName=", true},
      {"spec.schedulerName!=kubecomp-sched", false},
      {"status.phase==Pending", true},
      {"metadata.name=p,metadata.namespace=ns", true},
      {"metadata.name=q", false},
  }));
  CAPTURE(text);
  auto sel = FieldSelector::parse(text, podFields);
  REQUIRE(sel.ok());
  CHECK(sel->matches(pod) == expected);
}

TEST_CASE("an unsupported field label is an error with the real message", "[selectors]") {
  auto sel = FieldSelector::parse("spec.foo=bar", {"spec.nodeName"});
  REQUIRE_FALSE(sel.ok());
  CHECK(sel.error().message == "field label not supported: spec.foo");
}

TEST_CASE("an empty value list means the empty value, as apimachinery parses it", "[selectors]") {
  const json labels = {{"flag", ""}, {"app", "web"}};
  auto [text, expected] = GENERATE(table<std::string, bool>({
      {"flag in ()", true},
      {"flag notin ()", false},
      {"flag in (),app=web", true},
      {"app in (web, )", true},
  }));
  CAPTURE(text);
  auto sel = LabelSelector::parse(text);
  REQUIRE(sel.ok());
  CHECK(sel->matches(labels) == expected);
}
