// GPUPool spec.chassis[].tls: parsing, and the TLS options a chassis' driver gets from the CA
// bundle's Secret or ConfigMap.

#include "services/reconfig-mgr/pool_spec.hpp"

#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "libcore/base/base64.hpp"

using nlohmann::json;

namespace {

const std::string kPem =
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n";

json poolWith(json chassis) {
  return {{"metadata", {{"name", "pool-a"}}},
          {"spec",
           {{"chassis", json::array({std::move(chassis)})},
            {"nodes", json::array({{{"name", "n1"}, {"hostPort", "1"}}})}}}};
}

json bmc(json tls) {
  json c{{"name", "bmc-1"},
         {"driver", "redfish"},
         {"endpoint", "https://bmc-1.example"},
         {"auth", "none"}};
  if (!tls.is_null()) {
    c["tls"] = std::move(tls);
  }
  return c;
}

}  // namespace

TEST_CASE("pool spec: chassis tls names a CA bundle or turns verification off", "[reconfig]") {
  auto none = kc::reconfig::parsePoolSpec(poolWith(bmc(nullptr)), "kubecomp");
  REQUIRE(none);
  CHECK_FALSE(none->chassis[0].caBundle);
  CHECK_FALSE(none->chassis[0].insecureSkipVerify);

  auto cm = kc::reconfig::parsePoolSpec(poolWith(bmc({{"caConfigMap", {{"name", "bmc-ca"}}}})),
                                        "kubecomp");
  REQUIRE(cm);
  REQUIRE(cm->chassis[0].caBundle);
  CHECK(*cm->chassis[0].caBundle ==
        kc::reconfig::CaBundleRef{"ConfigMap", "kubecomp", "bmc-ca", "ca.crt"});

  auto secret = kc::reconfig::parsePoolSpec(
      poolWith(
          bmc({{"caSecret", {{"name", "bmc-ca"}, {"namespace", "ops"}, {"key", "root.pem"}}}})),
      "kubecomp");
  REQUIRE(secret);
  CHECK(*secret->chassis[0].caBundle ==
        kc::reconfig::CaBundleRef{"Secret", "ops", "bmc-ca", "root.pem"});
  // A different CA is a different fabric: the driver is rebuilt.
  CHECK_FALSE(secret->sameFabric(*cm));

  auto insecure =
      kc::reconfig::parsePoolSpec(poolWith(bmc({{"insecureSkipVerify", true}})), "kubecomp");
  REQUIRE(insecure);
  CHECK(insecure->chassis[0].insecureSkipVerify);

  const auto [what, tls, endpoint,
              needle] = GENERATE(table<std::string, json, std::string, std::string>({
      {"both sources", json{{"caSecret", {{"name", "a"}}}, {"caConfigMap", {{"name", "b"}}}},
       "https://x", "not both"},
      {"CA and insecure", json{{"caSecret", {{"name", "a"}}}, {"insecureSkipVerify", true}},
       "https://x", "exclude each other"},
      {"http endpoint", json{{"insecureSkipVerify", true}}, "http://x", "https:// endpoint only"},
      {"unknown key", json{{"caFile", "/etc/ca"}}, "https://x", "unknown key 'caFile'"},
      {"no name", json{{"caConfigMap", {{"key", "ca.crt"}}}}, "https://x", "name is required"},
      {"empty key", json{{"caConfigMap", {{"name", "a"}, {"key", ""}}}}, "https://x",
       "must not be empty"},
      {"not a boolean", json{{"insecureSkipVerify", "yes"}}, "https://x", "not a boolean"},
      {"not an object", json("ca"), "https://x", "tls is not an object"},
  }));
  CAPTURE(what);
  json c = bmc(tls);
  c["endpoint"] = endpoint;
  auto r = kc::reconfig::parsePoolSpec(poolWith(c), "kubecomp");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kc::errc::kInvalid);
  CHECK_THAT(r.error().message, Catch::Contains("chassis[0]") && Catch::Contains(needle));
}

TEST_CASE("pool spec: a chassis' CA bundle is read from its Secret or ConfigMap", "[reconfig]") {
  // The objects the API holds, by "<resource>/<namespace>/<name>".
  std::map<std::string, json> objects = {
      {"configmaps/kubecomp/bmc-ca", {{"data", {{"ca.crt", kPem}}}}},
      {"secrets/ops/bmc-ca", {{"data", {{"root.pem", kc::base64Encode(kPem)}}}}},
      {"configmaps/kubecomp/not-pem", {{"data", {{"ca.crt", "hello"}}}}},
      {"secrets/kubecomp/not-base64", {{"data", {{"ca.crt", "%%%"}}}}},
  };
  std::vector<std::string> reads;
  const kc::reconfig::CoreObjectReader read = [&](const std::string& resource,
                                                  const std::string& ns,
                                                  const std::string& name) -> kc::Result<json> {
    reads.push_back(resource + "/" + ns + "/" + name);
    const auto it = objects.find(reads.back());
    if (it == objects.end()) {
      return kc::makeError(kc::errc::kNotFound, reads.back() + " not found");
    }
    return it->second;
  };
  kc::reconfig::ChassisSpec c;
  c.name = "bmc-1";
  c.endpoint = "https://bmc-1.example";

  auto plain = kc::reconfig::chassisTls(c, read);
  REQUIRE(plain);
  CHECK(plain->caPem.empty());  // the system trust store
  CHECK_FALSE(plain->insecureSkipVerify);
  CHECK(reads.empty());

  c.caBundle = kc::reconfig::CaBundleRef{"ConfigMap", "kubecomp", "bmc-ca", "ca.crt"};
  auto fromConfigMap = kc::reconfig::chassisTls(c, read);
  REQUIRE(fromConfigMap);
  CHECK(fromConfigMap->caPem == kPem);

  c.caBundle = kc::reconfig::CaBundleRef{"Secret", "ops", "bmc-ca", "root.pem"};
  auto fromSecret = kc::reconfig::chassisTls(c, read);
  REQUIRE(fromSecret);
  CHECK(fromSecret->caPem == kPem);  // base64 decoded
  CHECK(reads == std::vector<std::string>{"configmaps/kubecomp/bmc-ca", "secrets/ops/bmc-ca"});

  const auto [ref, code,
              needle] = GENERATE(table<kc::reconfig::CaBundleRef, std::string, std::string>({
      {{"ConfigMap", "kubecomp", "missing", "ca.crt"}, kc::errc::kUnavailable, "not found"},
      {{"ConfigMap", "kubecomp", "bmc-ca", "other.crt"},
       kc::errc::kInvalid,
       "has no key other.crt"},
      {{"ConfigMap", "kubecomp", "not-pem", "ca.crt"}, kc::errc::kInvalid, "no PEM certificate"},
      {{"Secret", "kubecomp", "not-base64", "ca.crt"}, kc::errc::kInvalid, "not base64"},
  }));
  CAPTURE(ref.name, ref.key);
  c.caBundle = ref;
  auto bad = kc::reconfig::chassisTls(c, read);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == code);
  CHECK_THAT(bad.error().message,
             Catch::Contains("chassis bmc-1") &&
                 Catch::Contains(ref.kind + " " + ref.namespaceName + "/" + ref.name) &&
                 Catch::Contains(needle));
}
