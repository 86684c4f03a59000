#include "libcore/kube/resource.hpp"

#include <catch2/catch.hpp>

using namespace kc::kube;

TEST_CASE("resource paths for core and named groups", "[kube][resource]") {
  using Row = std::tuple<GroupVersionResource, std::string, std::string, std::string, std::string>;
  auto [r, ns, name, sub, want] =
      GENERATE(table<GroupVersionResource, std::string, std::string, std::string, std::string>({
          Row{gvr::pods(), "", "", "", "/api/v1/pods"},
          Row{gvr::pods(), "default", "", "", "/api/v1/namespaces/default/pods"},
          Row{gvr::pods(), "ns1", "p1", "", "/api/v1/namespaces/ns1/pods/p1"},
          Row{gvr::pods(), "ns1", "p1", "binding", "/api/v1/namespaces/ns1/pods/p1/binding"},
          Row{gvr::pods(), "ns1", "p1", "status", "/api/v1/namespaces/ns1/pods/p1/status"},
          Row{gvr::nodes(), "", "n1", "status", "/api/v1/nodes/n1/status"},
          Row{gvr::leases(), "kube-system", "sched", "",
              "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/sched"},
          Row{GroupVersionResource{"kubecomp.io", "v1alpha1", "gpupools", false}, "", "pool-a", "",
              "/apis/kubecomp.io/v1alpha1/gpupools/pool-a"},
      }));
  auto p = resourcePath(r, ns, name, sub);
  REQUIRE(p.ok());
  CHECK(*p == want);
}

TEST_CASE("resource paths reject bad segments", "[kube][resource]") {
  CHECK_FALSE(resourcePath(gvr::pods(), "ns", "a/b").ok());
  CHECK_FALSE(resourcePath(gvr::pods(), "..", "p").ok());
  CHECK_FALSE(resourcePath(gvr::pods(), "ns", "", "status").ok());
  CHECK_FALSE(resourcePath(gvr::nodes(), "ns", "n1").ok());
  CHECK_FALSE(resourcePath(gvr::pods(), "ns", "p%2F").ok());
  CHECK_FALSE(resourcePath(gvr::pods(), "ns", "p q").ok());
  CHECK(resourcePath(gvr::pods(), "ns", "p", "..").error().code == "invalid");
}

TEST_CASE("list and watch queries are encoded", "[kube][resource]") {
  ListOptions o;
  CHECK(encodeQuery(o).empty());
  o.labelSelector = "app=web,tier in (a,b)";
  o.fieldSelector = "spec.schedulerName=kubecomp-sched,spec.nodeName=";
  o.limit = 500;
  o.continueToken = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTB9";
  CHECK(encodeQuery(o) ==
        "?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
        "&fieldSelector=spec.schedulerName%3Dkubecomp-sched%2Cspec.nodeName%3D"
        "&limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTB9");
  ListOptions w;
  w.watch = true;
  w.resourceVersion = "10245";
  w.allowWatchBookmarks = true;
  w.timeoutSeconds = 412;
  CHECK(encodeQuery(w) ==
        "?resourceVersion=10245&watch=true&allowWatchBookmarks=true&timeoutSeconds=412");
  ListOptions z;
  z.resourceVersion = "0";
  z.resourceVersionMatch = "NotOlderThan";
  CHECK(encodeQuery(z) == "?resourceVersion=0&resourceVersionMatch=NotOlderThan");
  ListOptions empty;
  empty.resourceVersion = "";
  CHECK(encodeQuery(empty) == "?resourceVersion=");
}
