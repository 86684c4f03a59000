#pragma once
// A small S3 client for the bridge pod: GET and PUT of one object, path-style
// (`/<bucket>/<key>`), signed with AWS Signature Version 4 (kc_sigv4). Buckets are never
// created: a missing bucket is an error naming it (the original's client created them).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "libcore/base/clock.hpp"
#include "libcore/base/result.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::bridge::pod {

struct S3Options {
  std::string endpoint;  // host[:port], no scheme
  bool secure = true;
  std::string region = "us-east-1";
  std::string credentialsDir;  // files accesskey, secretkey (and optional sessiontoken)
  std::string caFile;          // for https; empty: system store
  std::chrono::milliseconds timeout{60'000};
  kc::Clock* clock = nullptr;
};

class S3Client {
 public:
  static Result<std::unique_ptr<S3Client>> create(S3Options options);
  // Errors: not_found (no such bucket or key), unauthorized/forbidden, unavailable, ...
  Result<std::string> getObject(const std::string& bucket, const std::string& key);
  // The object's size (HEAD, its Content-Length), to bound a download before making it.
  Result<std::uint64_t> objectSize(const std::string& bucket, const std::string& key);
  Status putObject(const std::string& bucket, const std::string& key, const std::string& body);

 private:
  S3Client(S3Options options, std::unique_ptr<kc::net::HttpClient> http);
  Result<kc::net::Response> send(const std::string& method, const std::string& bucket,
                                 const std::string& key, const std::string& body);
  S3Options options_;
  std::unique_ptr<kc::net::HttpClient> http_;
};

// "bucket:object" -> {bucket, object}; invalid when malformed.
Result<std::pair<std::string, std::string>> splitBucketObject(const std::string& ref);

}  // namespace kc::bridge::pod
