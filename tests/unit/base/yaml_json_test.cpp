// kc::yamlToJson: core-schema scalar typing, multi-document streams, bad input.

#include "libcore/base/yaml_json.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>

using nlohmann::json;

TEST_CASE("yaml: plain scalars are typed by the YAML 1.2 core schema", "[base][yaml]") {
  struct Row {
    const char* yaml;
    json expected;
  };
  auto row = GENERATE(values<Row>({
      {"v: 42", json{{"v", 42}}},
      {"v: -7", json{{"v", -7}}},
      {"v: +7", json{{"v", 7}}},
      {"v: 0x1F", json{{"v", 31}}},
      {"v: 0o17", json{{"v", 15}}},
      {"v: 9223372036854775807", json{{"v", 9223372036854775807LL}}},
      {"v: 2.5", json{{"v", 2.5}}},
      {"v: 1e3", json{{"v", 1000.0}}},
      {"v: .5", json{{"v", 0.5}}},
      {"v: true", json{{"v", true}}},
      {"v: False", json{{"v", false}}},
      {"v: ~", json{{"v", nullptr}}},
      {"v: null", json{{"v", nullptr}}},
      {"v:", json{{"v", nullptr}}},
      // Not core-schema values: strings (YAML 1.1 booleans, version-like text, leading +.)
      {"v: yes", json{{"v", "yes"}}},
      {"v: on", json{{"v", "on"}}},
      {"v: 1.2.3", json{{"v", "1.2.3"}}},
      {"v: 0x", json{{"v", "0x"}}},
      {"v: 1e", json{{"v", "1e"}}},
      {"v: 12abc", json{{"v", "12abc"}}},
      {"v: 99999999999999999999", json{{"v", "99999999999999999999"}}},
      // Quoted and block scalars are strings whatever they look like.
      {"v: \"42\"", json{{"v", "42"}}},
      {"v: 'true'", json{{"v", "true"}}},
      {"v: !!str 7", json{{"v", "7"}}},
      {"v: |\n  10\n", json{{"v", "10\n"}}},
  }));
  CAPTURE(row.yaml);
  auto got = kc::yamlToJson(row.yaml);
  REQUIRE(got.ok());
  CHECK(*got == row.expected);
}

TEST_CASE("yaml: infinities and NaN", "[base][yaml]") {
  auto got = kc::yamlToJson("a: .inf\nb: -.Inf\nc: .nan\n");
  REQUIRE(got.ok());
  CHECK(std::isinf((*got)["a"].get<double>()));
  CHECK((*got)["b"].get<double>() < 0);
  CHECK(std::isnan((*got)["c"].get<double>()));
}

TEST_CASE("yaml: nested maps and sequences keep their structure and key order", "[base][yaml]") {
  auto got = kc::yamlToJson(R"(
apiVersion: v1
kind: List
items:
  - name: a
    ports: [80, 443]
  - {name: b, enabled: true}
)");
  REQUIRE(got.ok());
  CHECK(*got == json::parse(R"({"apiVersion":"v1","kind":"List","items":[
      {"name":"a","ports":[80,443]},{"name":"b","enabled":true}]})"));
}

TEST_CASE("yaml: a stream's documents, empty ones skipped", "[base][yaml]") {
  auto docs = kc::yamlDocumentsToJson("---\na: 1\n---\n---\nb: 2\n...\n");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 2);
  CHECK((*docs)[0] == json{{"a", 1}});
  CHECK((*docs)[1] == json{{"b", 2}});
  auto one = kc::yamlToJson("a: 1\n---\nb: 2\n");
  REQUIRE_FALSE(one.ok());
  CHECK(one.error().code == "invalid");
  CHECK(one.error().message.find("found 2") != std::string::npos);
  CHECK_FALSE(kc::yamlToJson("").ok());
}

TEST_CASE("yaml: bad input is an 'invalid' error that says where", "[base][yaml]") {
  auto bad = kc::yamlToJson("a: [1, 2\nb: 3\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  CHECK(bad.error().message.find("line ") != std::string::npos);

  auto complexKey = kc::yamlToJson("? [a, b]\n: 1\n");
  REQUIRE_FALSE(complexKey.ok());
  CHECK(complexKey.error().message.find("map key is not a scalar") != std::string::npos);

  std::string deep = "v: ";
  for (int i = 0; i < 100; ++i) {
    deep += "[";
  }
  for (int i = 0; i < 100; ++i) {
    deep += "]";
  }
  auto tooDeep = kc::yamlToJson(deep);
  REQUIRE_FALSE(tooDeep.ok());
  CHECK(tooDeep.error().message.find("deeper than 64") != std::string::npos);
}

TEST_CASE("yaml: the GPUPool CRD in the chart reads as a CustomResourceDefinition",
          "[base][yaml]") {
  std::ifstream in(KC_SOURCE_DIR "/charts/kubecomp/crds/gpupools.kubecomp.io.yaml");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  auto crd = kc::yamlToJson(text.str());
  REQUIRE(crd.ok());
  CHECK((*crd)["kind"] == "CustomResourceDefinition");
  CHECK((*crd)["spec"]["scope"] == "Cluster");
  CHECK((*crd)["spec"]["versions"][0]["subresources"]["status"] == json::object());
}
