#pragma once
// The IBM Quantum backend: the Qiskit Runtime REST API (`<resourceURL>/jobs...`, e.g.
// resourceURL https://quantum.cloud.ibm.com/api/v1) with an IBM Cloud IAM bearer token.
//  - Secret keys: `username` = the service CRN (sent as Service-CRN), `password` = the API key,
//    exchanged at the IAM token endpoint (POST, form grant_type=urn:ibm:params:oauth:grant-type:
//    apikey&apikey=...) for a token that lives about an hour; it is exchanged again when less
//    than a fifth of its life is left, and at once after a 401. Every call also carries
//    IBM-API-Version;
//  - submit: POST /jobs {"program_id": jobscript (sampler, estimator, ...), "backend",
//    "params": jobparameters, "tags": ["bridgejob-uid:<uid>"], optional log_level, session_id,
//    private from jobproperties}; adoption: GET /jobs?tags=bridgejob-uid:<uid>;
//  - status: GET /jobs/<id>: state.status (or the older top-level status) Queued -> SUBMITTED,
//    Running -> RUNNING, Completed -> DONE, Cancelled -> KILLED, "Cancelled - Ran too long" or
//    Cancelled with reason_code 1305 -> FAILED, Failed -> FAILED; 404 -> gone; at the end the
//    times come from GET /jobs/<id>/metrics (timestamps created, running, finished);
//  - cancel: POST /jobs/<id>/cancel (204); outputs: `results`, `logs`, `metrics`.

#include <memory>
#include <mutex>
#include <string>

#include "libcore/base/clock.hpp"
#include "libcore/net/http_client.hpp"
#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

inline constexpr const char* kDefaultIamUrl = "https://iam.cloud.ibm.com/identity/token";
inline constexpr const char* kQuantumApiVersion = "2025-05-01";

struct QuantumOptions {
  std::string resourceUrl;
  std::string iamUrl = kDefaultIamUrl;
  std::string credentialsDir;
  std::string caFile;
  std::chrono::milliseconds timeout{30'000};
  kc::Clock* clock = nullptr;
};

std::string quantumTag(const std::string& uid);
Result<nlohmann::json> buildQuantumSubmitBody(const JobContext& ctx);
// GET /jobs/<id> reply -> Query (404 gone).
Result<Query> parseQuantumJob(unsigned httpStatus, const std::string& body);

// IAM access tokens for an API key (thread-safe).
class IamTokenSource {
 public:
  IamTokenSource(std::string iamUrl, std::string credentialsDir, std::string caFile,
                 kc::Clock* clock);
  Result<std::string> token();
  void invalidate();
  int exchanges() const;

 private:
  std::string url_;
  std::string dir_;
  std::string caFile_;
  kc::Clock& clock_;
  mutable std::mutex mu_;
  std::string token_;
  std::chrono::system_clock::time_point expires_{};
  std::chrono::seconds lifetime_{0};
  int exchanges_ = 0;
};

class QuantumBackend final : public Backend {
 public:
  static Result<std::unique_ptr<QuantumBackend>> create(QuantumOptions options);
  const char* name() const override { return "quantum"; }
  // Staging files has no meaning here: Qiskit Runtime jobs take parameters, not files.
  std::uint64_t stagingLimit() const override { return 0; }
  Status prepare() override;
  Result<std::optional<std::string>> findTagged(const JobContext& ctx) override;
  Result<std::string> submit(const JobContext& ctx) override;
  Result<Query> query(const std::string& id) override;
  Result<bool> cancel(const std::string& id) override;
  Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id,
                                  const std::string& file) override;

 private:
  QuantumBackend(QuantumOptions options, std::unique_ptr<kc::net::HttpClient> http);
  // One call; a 401 invalidates the token and the call is made once more with a fresh one.
  Result<kc::net::Response> send(const std::string& method, const std::string& target,
                                 std::string body = {});
  QuantumOptions options_;
  std::unique_ptr<kc::net::HttpClient> http_;
  IamTokenSource tokens_;
};

}  // namespace kc::bridge::pod
