// Shell completion without API calls: commands, their flags and the values of -o and
// completion's shell.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/kubectl-kubecomp/cli.hpp"

namespace kc::kubectl {

namespace {

const std::vector<std::string>& globalFlags() {
  static const std::vector<std::string> kFlags = {
      "--kubeconfig", "--context", "--namespace",       "-n",    "--all-namespaces", "-A",
      "--output",     "-o",        "--request-timeout", "--help"};
  return kFlags;
}

// Command path -> its own flags (and sub-commands, which have no dash).
const std::map<std::string, std::vector<std::string>>& commands() {
  static const std::map<std::string, std::vector<std::string>> kCommands = {
      {"",
       {"pools", "moves", "pending", "gpu", "vnis", "rt", "bridgejobs", "claims", "completion",
        "--version"}},
      {"pools", {}},
      {"moves", {"--pool", "--watch", "-w", "--watch-timeout", "--max-changes"}},
      {"pending", {}},
      {"gpu", {"quarantine", "release"}},
      {"gpu quarantine", {"--pool", "--reason"}},
      {"gpu release", {"--pool", "--reason"}},
      {"vnis", {}},
      {"rt", {}},
      {"bridgejobs", {}},
      {"claims", {}},
      {"completion", {"bash", "zsh"}},
  };
  return kCommands;
}

bool takesValue(const std::string& flag) {
  static const std::set<std::string> kValued = {
      "--kubeconfig", "--context",         "--namespace", "-n",       "--output",
      "-o",           "--request-timeout", "--pool",      "--reason", "--watch-timeout",
      "--max-changes"};
  return kValued.contains(flag);
}

}  // namespace

std::string completeWords(const std::vector<std::string>& words) {
  const std::string current = words.empty() ? std::string() : words.back();
  std::string path;
  std::string previous;
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (!w.empty() && w[0] == '-') {
      previous = w;
      continue;
    }
    if (takesValue(previous)) {  // the value of the flag before it
      previous.clear();
      continue;
    }
    previous.clear();
    const std::string next = path.empty() ? w : path + " " + w;
    if (commands().contains(next)) {
      path = next;
    }
  }
  std::vector<std::string> candidates;
  if (previous == "-o" || previous == "--output") {
    candidates = {"table", "wide", "json", "yaml"};
  } else if (!takesValue(previous)) {
    const auto& own = commands().at(path);
    for (const auto& c : own) {
      if (current.empty() ? c[0] != '-' : true) {
        candidates.push_back(c);
      }
    }
    if (!current.empty() && current[0] == '-') {
      candidates.insert(candidates.end(), globalFlags().begin(), globalFlags().end());
    }
  }
  std::string out;
  for (const auto& c : candidates) {
    if (c.compare(0, current.size(), current) == 0) {
      out += c + "\n";
    }
  }
  return out + ":4\n";
}

std::string completionScript(const std::string& shell) {
  if (shell == "bash") {
    return R"(# bash completion for kubectl-kubecomp: source <(kubectl-kubecomp completion bash)
_kubectl_kubecomp() {
  local IFS=$'\n'
  COMPREPLY=($(kubectl-kubecomp __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | grep -v '^:'))
}
complete -o default -F _kubectl_kubecomp kubectl-kubecomp
)";
  }
  if (shell == "zsh") {
    return R"(#compdef kubectl-kubecomp
# zsh completion for kubectl-kubecomp: source <(kubectl-kubecomp completion zsh)
_kubectl_kubecomp() {
  local -a out
  out=("${(@f)$(kubectl-kubecomp __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  out=("${(@)out:#:*}")
  compadd -a out
}
if [ "$funcstack[1]" = "_kubectl_kubecomp" ]; then
  _kubectl_kubecomp "$@"
else
  compdef _kubectl_kubecomp kubectl-kubecomp
fi
)";
  }
  return {};
}

}  // namespace kc::kubectl
