#pragma once
// The LSF backend: IBM Spectrum LSF Application Center web services (the `ws/` API the
// original bridge used; resourceURL like http://host:8080/platform/).
//  - logon: POST ws/logon, XML <User><name>..</name> <pass>..</pass> </User> (escaped), JSON
//    reply {"token"}; every call sends Cookie platform_token=<token with '"' as #quote#>. The
//    expiry embedded in the token (the first RFC 3339 time between its quotes) is honoured: a
//    new logon with less than a minute left, or every 30 minutes when the token has none, and
//    once more after a 401/403;
//  - logout: GET webservice/pacclient/logout/ with the token's cookie (Content-Type
//    text/plain, no body; pacclient's call; Application Center answers 200 "ok"), which
//    releases the token as IBM's docs ask of every client: the old token after a renewal
//    before its expiry, the current one in release() when the pod ends. A failed logout is
//    logged and changes nothing else;
//  - submit: POST ws/jobs/submit, multipart/mixed: AppName "generic", a nested `data` part of
//    <AppParam> items (JOB_NAME bridge-<uid> - the tag for adoption -, COMMANDTORUN, QUEUE,
//    RUNLIMITHOUR, RUNLIMITMINUTE, OUTPUT_FILE, ERROR_FILE, EXTRA_PARAMS "-nnodes N"), and for
//    inline/S3 scripts the script as a file part run as `sh bridge-script.sh`; each
//    additionaldata file as one more file parameter (<type>file</type>, value "<name>,upload")
//    and file part (Content-ID <name>), landing in the job's working directory; reply {"id"};
//  - adoption: GET ws/jobs?name=bridge-<uid>; status: GET ws/jobs/<id>, and when LSF no longer
//    knows the job (@total 0) GET ws/jobhistory?ids=<id> (gone only when that does not know it
//    either; lsfHistoryJob). Replies are XML
//    converted to JSON: {"@total": "n", "job": {...}} with one job, an array with several;
//    jobStatus PEND/PSUSP -> SUBMITTED, RUN/USUSP/SSUSP/UNKWN -> RUNNING, DONE -> DONE,
//    EXIT/ZOMBI -> FAILED (KILLED when the runner had cancelled it); @total 0 -> gone. Times are
//    RFC 3339 or "YYYY-MM-DD HH:MM:SS" (UTC);
//  - kill: POST ws/userCmd <UserCmd><cmd>bkill <id></cmd></UserCmd>;
//  - outputs: GET webservice/pacclient/file/<id> with the file name as the request body; the
//    reply is the file, or multipart with the file in the part whose Content-ID is <name>.

#include <memory>
#include <mutex>
#include <string>

#include "libcore/base/clock.hpp"
#include "libcore/net/http_client.hpp"
#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod {

struct LsfOptions {
  std::string resourceUrl;
  std::string credentialsDir;
  std::string caFile;
  std::chrono::milliseconds timeout{30'000};
  kc::Clock* clock = nullptr;
};

std::string lsfJobName(const std::string& uid);
// The most bytes of additionaldata files one submit carries (the multipart body is built in
// the pod's memory).
inline constexpr std::uint64_t kLsfStagingLimit = 32ull << 20;
// The submit request: Content-Type value and body (errors "invalid" name the property).
struct LsfSubmit {
  std::string contentType;
  std::string body;
};
// Code "conflict" when the boundary occurs in a part (a file holding it): try another.
Result<LsfSubmit> buildLsfSubmit(const JobContext& ctx, const std::string& boundary);
// GET ws/jobs/<id> (or ?name=) reply -> the jobs in it (the one-object-or-array quirk undone).
Result<std::vector<nlohmann::json>> lsfJobs(unsigned httpStatus, const std::string& body);
Result<RemoteJob> lsfRemoteJob(const nlohmann::json& job);
// GET ws/jobhistory?ids=<id> reply (XML, <jobHistory><history><content>bhist -l text</content>
// ...</history>...</jobHistory>) -> the job's final state, or nullopt when the history does
// not know the job (no <history> about it, or HTTP 404). The text is matched with all white
// space removed, as bhist wraps its lines at 80 columns (even inside words): "Done
// successfully" -> DONE; "Completed <exit>" with "<KILL>" (a kill signal was requested) ->
// KILLED, else FAILED with the code of "Exited with exit code N"; a history without an end ->
// nullopt. Errors: a reply that is not XML or not a <jobHistory> (protocol), HTTP errors.
Result<std::optional<RemoteJob>> lsfHistoryJob(const std::string& id, unsigned httpStatus,
                                               const std::string& body);
// The expiry in a token ("user\"2010-04-03T09:31:02Z\"..."), if any.
std::optional<std::chrono::system_clock::time_point> lsfTokenExpiry(const std::string& token);

class LsfBackend final : public Backend {
 public:
  static Result<std::unique_ptr<LsfBackend>> create(LsfOptions options);
  const char* name() const override { return "lsf"; }
  std::uint64_t stagingLimit() const override { return kLsfStagingLimit; }
  Status prepare() override;
  Result<std::optional<std::string>> findTagged(const JobContext& ctx) override;
  Result<std::string> submit(const JobContext& ctx) override;
  Result<Query> query(const std::string& id) override;
  Result<bool> cancel(const std::string& id) override;
  Result<std::string> fetchOutput(const JobContext& ctx, const std::string& id,
                                  const std::string& file) override;
  void release() override;
  int logons() const { return logons_; }

 private:
  LsfBackend(LsfOptions options, std::unique_ptr<kc::net::HttpClient> http);
  Status logon();
  // Releases the token behind `cookie` ("platform_token=..."); `why` for the log.
  void logout(const std::string& cookie, const char* why);
  Result<kc::net::Response> send(const std::string& method, const std::string& target,
                                 std::string body, kc::net::Headers headers);
  LsfOptions options_;
  std::unique_ptr<kc::net::HttpClient> http_;
  kc::Clock& clock_;
  std::mutex mu_;
  std::string cookie_;
  std::chrono::system_clock::time_point renewAt_{};
  int logons_ = 0;
};

}  // namespace kc::bridge::pod
