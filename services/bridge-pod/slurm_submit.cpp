// The Slurm codec's request side (slurm_codec.hpp): the job fields a BridgeJob may set, how
// they are checked, and the submit body in the shapes of each version.

#include <algorithm>
#include <array>

#include "services/bridge-pod/slurm_codec.hpp"
#include "services/bridge-pod/slurm_codec_errors.hpp"

namespace kc::bridge::slurm {

namespace {

using detail::invalid;
using nlohmann::json;

constexpr std::size_t kMaxString = 4096;

enum class Kind { kString, kPath, kPositive, kNonNegative, kInteger, kBool, kNodes, kEnv };

struct Field {
  const char* name;
  Kind kind;
};

// The Slurm v0.0.38 job fields a BridgeJob may set (documented in docs/bridge.md). Anything
// else is rejected: slurmrestd would reject unknown keys too, and some keys (array, argv,
// comment) would break how the bridge tracks one job.
constexpr std::array<Field, 31> kJobFields{{
    {"account", Kind::kString},
    {"begin_time", Kind::kNonNegative},
    {"constraints", Kind::kString},
    {"cpus_per_task", Kind::kPositive},
    {"current_working_directory", Kind::kPath},
    {"deadline", Kind::kNonNegative},
    {"dependency", Kind::kString},
    {"environment", Kind::kEnv},
    {"gres", Kind::kString},
    {"hold", Kind::kBool},
    {"licenses", Kind::kString},
    {"mail_type", Kind::kString},
    {"mail_user", Kind::kString},
    {"memory_per_cpu", Kind::kPositive},
    {"memory_per_node", Kind::kPositive},
    {"minimum_nodes", Kind::kPositive},
    {"name", Kind::kString},
    {"nice", Kind::kInteger},
    {"nodes", Kind::kNodes},
    {"partition", Kind::kString},
    {"qos", Kind::kString},
    {"requeue", Kind::kBool},
    {"reservation", Kind::kString},
    {"standard_error", Kind::kPath},
    {"standard_output", Kind::kPath},
    {"tasks", Kind::kPositive},
    {"standard_input", Kind::kPath},
    {"tasks_per_node", Kind::kPositive},
    {"time_limit", Kind::kPositive},
    {"time_minimum", Kind::kPositive},
    {"wckey", Kind::kString},
}};

const Field* findField(std::string_view key) {
  for (const Field& f : kJobFields) {
    if (key == f.name) {
      return &f;
    }
  }
  return nullptr;
}

std::optional<std::string> checkField(const Field& f, const json& v) {
  const std::string where = std::string("jobproperties.") + f.name;
  switch (f.kind) {
    case Kind::kString:
    case Kind::kPath:
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
        return where + " must be a non-empty string";
      }
      if (v.get_ref<const std::string&>().size() > kMaxString) {
        return where + " is too long";
      }
      if (f.kind == Kind::kPath && v.get_ref<const std::string&>().front() != '/') {
        return where + " must be an absolute path";
      }
      return std::nullopt;
    case Kind::kPositive:
    case Kind::kNonNegative:
    case Kind::kInteger:
      if (!v.is_number_integer()) {
        return where + " must be an integer";
      }
      if (f.kind == Kind::kPositive && v.get<std::int64_t>() <= 0) {
        return where + " must be greater than 0";
      }
      if (f.kind == Kind::kNonNegative && v.get<std::int64_t>() < 0) {
        return where + " must not be negative";
      }
      return std::nullopt;
    case Kind::kBool:
      if (!v.is_boolean()) {
        return where + " must be a boolean";
      }
      return std::nullopt;
    case Kind::kNodes:
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
          !v[1].is_number_integer() || v[0].get<std::int64_t>() <= 0 ||
          v[1].get<std::int64_t>() < v[0].get<std::int64_t>()) {
        return where + " must be [min, max] with 0 < min <= max";
      }
      return std::nullopt;
    case Kind::kEnv:
      // An object of strings (v0.0.38's shape) or an array of "NAME=value" strings (v0.0.39+);
      // either is sent in the shape of the version spoken.
      if (v.is_array() && !v.empty()) {
        for (const json& e : v) {
          if (!e.is_string()) {
            return where + " entries must be \"NAME=value\" strings";
          }
          const std::string& s = e.get_ref<const std::string&>();
          if (s.find('=') == std::string::npos || s.front() == '=') {
            return where + " entry \"" + s + "\" is not NAME=value";
          }
        }
        return std::nullopt;
      }
      if (!v.is_object() || v.empty()) {
        return where +
               " must be a non-empty object of strings or array of NAME=value strings (slurmrestd "
               "requires it)";
      }
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.find('=') != std::string::npos) {
          return where + " has an invalid variable name \"" + name + "\"";
        }
        if (!value.is_string()) {
          return where + "." + name + " must be a string";
        }
      }
      return std::nullopt;
  }
  return where + " has an unknown kind";
}

}  // namespace

std::string uidTag(std::string_view bridgeJobUid) {
  return "bridgejob-uid=" + std::string(bridgeJobUid);
}

std::vector<std::string> jobFieldNames() {
  std::vector<std::string> names;
  for (const Field& f : kJobFields) {
    names.emplace_back(f.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::string part;
  for (char c : s + ",") {
    if (c == ',') {
      if (!part.empty()) {
        out.push_back(part);
      }
      part.clear();
    } else if (c != ' ') {
      part += c;
    }
  }
  return out;
}

// The v0.0.38-shaped job object in the shapes v0.0.39+ take.
json newerJobShape(json job) {
  if (auto env = job.find("environment"); env != job.end() && env->is_object()) {
    json list = json::array();
    for (const auto& [name, value] : env->items()) {
      list.push_back(name + "=" + value.get<std::string>());
    }
    *env = std::move(list);
  }
  if (auto nodes = job.find("nodes"); nodes != job.end()) {
    const auto lo = (*nodes)[0].get<std::int64_t>(), hi = (*nodes)[1].get<std::int64_t>();
    *nodes = lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  }
  if (auto mail = job.find("mail_type"); mail != job.end()) {
    json flags = json::array();
    for (const std::string& f : splitList(mail->get<std::string>())) {
      flags.push_back(f);
    }
    *mail = std::move(flags);
  }
  if (auto gres = job.find("gres"); gres != job.end()) {
    std::string tres;
    for (const std::string& g : splitList(gres->get<std::string>())) {
      tres += (tres.empty() ? "" : ",") + (g.rfind("gres/", 0) == 0 ? g : "gres/" + g);
    }
    job.erase(gres);
    job["tres_per_node"] = tres;
  }
  return job;
}

}  // namespace

Result<json> buildSubmitBody(const SubmitInput& in, ApiVersion version) {
  if (in.script.empty()) {
    return invalid("the job script is empty");
  }
  if (in.bridgeJobUid.empty()) {
    return invalid("the BridgeJob uid is empty (it tags the Slurm job for adoption)");
  }
  if (in.jobProperties.empty()) {
    return invalid(
        "jobproperties is required for Slurm (environment and current_working_directory)");
  }
  json props = json::parse(in.jobProperties, nullptr, false);
  if (props.is_discarded() || !props.is_object()) {
    return invalid("jobproperties is not a JSON object");
  }
  json job = json::object();
  for (const auto& [key, value] : props.items()) {
    if (key == "comment") {
      return invalid("jobproperties.comment is reserved (it carries the BridgeJob uid tag)");
    }
    const Field* f = findField(key);
    if (f == nullptr) {
      return invalid("jobproperties." + key + " is not a supported Slurm job field");
    }
    if (auto problem = checkField(*f, value)) {
      return invalid(*problem);
    }
    job[key] = value;
  }
  if (!job.contains("environment")) {
    return invalid("jobproperties.environment is required (slurmrestd rejects a job without it)");
  }
  if (!job.contains("current_working_directory")) {
    return invalid("jobproperties.current_working_directory is required");
  }
  if (!job.contains("name")) {
    if (in.defaultName.empty()) {
      return invalid("jobproperties.name is missing and there is no default name");
    }
    job["name"] = in.defaultName;
  }
  job["comment"] = uidTag(in.bridgeJobUid);
  if (version == ApiVersion::kV0038) {
    if (json& env = job["environment"]; env.is_array()) {  // "NAME=value" list -> object
      json object = json::object();
      for (const json& e : env) {
        const std::string& s = e.get_ref<const std::string&>();
        const auto eq = s.find('=');
        object[s.substr(0, eq)] = s.substr(eq + 1);
      }
      env = std::move(object);
    }
    return json{{"job", std::move(job)}, {"script", in.script}};
  }
  job = newerJobShape(std::move(job));
  job["script"] = in.script;  // v0.0.39 also took a top-level script; v0.0.41 no longer does
  return json{{"job", std::move(job)}};
}

}  // namespace kc::bridge::slurm
