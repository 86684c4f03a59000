#include "services/bridge-pod/s3_client.hpp"

#include "libcore/net/sigv4.hpp"
#include "services/bridge-pod/credentials.hpp"

namespace kc::bridge::pod {

namespace {

// The <Code> of an S3 XML error body, if any.
std::string s3ErrorCode(const std::string& body) {
  const auto b = body.find("<Code>");
  const auto e = body.find("</Code>");
  if (b == std::string::npos || e == std::string::npos || e < b) {
    return {};
  }
  return body.substr(b + 6, e - b - 6);
}

Error s3Error(const std::string& what, const kc::net::Response& r) {
  const std::string code = s3ErrorCode(r.body);
  const std::string text =
      what + ": HTTP " + std::to_string(r.status) + (code.empty() ? "" : " " + code);
  if (r.status == 404) {
    return makeError(errc::kNotFound, text);
  }
  if (r.status == 401 || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch") {
    return makeError(errc::kUnauthorized, text);
  }
  if (r.status == 403) {
    return makeError(errc::kForbidden, text);
  }
  if (r.status == 429 || code == "SlowDown") {
    return makeError(errc::kThrottled, text);
  }
  if (r.status >= 500) {
    return makeError(errc::kServerError, text);
  }
  return makeError(errc::kInvalid, text);
}

}  // namespace

Result<std::pair<std::string, std::string>> splitBucketObject(const std::string& ref) {
  const auto colon = ref.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == ref.size()) {
    return makeError(errc::kInvalid, "'" + ref + "' is not bucket:object");
  }
  return std::pair{ref.substr(0, colon), ref.substr(colon + 1)};
}

Result<std::unique_ptr<S3Client>> S3Client::create(S3Options options) {
  if (options.endpoint.empty() || options.endpoint.find("://") != std::string::npos ||
      options.endpoint.find('/') != std::string::npos) {
    return makeError(
        errc::kInvalid,
        "S3 endpoint must be host[:port] without scheme or path, got '" + options.endpoint + "'");
  }
  kc::net::ClientOptions co;
  co.baseUrl = std::string(options.secure ? "https://" : "http://") + options.endpoint;
  co.tls.caFile = options.caFile;
  co.requestTimeout = options.timeout;
  co.maxRedirects = 0;
  auto http = kc::net::HttpClient::create(std::move(co));
  if (!http.ok()) {
    return http.error();
  }
  return std::unique_ptr<S3Client>(new S3Client(std::move(options), std::move(http).value()));
}

S3Client::S3Client(S3Options options, std::unique_ptr<kc::net::HttpClient> http)
    : options_(std::move(options)), http_(std::move(http)) {}

Result<kc::net::Response> S3Client::send(const std::string& method, const std::string& bucket,
                                         const std::string& key, const std::string& body) {
  auto ak = readSecretKey(options_.credentialsDir, "accesskey");
  if (!ak.ok()) {
    return ak.error();
  }
  auto sk = readSecretKey(options_.credentialsDir, "secretkey");
  if (!sk.ok()) {
    return sk.error();
  }
  kc::sigv4::Credentials creds{*ak, *sk, {}};
  if (secretKeyExists(options_.credentialsDir, "sessiontoken")) {
    auto st = readSecretKey(options_.credentialsDir, "sessiontoken");
    if (!st.ok()) {
      return st.error();
    }
    creds.sessionToken = *st;
  }
  kc::sigv4::Request req;
  req.method = method;
  req.path = "/" + bucket + "/" + key;
  req.headers = {{"host", options_.endpoint}};
  req.payload = body;
  const auto now =
      std::chrono::time_point_cast<std::chrono::seconds>(kc::clockOr(options_.clock).wallNow());
  auto signedReq = kc::sigv4::sign(req, creds, options_.region, "s3", kc::sigv4::amzDate(now));
  if (!signedReq.ok()) {
    return signedReq.error();
  }
  kc::net::Headers headers{{"Host", options_.endpoint}};
  for (const auto& [n, v] : signedReq->headersToAdd) {
    headers.push_back({n, v});
  }
  if (method == "PUT") {
    headers.push_back({"Content-Type", "application/octet-stream"});
  }
  // The canonical URI is also the path to send (PathStyle::kS3).
  return http_->request(method, signedReq->canonicalUri, body, std::move(headers));
}

Result<std::string> S3Client::getObject(const std::string& bucket, const std::string& key) {
  auto r = send("GET", bucket, key, {});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return s3Error("GET s3://" + bucket + "/" + key, *r);
  }
  return std::move(r->body);
}

Result<std::uint64_t> S3Client::objectSize(const std::string& bucket, const std::string& key) {
  auto r = send("HEAD", bucket, key, {});
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return s3Error("HEAD s3://" + bucket + "/" + key, *r);
  }
  const std::string length = r->header("Content-Length").value_or("");
  if (length.empty() || length.size() > 19 ||
      length.find_first_not_of("0123456789") != std::string::npos) {
    return makeError(errc::kProtocol,
                     "HEAD s3://" + bucket + "/" + key + ": no usable Content-Length");
  }
  return static_cast<std::uint64_t>(std::stoull(length));
}

Status S3Client::putObject(const std::string& bucket, const std::string& key,
                           const std::string& body) {
  auto r = send("PUT", bucket, key, body);
  if (!r.ok()) {
    return r.error();
  }
  if (r->status != 200) {
    return s3Error("PUT s3://" + bucket + "/" + key, *r);
  }
  return okStatus();
}

}  // namespace kc::bridge::pod
