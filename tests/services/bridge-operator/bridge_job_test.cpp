// BridgeJob spec validation (what the CRD schema says, plus what a schema cannot say) and the
// ConfigMap parameter round trip.

#include "libcore/api/bridge_job.hpp"

#include <catch2/catch.hpp>

#include "tests/services/bridge-operator/hook_request_builder.hpp"

using kc::bridge::parameterData;
using kc::bridge::parametersFromData;
using kc::bridge::parseSpec;
using kc::bridge::testing::validSpec;
using nlohmann::json;

TEST_CASE("a valid spec parses with the CRD defaults", "[bridge]") {
  json spec = validSpec();
  spec.erase("s3storage");
  spec.erase("s3upload");
  spec.erase("jobproperties");
  spec["jobdata"].erase("scriptlocation");
  auto p = parseSpec(spec);
  REQUIRE(p.ok());
  CHECK(p->imagePullPolicy == "IfNotPresent");
  CHECK(p->updateIntervalSec == 20);
  CHECK(p->scriptLocation == "remote");
  CHECK(p->scriptExtraLocation == "inline");
  CHECK(p->s3Secure);
  CHECK_FALSE(p->usesS3());
}

TEST_CASE("invalid specs are rejected naming the field", "[bridge]") {
  struct Row {
    const char* what;
    std::function<void(json&)> change;
    std::string message;
  };
  auto row = GENERATE(values<Row>({
      {"missing resourceURL", [](json& s) { s.erase("resourceURL"); },
       "spec.resourceURL is required"},
      {"missing resourcesecret", [](json& s) { s.erase("resourcesecret"); }, "spec.resourcesecret"},
      {"missing image", [](json& s) { s.erase("image"); }, "spec.image is required"},
      {"missing jobdata", [](json& s) { s.erase("jobdata"); }, "spec.jobdata is required"},
      {"missing jobscript", [](json& s) { s["jobdata"].erase("jobscript"); },
       "spec.jobdata.jobscript is required"},
      {"empty jobscript", [](json& s) { s["jobdata"]["jobscript"] = ""; }, "must not be empty"},
      {"bad scriptlocation enum", [](json& s) { s["jobdata"]["scriptlocation"] = "ftp"; },
       "scriptlocation must be one of remote, inline, s3"},
      {"bad scriptextralocation enum",
       [](json& s) { s["jobdata"]["scriptextralocation"] = "remote"; },
       "scriptextralocation must be one of inline, s3"},
      {"bad imagepullpolicy enum", [](json& s) { s["imagepullpolicy"] = "always"; },
       "imagepullpolicy must be one of"},
      {"updateinterval 0", [](json& s) { s["updateinterval"] = 0; }, "between 1 and 86400"},
      {"updateinterval huge", [](json& s) { s["updateinterval"] = 18446744073709551615ull; },
       "between 1 and 86400"},
      {"updateinterval as a string", [](json& s) { s["updateinterval"] = "20"; },
       "must be an integer"},
      {"kill as a string", [](json& s) { s["kill"] = "true"; }, "spec.kill must be a boolean"},
      {"spec not an object", [](json& s) { s = json::array(); }, "spec is missing"},
      {"resourceURL without scheme", [](json& s) { s["resourceURL"] = "slurm:6820"; },
       "http:// or https://"},
      {"secret name not DNS-1123", [](json& s) { s["resourcesecret"] = "Slurm_JWT"; }, "DNS-1123"},
      {"jobproperties not JSON", [](json& s) { s["jobproperties"] = "{\"name\": "; },
       "jobproperties must be a JSON object"},
      {"jobproperties a JSON array", [](json& s) { s["jobproperties"] = "[1]"; },
       "jobproperties must be a JSON object"},
      {"inline jobparameters not JSON", [](json& s) { s["jobdata"]["jobparameters"] = "a=b"; },
       "jobparameters must be a JSON object"},
      {"s3 script not bucket:object",
       [](json& s) {
         s["jobdata"]["scriptlocation"] = "s3";
         s["jobdata"]["jobscript"] = "/home/x.sh";
       },
       "bucket:object"},
      {"additionaldata item malformed",
       [](json& s) { s["jobdata"]["additionaldata"] = "in:a.txt,oops"; }, "bucket:object"},
      {"additionaldata names collide",
       [](json& s) { s["jobdata"]["additionaldata"] = "inputs:a/x.txt,other:b/x.txt"; },
       "would both be staged as \"x.txt\""},
      {"additionaldata key without a file name",
       [](json& s) { s["jobdata"]["additionaldata"] = "inputs:dir/"; }, "has no file name"},
      {"additionaldata key naming ..",
       [](json& s) { s["jobdata"]["additionaldata"] = "inputs:a/.."; }, "is not a file name"},
      {"additionaldata name with a control character",
       [](json& s) {
         s["jobdata"]["additionaldata"] =
             "inputs:a\x01"
             "b";
       },
       "control character"},
      {"S3 upload without s3secret (the original's check)",
       [](json& s) { s["s3storage"].erase("s3secret"); }, "s3secret is not set"},
      {"S3 endpoint with a scheme", [](json& s) { s["s3storage"]["endpoint"] = "https://s3:9000"; },
       "host[:port]"},
      {"s3upload without bucket", [](json& s) { s["s3upload"].erase("bucket"); },
       "spec.s3upload.bucket is required"},
      {"upload file escaping", [](json& s) { s["s3upload"]["files"] = "ok.txt,../etc/passwd"; },
       "relative file name"},
      {"s3storage not an object", [](json& s) { s["s3storage"] = "s3"; }, "must be an object"},
      {"jobscript too long", [](json& s) { s["jobdata"]["jobscript"] = std::string(262145, 'x'); },
       "longer than 262144"},
  }));
  CAPTURE(row.what);
  json spec = validSpec();
  row.change(spec);
  auto p = parseSpec(spec);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == "invalid");
  CHECK_THAT(p.error().message, Catch::Contains(row.message));
}

TEST_CASE("parameters round-trip through the ConfigMap", "[bridge]") {
  json spec = validSpec();
  spec["updateinterval"] = 7;
  spec["s3storage"]["secure"] = false;
  spec["jobdata"]["scriptextralocation"] = "s3";
  spec["jobdata"]["scriptmetadata"] = "inputs:meta.json";
  spec["jobdata"]["additionaldata"] = "inputs:a.bin,inputs:dir/b.bin";
  auto p = parseSpec(spec);
  REQUIRE(p.ok());
  auto back = parametersFromData(parameterData(*p));
  REQUIRE(back.ok());
  CHECK(*back == *p);

  auto data = parameterData(*p);
  data["updateInterval"] = "0x14";
  CHECK_FALSE(parametersFromData(data).ok());
  data = parameterData(*p);
  data.erase("image");
  CHECK_THAT(parametersFromData(data).error().message, Catch::Contains("image"));
}
