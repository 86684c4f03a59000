// AWS Signature Version 4 against AWS's published vectors: the SigV4 test suite
// (AKIDEXAMPLE, 20150830T123600Z, us-east-1, service "service") and the four header-based
// examples of the S3 API reference, "Signature Calculations for the Authorization Header"
// (AKIAIOSFODNN7EXAMPLE, 20130524T000000Z, us-east-1, s3, examplebucket). The expected
// canonical requests, strings to sign and signatures are the published texts, not outputs of
// this code.

#include "libcore/net/sigv4.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "libcore/base/error_codes.hpp"

namespace {

using kc::sigv4::Credentials;
using kc::sigv4::Options;
using kc::sigv4::PathStyle;
using kc::sigv4::Request;

const Credentials kSuiteCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
const Credentials kS3Credentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 ""};
constexpr const char* kSuiteDate = "20150830T123600Z";
constexpr const char* kS3Date = "20130524T000000Z";
constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The test suite's services normalise paths and do not send x-amz-content-sha256.
const Options kSuiteOptions{PathStyle::kNormalized, false};

struct Vector {
  const char* name;
  Request request;
  Credentials credentials;
  const char* service;
  const char* date;
  Options options;
  const char* canonicalRequest;  // "" where only the signature is published for the case
  const char* stringToSign;      // ""  idem
  const char* signedHeaders;
  const char* signature;
};

Request get(std::string path, kc::sigv4::HeaderList headers = {}) {
  Request r;
  r.method = "GET";
  r.path = std::move(path);
  r.headers = {{"Host", "example.amazonaws.com"}};
  r.headers.insert(r.headers.end(), headers.begin(), headers.end());
  return r;
}

std::vector<Vector> vectors() {
  std::vector<Vector> v;
  v.push_back(
      {"get-vanilla", get("/"), kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
       "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
       "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
       "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
       "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"});
  {
    Request r = get("/");
    r.query = {{"Param2", "value2"}, {"Param1", "value1"}};
    v.push_back({"get-vanilla-query-order-key-case", r, kSuiteCredentials, "service", kSuiteDate,
                 kSuiteOptions,
                 "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
                 "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
                 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                 "", "host;x-amz-date",
                 "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"});
  }
  v.push_back({"get-header-value-trim",
               get("/", {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}}),
               kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
               "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\n"
               "x-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n"
               "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
               "", "host;my-header1;my-header2;x-amz-date",
               "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"});
  {
    Request r = get("/", {{"Content-Type", "application/x-www-form-urlencoded"}});
    r.method = "POST";
    r.payload = "Param1=value1";
    v.push_back(
        {"post-x-www-form-urlencoded", r, kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
         "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
         "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
         "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
         "", "content-type;host;x-amz-date",
         "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"});
  }
  {
    Request r = get("/", {{"My-Header1", "value1"}});
    r.method = "POST";
    v.push_back(
        {"post-header-key-sort", r, kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
         "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:20150830T123600Z\n\n"
         "host;my-header1;x-amz-date\n"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "", "host;my-header1;x-amz-date",
         "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"});
  }
  v.push_back(
      {"get-utf8", get("/\xE1\x88\xB4"), kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
       "GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
       "host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
       "", "host;x-amz-date", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"});
  v.push_back(
      {"get-space", get("/example space/"), kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
       "GET\n/example%20space/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
       "host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
       "", "host;x-amz-date", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"});
  // normalize-path cases: all name the same resource as get-vanilla, so the same signature.
  for (const char* path : {"/./", "/example/..", "/example1/example2/../..", "//"}) {
    v.push_back(
        {path, get(path), kSuiteCredentials, "service", kSuiteDate, kSuiteOptions,
         "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "", "host;x-amz-date",
         "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"});
  }
  // get-slash-dot-slash-unnormalized: a service that does not normalise (S3's path style)
  // signs "/./" as it is.
  v.push_back({"get-slash-dot-slash-unnormalized", get("/./"), kSuiteCredentials, "service",
               kSuiteDate, Options{PathStyle::kS3, false}, "", "", "host;x-amz-date",
               "68714168e6557f8f2de0ef956fc24dc2593a4bd2961f8df51898d8a134695145"});
  v.push_back({"get-vanilla-with-session-token", get("/"),
               Credentials{kSuiteCredentials.accessKeyId, kSuiteCredentials.secretAccessKey,
                           "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"},
               "service", kSuiteDate, kSuiteOptions, "", "", "host;x-amz-date;x-amz-security-token",
               "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"});

  // S3 API reference examples.
  auto s3 = [](const char* method, const char* path) {
    Request r;
    r.method = method;
    r.path = path;
    r.headers = {{"Host", "examplebucket.s3.amazonaws.com"}};
    return r;
  };
  {
    Request r = s3("GET", "/test.txt");
    r.headers.emplace_back("Range", "bytes=0-9");
    v.push_back(
        {"S3 GET Object", r, kS3Credentials, "s3", kS3Date, Options{},
         "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
         "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
         "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
         "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
         "host;range;x-amz-content-sha256;x-amz-date",
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"});
  }
  {
    Request r = s3("PUT", "/test$file.text");
    r.headers.emplace_back("Date", "Fri, 24 May 2013 00:00:00 GMT");
    r.headers.emplace_back("x-amz-storage-class", "REDUCED_REDUNDANCY");
    r.payload = "Welcome to Amazon S3.";
    v.push_back(
        {"S3 PUT Object", r, kS3Credentials, "s3", kS3Date, Options{},
         "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\n"
         "host:examplebucket.s3.amazonaws.com\n"
         "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
         "x-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
         "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
         "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
         "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
         "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
         "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
         "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"});
  }
  {
    Request r = s3("GET", "/");
    r.query = {{"lifecycle", ""}};
    v.push_back(
        {"S3 GET Bucket Lifecycle", r, kS3Credentials, "s3", kS3Date, Options{},
         "GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n"
         "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
         "x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
         "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
         "host;x-amz-content-sha256;x-amz-date",
         "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"});
  }
  {
    Request r = s3("GET", "/");
    r.query = {{"prefix", "J"}, {"max-keys", "2"}};  // out of order: the signer sorts
    v.push_back(
        {"S3 GET Bucket (List Objects)", r, kS3Credentials, "s3", kS3Date, Options{},
         "GET\n/\nmax-keys=2&prefix=J\nhost:examplebucket.s3.amazonaws.com\n"
         "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
         "x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
         "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7",
         "host;x-amz-content-sha256;x-amz-date",
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"});
  }
  return v;
}

}  // namespace

TEST_CASE("sigv4: AWS published test suite and S3 examples", "[bridge][sigv4]") {
  for (const Vector& vector : vectors()) {
    DYNAMIC_SECTION(vector.name) {
      auto signedRequest = kc::sigv4::sign(vector.request, vector.credentials, "us-east-1",
                                           vector.service, vector.date, vector.options);
      REQUIRE(signedRequest.ok());
      if (*vector.canonicalRequest != '\0') {
        CHECK(signedRequest->canonicalRequest == vector.canonicalRequest);
      }
      if (*vector.stringToSign != '\0') {
        CHECK(signedRequest->stringToSign == vector.stringToSign);
      }
      CHECK(signedRequest->signature == vector.signature);
      const std::string accessKey = vector.credentials.accessKeyId;
      const std::string day = std::string(vector.date).substr(0, 8);
      CHECK(signedRequest->authorization ==
            "AWS4-HMAC-SHA256 Credential=" + accessKey + "/" + day + "/us-east-1/" +
                vector.service + "/aws4_request, SignedHeaders=" + vector.signedHeaders +
                ", Signature=" + vector.signature);
    }
  }
}

TEST_CASE("sigv4: headers to add carry the date, payload hash, token and Authorization",
          "[bridge][sigv4]") {
  Request r;
  r.method = "PUT";
  r.path = "/bucket/job-1/out put.txt";
  r.headers = {{"Host", "127.0.0.1:9000"}};
  r.payloadHash = kc::sigv4::kUnsignedPayload;
  const Credentials withToken{"AKID", "secret", "TOKEN"};
  auto s = kc::sigv4::sign(r, withToken, "us-east-1", "s3", "20240229T235959Z");
  REQUIRE(s.ok());
  CHECK(s->canonicalUri == "/bucket/job-1/out%20put.txt");
  CHECK(s->canonicalRequest.ends_with("\nUNSIGNED-PAYLOAD"));
  REQUIRE(s->headersToAdd.size() == 4);
  CHECK(s->headersToAdd[0] ==
        std::pair<std::string, std::string>{"x-amz-date", "20240229T235959Z"});
  CHECK(s->headersToAdd[1] ==
        std::pair<std::string, std::string>{"x-amz-content-sha256", "UNSIGNED-PAYLOAD"});
  CHECK(s->headersToAdd[2] == std::pair<std::string, std::string>{"x-amz-security-token", "TOKEN"});
  CHECK(s->headersToAdd[3].first == "Authorization");
  CHECK(s->authorization.find(
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") !=
        std::string::npos);

  // S3 does not normalise: "a/../b" and "//" stay, a '%' in a key is encoded once.
  r.path = "/bucket/a/../b//100%";
  auto raw = kc::sigv4::sign(r, withToken, "us-east-1", "s3", "20240229T235959Z");
  REQUIRE(raw.ok());
  CHECK(raw->canonicalUri == "/bucket/a/../b//100%25");
  // Other services normalise and encode the path as sent once more.
  r.path = "/a/../b%20c//";
  auto normalized = kc::sigv4::sign(r, withToken, "us-east-1", "service", "20240229T235959Z",
                                    Options{PathStyle::kNormalized, false});
  REQUIRE(normalized.ok());
  CHECK(normalized->canonicalUri == "/b%2520c/");
}

TEST_CASE("sigv4: a header the signer sets must not be given a different value",
          "[bridge][sigv4]") {
  Request r = get("/", {{"X-Amz-Date", "20150830T123600Z"}});
  auto same =
      kc::sigv4::sign(r, kSuiteCredentials, "us-east-1", "service", kSuiteDate, kSuiteOptions);
  REQUIRE(same.ok());
  CHECK(same->signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  r.headers.back().second = "20150830T123601Z";
  auto other =
      kc::sigv4::sign(r, kSuiteCredentials, "us-east-1", "service", kSuiteDate, kSuiteOptions);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == kc::errc::kInvalid);
}

TEST_CASE("sigv4: bad input is refused with invalid and nothing signed", "[bridge][sigv4]") {
  struct Case {
    const char* what;
    Request request;
    Credentials credentials;
    const char* region;
    const char* service;
    const char* date;
  };
  Request badName = get("/", {{"My Header", "v"}});
  Request badName2 = get("/", {{"my-header:", "v"}});
  Request emptyName = get("/", {{"", "v"}});
  Request crlf = get("/", {{"My-Header", "a\r\nX-Evil: 1"}});
  Request noHost = get("/");
  noHost.headers.clear();
  Request badMethod = get("/");
  badMethod.method = "GE T";
  Request relative = get("example");
  Request badHash = get("/");
  badHash.payloadHash = "ABC";
  const Case cases[] = {
      {"header name with a space", badName, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"header name with a colon", badName2, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"empty header name", emptyName, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"CR LF in a header value", crlf, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"no host header", noHost, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"method not a token", badMethod, kSuiteCredentials, "us-east-1", "service", kSuiteDate},
      {"path without leading slash", relative, kSuiteCredentials, "us-east-1", "service",
       kSuiteDate},
      {"payload hash not hex sha256", badHash, kSuiteCredentials, "us-east-1", "service",
       kSuiteDate},
      {"empty region", get("/"), kSuiteCredentials, "", "service", kSuiteDate},
      {"empty service", get("/"), kSuiteCredentials, "us-east-1", "", kSuiteDate},
      {"region with a slash", get("/"), kSuiteCredentials, "us/east-1", "service", kSuiteDate},
      {"empty access key", get("/"), Credentials{"", "s", ""}, "us-east-1", "service", kSuiteDate},
      {"empty secret", get("/"), Credentials{"AKID", "", ""}, "us-east-1", "service", kSuiteDate},
      {"time with an offset, not UTC", get("/"), kSuiteCredentials, "us-east-1", "service",
       "20150830T123600+0200"},
      {"time without Z", get("/"), kSuiteCredentials, "us-east-1", "service", "20150830T123600"},
      {"RFC 3339 instead of x-amz-date", get("/"), kSuiteCredentials, "us-east-1", "service",
       "2015-08-30T12:36:00Z"},
      {"month 13", get("/"), kSuiteCredentials, "us-east-1", "service", "20151330T123600Z"},
      {"30 February", get("/"), kSuiteCredentials, "us-east-1", "service", "20150230T123600Z"},
      {"hour 24", get("/"), kSuiteCredentials, "us-east-1", "service", "20150830T243600Z"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    auto result =
        kc::sigv4::sign(c.request, c.credentials, c.region, c.service, c.date, kSuiteOptions);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == kc::errc::kInvalid);
  }
}

TEST_CASE("sigv4: amzDate formats a UTC time point", "[bridge][sigv4]") {
  using namespace std::chrono;
  CHECK(kc::sigv4::amzDate(sys_days{year{2015} / 8 / 30} + hours{12} + minutes{36}) ==
        "20150830T123600Z");
  CHECK(kc::sigv4::amzDate(sys_seconds{seconds{0}}) == "19700101T000000Z");
  CHECK(kc::sigv4::amzDate(sys_days{year{2024} / 2 / 29} + hours{23} + minutes{59} + seconds{59}) ==
        "20240229T235959Z");
  CHECK(kc::sigv4::sha256Hex("") == kEmptySha256);
}
