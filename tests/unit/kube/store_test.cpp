#include "libcore/kube/store.hpp"

#include <catch2/catch.hpp>
#include <random>

using namespace kc::kube;
using Kind = Notification::Kind;

namespace {

// Builder for pod-shaped objects.
class PodBuilder {
 public:
  explicit PodBuilder(std::string name) { obj_["metadata"]["name"] = std::move(name); }
  PodBuilder& ns(std::string v) {
    obj_["metadata"]["namespace"] = std::move(v);
    return *this;
  }
  PodBuilder& rv(std::string v) {
    obj_["metadata"]["resourceVersion"] = std::move(v);
    return *this;
  }
  PodBuilder& node(std::string v) {
    obj_["spec"]["nodeName"] = std::move(v);
    return *this;
  }
  PodBuilder& label(const std::string& k, std::string v) {
    obj_["metadata"]["labels"][k] = std::move(v);
    return *this;
  }
  ObjectPtr build() const { return std::make_shared<const nlohmann::json>(obj_); }

 private:
  nlohmann::json obj_ = nlohmann::json::object();
};

PodBuilder makePod(std::string name) {
  return PodBuilder(std::move(name));
}

std::vector<std::string> names(const std::vector<ObjectPtr>& objs) {
  std::vector<std::string> out;
  for (const auto& o : objs) {
    out.push_back((*o)["metadata"]["name"]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("store keys and indexes", "[kube][store]") {
  Store s;
  CHECK(objectKey(*makePod("n1").build()) == "n1");
  CHECK(objectKey(*makePod("p").ns("a").build()) == "a/p");
  CHECK(objectKey(nlohmann::json::object()).empty());
  CHECK_FALSE(s.add(std::make_shared<const nlohmann::json>(nlohmann::json::object())).has_value());

  auto n = s.add(makePod("p1").ns("a").rv("1").node("node-1").label("app", "web").build());
  REQUIRE(n);
  CHECK(n->kind == Kind::kAdd);
  s.add(makePod("p2").ns("a").rv("2").label("app", "db").build());
  s.add(makePod("p3").ns("b").rv("3").node("node-1").label("app", "web").build());
  CHECK(s.size() == 3);
  CHECK(names(s.byNamespace("a")) == std::vector<std::string>{"p1", "p2"});
  CHECK(names(s.byNode("node-1")) == std::vector<std::string>{"p1", "p3"});
  CHECK(names(s.byLabel("app", "web")) == std::vector<std::string>{"p1", "p3"});
  CHECK(s.get("a", "p2") != nullptr);
  CHECK(s.get("b", "p2") == nullptr);

  // An update moves the object between index buckets.
  auto u = s.add(makePod("p1").ns("a").rv("4").node("node-2").label("app", "db").build());
  REQUIRE(u);
  CHECK(u->kind == Kind::kUpdate);
  CHECK((*u->oldObj)["metadata"]["resourceVersion"] == "1");
  CHECK(names(s.byNode("node-1")) == std::vector<std::string>{"p3"});
  CHECK(names(s.byNode("node-2")) == std::vector<std::string>{"p1"});
  CHECK(names(s.byLabel("app", "db")) == std::vector<std::string>{"p1", "p2"});

  auto d = s.remove(makePod("p3").ns("b").rv("5").build());
  REQUIRE(d);
  CHECK(d->kind == Kind::kDelete);
  CHECK((*d->oldObj)["metadata"]["resourceVersion"] == "5");
  CHECK(s.byNode("node-1").empty());
  CHECK(s.byNamespace("b").empty());
  CHECK_FALSE(s.remove(makePod("p3").ns("b").build()).has_value());
}

TEST_CASE("replace emits the add/update/delete diff", "[kube][store]") {
  Store s;
  s.add(makePod("keep").ns("a").rv("1").build());
  s.add(makePod("change").ns("a").rv("2").node("n1").build());
  s.add(makePod("gone").ns("a").rv("3").node("n1").build());
  auto diff =
      s.replace({makePod("keep").ns("a").rv("1").build(), makePod("change").ns("a").rv("9").build(),
                 makePod("new").ns("a").rv("10").node("n2").build()});
  std::map<std::string, Kind> kinds;
  for (const auto& n : diff) {
    const auto& obj = n.newObj ? *n.newObj : *n.oldObj;
    kinds[obj["metadata"]["name"]] = n.kind;
  }
  CHECK(kinds == std::map<std::string, Kind>{
                     {"change", Kind::kUpdate}, {"gone", Kind::kDelete}, {"new", Kind::kAdd}});
  CHECK(s.size() == 3);
  CHECK(s.byNode("n1").empty());
  CHECK(names(s.byNode("n2")) == std::vector<std::string>{"new"});
}

TEST_CASE("applying the notifications of random changes reproduces the state", "[kube][store]") {
  // A handler-side mirror built only from notifications must always equal the store.
  std::mt19937 rng(1234);
  Store s;
  std::map<std::string, std::string> mirror;  // key -> rv
  auto apply = [&mirror](const Notification& n) {
    if (n.kind == Kind::kDelete) {
      mirror.erase(objectKey(*n.oldObj));
    } else {
      mirror[objectKey(*n.newObj)] = objectResourceVersion(*n.newObj);
    }
  };
  int rv = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 40; ++i) {
      auto name = "p" + std::to_string(rng() % 30);
      auto obj =
          makePod(name).ns("ns" + std::to_string(rng() % 2)).rv(std::to_string(++rv)).build();
      if (rng() % 3 == 0) {
        if (auto n = s.remove(obj)) {
          apply(*n);
        }
      } else if (auto n = s.add(obj)) {
        apply(*n);
      }
    }
    std::vector<ObjectPtr> snapshot;
    for (int i = 0; i < 30; ++i) {
      if (rng() % 2 == 0) {
        snapshot.push_back(makePod("p" + std::to_string(i))
                               .ns("ns" + std::to_string(rng() % 2))
                               .rv(std::to_string(++rv))
                               .build());
      }
    }
    for (const auto& n : s.replace(snapshot)) {
      apply(n);
    }
    std::map<std::string, std::string> actual;
    for (const auto& o : s.list()) {
      actual[objectKey(*o)] = objectResourceVersion(*o);
    }
    REQUIRE(mirror == actual);
  }
}
