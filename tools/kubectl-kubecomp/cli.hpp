#pragma once
// kubectl-kubecomp's command line: flags as kubectl spells them (kubectl hands a plugin its
// arguments and nothing else, so --kubeconfig, --context, -n, -A and -o are parsed here), the
// commands, shell completion. main() is run() with the process' streams, environment, clock
// and a real API connection; the tests pass their own.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>

#include "libcore/base/result.hpp"
#include "libcore/kube/config.hpp"
#include "tools/kubectl-kubecomp/cluster.hpp"

namespace kc::kubectl {

using Connector = std::function<Result<std::unique_ptr<Cluster>>(const ConnectionOptions&,
                                                                 const kube::EnvLookup&)>;

struct Runtime {
  std::ostream& out;
  std::ostream& err;
  kube::EnvLookup env;
  Connector connect;
  std::function<std::chrono::system_clock::time_point()> now;
};

// The exit code: 0 done (also --help, --version), 1 the API failed or refused, 2 bad arguments.
int run(int argc, const char* const* argv, Runtime& rt);

// Shell completion. Candidates for the words typed so far (the last one being completed), one
// per line, then cobra's directive line ":4" (no file names), the protocol kubectl (>= 1.26)
// speaks to a kubectl_complete-<plugin> helper and the scripts below use.
std::string completeWords(const std::vector<std::string>& words);
// The script `completion bash|zsh` prints; "" for another shell.
std::string completionScript(const std::string& shell);

}  // namespace kc::kubectl
