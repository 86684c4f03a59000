#include "libcore/api/bridge_job.hpp"

#include <array>
#include <charconv>
#include <regex>
#include <sstream>

#include "libcore/metacontroller/hook_body.hpp"

namespace kc::bridge {

namespace {

using metacontroller::member;
using nlohmann::json;

// Limits shared with the CRD schema (charts/kubecomp/crds/bridgejobs.bridge.kubecomp.io.yaml).
constexpr std::size_t kMaxScript = 256 * 1024;  // keeps the ConfigMap far below its 1 MiB
constexpr std::size_t kMaxJson = 64 * 1024;
constexpr std::size_t kMaxUrl = 2048;
constexpr std::size_t kMaxList = 4096;
constexpr std::int64_t kMaxUpdateIntervalSec = 86400;

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, std::move(message));
}

const std::regex& urlPattern() {
  static const std::regex re(R"(^https?://[^\s]+$)");
  return re;
}
// DNS-1123 subdomain (Secret names).
const std::regex& subdomainPattern() {
  static const std::regex re(
      R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  return re;
}
// S3 bucket name ":" object key.
const std::regex& objectRefPattern() {
  static const std::regex re(R"(^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]:[^\s,]+$)");
  return re;
}
// host[:port] or [ipv6][:port], no scheme (minio style).
const std::regex& endpointPattern() {
  static const std::regex re(R"(^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$)");
  return re;
}

// Reads optional fields of one object, recording the first error with its path.
class FieldReader {
 public:
  FieldReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  bool string(const char* key, std::string& out, bool required, std::size_t maxLength) {
    const json* v = member(object_, key);
    if (v == nullptr || v->is_null()) {
      if (required) {
        return fail(where(key) + " is required");
      }
      return true;
    }
    if (!v->is_string()) {
      return fail(where(key) + " must be a string");
    }
    const auto& s = v->get_ref<const std::string&>();
    if (required && s.empty()) {
      return fail(where(key) + " must not be empty");
    }
    if (s.size() > maxLength) {
      return fail(where(key) + " is longer than " + std::to_string(maxLength) + " bytes");
    }
    out = s;
    return true;
  }

  template <std::size_t N>
  bool oneOf(const char* key, std::string& out, const std::array<const char*, N>& allowed) {
    std::string value = out;
    if (!string(key, value, false, 64)) {
      return false;
    }
    for (const char* a : allowed) {
      if (value == a) {
        out = value;
        return true;
      }
    }
    std::string list;
    for (const char* a : allowed) {
      list += list.empty() ? "" : ", ";
      list += a;
    }
    return fail(where(key) + " must be one of " + list + " (got " + json(value).dump() + ")");
  }

  bool boolean(const char* key, bool& out) {
    const json* v = member(object_, key);
    if (v == nullptr || v->is_null()) {
      return true;
    }
    if (!v->is_boolean()) {
      return fail(where(key) + " must be a boolean");
    }
    out = v->get<bool>();
    return true;
  }

  bool integer(const char* key, std::int64_t& out, std::int64_t min, std::int64_t max) {
    const json* v = member(object_, key);
    if (v == nullptr || v->is_null()) {
      return true;
    }
    if (!v->is_number_integer()) {
      return fail(where(key) + " must be an integer");
    }
    const std::int64_t n =
        v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)
            ? max + 1
            : v->get<std::int64_t>();
    if (n < min || n > max) {
      return fail(where(key) + " must be between " + std::to_string(min) + " and " +
                  std::to_string(max));
    }
    out = n;
    return true;
  }

  // A sub-object; `present` false when absent or null.
  const json* object(const char* key, bool& present) {
    const json* v = member(object_, key);
    present = v != nullptr && !v->is_null();
    if (present && !v->is_object()) {
      fail(where(key) + " must be an object");
      return nullptr;
    }
    return present ? v : nullptr;
  }

  bool fail(std::string message) {
    if (!error_) {
      error_ = invalid(std::move(message));
    }
    return false;
  }
  std::string where(const char* key) const { return path_ + "." + key; }
  const std::optional<Error>& error() const { return error_; }

 private:
  const json& object_;
  std::string path_;
  std::optional<Error> error_;
};

bool isJsonObjectText(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object();
}

std::optional<std::string> checkObjectRefs(const std::string& list, const std::string& field) {
  std::stringstream in(list);
  std::string item;
  bool any = false;
  while (std::getline(in, item, ',')) {
    any = true;
    if (!std::regex_match(item, objectRefPattern())) {
      return field + ": " + json(item).dump() +
             " is not a bucket:object reference (S3 bucket name, ':', object key)";
    }
  }
  if (!any) {
    return field + " is empty";
  }
  return std::nullopt;
}

std::optional<std::string> checkFileList(const std::string& list, const std::string& field) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty() || item.front() == '/' || item.find("..") != std::string::npos ||
        item.find_first_of(" \t\r\n") != std::string::npos) {
      return field + ": " + json(item).dump() +
             " is not a relative file name (no spaces, no '..', no leading '/')";
    }
  }
  return std::nullopt;
}

// Every additionaldata object gets a usable file name, and no two the same one.
std::optional<std::string> checkStagedNames(const std::string& list) {
  std::stringstream in(list);
  std::map<std::string, std::string> seen;
  for (std::string item; std::getline(in, item, ',');) {
    auto name = stagedFileName(item.substr(item.find(':') + 1));
    if (!name.ok()) {
      return "spec.jobdata.additionaldata: " + name.error().message;
    }
    if (auto [it, fresh] = seen.emplace(*name, item); !fresh) {
      return "spec.jobdata.additionaldata: " + json(it->second).dump() + " and " +
             json(item).dump() + " would both be staged as " + json(*name).dump();
    }
  }
  return std::nullopt;
}

// The checks a schema cannot express; first problem or nullopt.
std::optional<std::string> crossCheck(const JobParameters& p) {
  if (!std::regex_match(p.resourceUrl, urlPattern())) {
    return "spec.resourceURL must be an http:// or https:// URL";
  }
  if (!std::regex_match(p.resourceSecret, subdomainPattern()) || p.resourceSecret.size() > 253) {
    return "spec.resourcesecret must be a Secret name (DNS-1123 subdomain)";
  }
  if (!p.jobProperties.empty() && !isJsonObjectText(p.jobProperties)) {
    return "spec.jobproperties must be a JSON object (as text)";
  }
  if (p.scriptLocation == "s3") {
    if (auto e = checkObjectRefs(p.jobScript, "spec.jobdata.jobscript (scriptlocation s3)")) {
      return e;
    }
  }
  for (const auto& [value, name] : {std::pair{&p.scriptMetadata, "scriptmetadata"},
                                    std::pair{&p.jobParameters, "jobparameters"}}) {
    if (value->empty()) {
      continue;
    }
    const std::string field = std::string("spec.jobdata.") + name;
    if (p.scriptExtraLocation == "s3") {
      if (auto e = checkObjectRefs(*value, field + " (scriptextralocation s3)")) {
        return e;
      }
    } else if (!isJsonObjectText(*value)) {
      return field + " must be a JSON object (as text) when scriptextralocation is inline";
    }
  }
  if (!p.additionalData.empty()) {
    if (auto e = checkObjectRefs(p.additionalData, "spec.jobdata.additionaldata")) {
      return e;
    }
    if (auto e = checkStagedNames(p.additionalData)) {
      return e;
    }
  }
  if (!p.s3UploadFiles.empty()) {
    if (auto e = checkFileList(p.s3UploadFiles, "spec.s3upload.files")) {
      return e;
    }
  }
  if (p.usesS3()) {
    if (p.s3Secret.empty()) {
      return "S3 is used (script, metadata, additional data or upload) but "
             "spec.s3storage.s3secret is not set";
    }
    if (!std::regex_match(p.s3Secret, subdomainPattern()) || p.s3Secret.size() > 253) {
      return "spec.s3storage.s3secret must be a Secret name (DNS-1123 subdomain)";
    }
    if (!std::regex_match(p.s3Endpoint, endpointPattern())) {
      return "S3 is used but spec.s3storage.endpoint is not host[:port] (no scheme)";
    }
  }
  return std::nullopt;
}

}  // namespace

const char* jobStatusName(JobStatus status) {
  switch (status) {
    case JobStatus::kSubmitted:
      return "SUBMITTED";
    case JobStatus::kRunning:
      return "RUNNING";
    case JobStatus::kDone:
      return "DONE";
    case JobStatus::kFailed:
      return "FAILED";
    case JobStatus::kKilled:
      return "KILLED";
    case JobStatus::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

std::optional<JobStatus> parseJobStatus(std::string_view text) {
  for (JobStatus s : {JobStatus::kSubmitted, JobStatus::kRunning, JobStatus::kDone,
                      JobStatus::kFailed, JobStatus::kKilled, JobStatus::kUnknown}) {
    if (text == jobStatusName(s)) {
      return s;
    }
  }
  return std::nullopt;
}

bool isTerminal(JobStatus status) {
  return status == JobStatus::kDone || status == JobStatus::kFailed ||
         status == JobStatus::kKilled || status == JobStatus::kUnknown;
}

bool JobParameters::usesS3() const {
  return scriptLocation == "s3" || scriptExtraLocation == "s3" || !additionalData.empty() ||
         !s3UploadBucket.empty();
}

bool killRequested(const json& spec) {
  const json* k = member(spec, "kill");
  return k != nullptr && k->is_boolean() && k->get<bool>();
}

Result<std::string> stagedFileName(const std::string& objectKey) {
  const auto slash = objectKey.rfind('/');
  const std::string name = slash == std::string::npos ? objectKey : objectKey.substr(slash + 1);
  const std::string what = "additionaldata object '" + objectKey + "'";
  if (name.empty()) {
    return makeError(errc::kInvalid, what + " has no file name (the key ends with '/')");
  }
  if (name == "." || name == "..") {
    return makeError(errc::kInvalid, what + ": '" + name + "' is not a file name");
  }
  if (name.size() > 255) {
    return makeError(errc::kInvalid, what + ": the file name is longer than 255 bytes");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return makeError(errc::kInvalid, what + ": the file name holds a control character");
    }
  }
  return name;
}

Result<JobParameters> parseSpec(const json& spec) {
  if (!spec.is_object()) {
    return invalid("spec is missing or not an object");
  }
  JobParameters p;
  FieldReader r(spec, "spec");
  bool killIgnored = false;
  bool hasJobData = false, hasStorage = false, hasUpload = false;
  r.string("resourceURL", p.resourceUrl, true, kMaxUrl) &&
      r.string("resourcesecret", p.resourceSecret, true, 253) &&
      r.string("image", p.image, true, 1024) &&
      r.oneOf("imagepullpolicy", p.imagePullPolicy,
              std::array<const char*, 3>{"Always", "IfNotPresent", "Never"}) &&
      r.integer("updateinterval", p.updateIntervalSec, 1, kMaxUpdateIntervalSec) &&
      r.boolean("kill", killIgnored) && r.string("jobproperties", p.jobProperties, false, kMaxJson);
  if (r.error()) {
    return *r.error();
  }
  const json* jobdata = r.object("jobdata", hasJobData);
  if (r.error()) {
    return *r.error();
  }
  if (!hasJobData) {
    return invalid("spec.jobdata is required");
  }
  FieldReader jd(*jobdata, "spec.jobdata");
  jd.string("jobscript", p.jobScript, true, kMaxScript) &&
      jd.oneOf("scriptlocation", p.scriptLocation,
               std::array<const char*, 3>{"remote", "inline", "s3"}) &&
      jd.string("scriptmetadata", p.scriptMetadata, false, kMaxJson) &&
      jd.string("jobparameters", p.jobParameters, false, kMaxJson) &&
      jd.oneOf("scriptextralocation", p.scriptExtraLocation,
               std::array<const char*, 2>{"inline", "s3"}) &&
      jd.string("additionaldata", p.additionalData, false, kMaxList);
  if (jd.error()) {
    return *jd.error();
  }
  if (const json* s3 = r.object("s3storage", hasStorage); s3 != nullptr) {
    FieldReader sr(*s3, "spec.s3storage");
    sr.string("s3secret", p.s3Secret, false, 253) &&
        sr.string("endpoint", p.s3Endpoint, false, 512) && sr.boolean("secure", p.s3Secure);
    if (sr.error()) {
      return *sr.error();
    }
  }
  if (const json* up = r.object("s3upload", hasUpload); up != nullptr) {
    FieldReader ur(*up, "spec.s3upload");
    ur.string("bucket", p.s3UploadBucket, true, 63) &&
        ur.string("files", p.s3UploadFiles, false, kMaxList);
    if (ur.error()) {
      return *ur.error();
    }
  }
  if (r.error()) {
    return *r.error();
  }
  if (auto problem = crossCheck(p)) {
    return invalid(*problem);
  }
  return p;
}

std::map<std::string, std::string> parameterData(const JobParameters& p) {
  std::map<std::string, std::string> d{
      {cmkey::kImage, p.image},
      {cmkey::kImagePullPolicy, p.imagePullPolicy},
      {cmkey::kResourceUrl, p.resourceUrl},
      {cmkey::kResourceSecret, p.resourceSecret},
      {cmkey::kUpdateInterval, std::to_string(p.updateIntervalSec)},
      {cmkey::kJobProperties, p.jobProperties},
      {cmkey::kJobScript, p.jobScript},
      {cmkey::kScriptLocation, p.scriptLocation},
      {cmkey::kScriptMetadata, p.scriptMetadata},
      {cmkey::kJobParameters, p.jobParameters},
      {cmkey::kScriptExtraLocation, p.scriptExtraLocation},
      {cmkey::kAdditionalData, p.additionalData},
      {cmkey::kS3Secret, p.s3Secret},
      {cmkey::kS3Endpoint, p.s3Endpoint},
      {cmkey::kS3Secure, p.s3Secure ? "true" : "false"},
      {cmkey::kS3UploadBucket, p.s3UploadBucket},
      {cmkey::kS3UploadFiles, p.s3UploadFiles},
  };
  return d;
}

Result<JobParameters> parametersFromData(const std::map<std::string, std::string>& data) {
  // Re-validated as a spec, so a hand-edited ConfigMap cannot start a pod with bad values.
  auto get = [&](const char* key) -> Result<std::string> {
    auto it = data.find(key);
    if (it == data.end()) {
      return invalid(std::string("ConfigMap key ") + key + " is missing");
    }
    return it->second;
  };
  json spec = json::object();
  json jobdata = json::object();
  json storage = json::object();
  json upload = json::object();
  for (const auto& [key, field, target] :
       {std::tuple{cmkey::kImage, "image", &spec},
        std::tuple{cmkey::kImagePullPolicy, "imagepullpolicy", &spec},
        std::tuple{cmkey::kResourceUrl, "resourceURL", &spec},
        std::tuple{cmkey::kResourceSecret, "resourcesecret", &spec},
        std::tuple{cmkey::kJobProperties, "jobproperties", &spec},
        std::tuple{cmkey::kJobScript, "jobscript", &jobdata},
        std::tuple{cmkey::kScriptLocation, "scriptlocation", &jobdata},
        std::tuple{cmkey::kScriptMetadata, "scriptmetadata", &jobdata},
        std::tuple{cmkey::kJobParameters, "jobparameters", &jobdata},
        std::tuple{cmkey::kScriptExtraLocation, "scriptextralocation", &jobdata},
        std::tuple{cmkey::kAdditionalData, "additionaldata", &jobdata},
        std::tuple{cmkey::kS3Secret, "s3secret", &storage},
        std::tuple{cmkey::kS3Endpoint, "endpoint", &storage},
        std::tuple{cmkey::kS3UploadBucket, "bucket", &upload},
        std::tuple{cmkey::kS3UploadFiles, "files", &upload}}) {
    auto v = get(key);
    if (!v) {
      return v.error();
    }
    (*target)[field] = *v;
  }
  auto interval = get(cmkey::kUpdateInterval);
  if (!interval) {
    return interval.error();
  }
  std::int64_t seconds = 0;
  const auto [end, ec] =
      std::from_chars(interval->data(), interval->data() + interval->size(), seconds, 10);
  if (ec != std::errc() || end != interval->data() + interval->size()) {
    return invalid(std::string("ConfigMap key ") + cmkey::kUpdateInterval +
                   " is not a decimal number: " + json(*interval).dump());
  }
  spec["updateinterval"] = seconds;
  auto secure = get(cmkey::kS3Secure);
  if (!secure) {
    return secure.error();
  }
  if (*secure != "true" && *secure != "false") {
    return invalid(std::string("ConfigMap key ") + cmkey::kS3Secure + " must be true or false");
  }
  storage["secure"] = *secure == "true";
  spec["jobdata"] = std::move(jobdata);
  spec["s3storage"] = std::move(storage);
  if (!upload["bucket"].get_ref<const std::string&>().empty()) {
    spec["s3upload"] = std::move(upload);
  } else if (!upload["files"].get_ref<const std::string&>().empty()) {
    return invalid("ConfigMap lists s3upload.files without s3upload.bucket");
  }
  auto p = parseSpec(spec);
  if (!p) {
    return invalid("ConfigMap parameters: " + p.error().message);
  }
  return p;
}

}  // namespace kc::bridge
