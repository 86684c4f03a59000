#include "services/bridge-pod/slurm_script.hpp"

#include "libcore/base/base64.hpp"

namespace kc::bridge::pod {

namespace {

constexpr const char* kDelimiter = "BRIDGE_STAGED_EOF";

std::string shellQuote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

// `base64 -d > <target>` from a heredoc holding `bytes`, exiting 1 when the write fails.
std::string writeFile(const std::string& target, const std::string& label,
                      const std::string& bytes) {
  std::string out = "base64 -d > " + target + " <<'" + kDelimiter + "' || { echo " +
                    shellQuote("bridge: staging " + label + " failed") + " >&2; exit 1; }\n";
  const std::string text = kc::base64Encode(bytes);
  for (std::size_t i = 0; i < text.size(); i += 76) {
    out += text.substr(i, 76) + "\n";
  }
  return out + kDelimiter + "\n";
}

}  // namespace

Result<std::string> slurmBatchScript(const JobContext& ctx) {
  const bool remote = ctx.params.scriptLocation == "remote";
  if (remote && (ctx.script.empty() || ctx.script.front() != '/' ||
                 ctx.script.find_first_of("\n\r") != std::string::npos)) {
    return makeError(errc::kInvalid,
                     "jobdata.jobscript (remote) must be an absolute path on the cluster");
  }
  if (!remote && ctx.script.empty()) {
    return makeError(errc::kInvalid, "jobdata.jobscript is empty");
  }
  if (ctx.additionalFiles.empty()) {
    return remote ? "#!/bin/sh\nexec " + shellQuote(ctx.script) + "\n" : ctx.script;
  }
  std::uint64_t total = 0;
  for (const StagedFile& f : ctx.additionalFiles) {
    total += f.bytes.size();
  }
  if (total > kSlurmStagingLimit) {
    return makeError(errc::kInvalid, "additionaldata: " + std::to_string(total) +
                                         " bytes, more than Slurm stages in a batch script (" +
                                         std::to_string(kSlurmStagingLimit) + ")");
  }
  std::string out =
      "#!/bin/sh\n# bridge: jobdata.additionaldata staged into the working directory\n";
  for (const StagedFile& f : ctx.additionalFiles) {
    auto name = stagedFileName(f.name);
    if (!name.ok() || *name != f.name) {
      return makeError(errc::kInvalid,
                       "additionaldata file '" + f.name + "' is not a plain file name");
    }
    out += writeFile(shellQuote("./" + f.name), f.name, f.bytes);
  }
  if (remote) {
    return out + "exec " + shellQuote(ctx.script) + "\n";
  }
  out += "bridge_script=\"./.bridge-script.$SLURM_JOB_ID\"\n";
  out += writeFile("\"$bridge_script\"", "the job script", ctx.script);
  out += "chmod 700 \"$bridge_script\" || exit 1\n";
  return out + "exec \"$bridge_script\"\n";
}

}  // namespace kc::bridge::pod
