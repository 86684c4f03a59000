#pragma once
// The leader-election flag group, named as kube-scheduler and kube-controller-manager name it,
// so an operator who knows those knows ours; a daemon's old names kept for one release.
//
// Leader election (kubecomp-sched, reconfig-mgr):
//   --leader-elect[=true|false]            take a Lease so that one replica acts (default true)
//   --leader-elect-lease-duration DURATION  (15s)
//   --leader-elect-renew-deadline DURATION  (10s)
//   --leader-elect-retry-period DURATION    (2s)
//   --leader-elect-resource-namespace NS    (per daemon)
//   --leader-elect-resource-name NAME       (per daemon)
// DURATION: a number with a unit, ms, s, m or h ("15s", "1500ms", "1m30s"), or a plain number
// of seconds (the old *-seconds flags).

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "libcore/cli/flags.hpp"

namespace kc::cli {

struct LeaderElectionFlags {
  bool leaderElect = true;
  std::string resourceNamespace;
  std::string resourceName;
  std::chrono::milliseconds leaseDuration{15000};
  std::chrono::milliseconds renewDeadline{10000};
  std::chrono::milliseconds retryPeriod{2000};
};

// Old names a daemon had, each mapped to the new flag it now means.
struct LeaderElectionAliases {
  std::string leaderElectOff;  // a switch that meant --leader-elect=false ("--no-leader-elect")
  std::string resourceNamespace;
  std::string resourceName;
  std::string leaseDuration;  // "--lease-duration-seconds" etc.
  std::string renewDeadline;
  std::string retryPeriod;
};

// Adds the group (defaults shown from `flags`) and the daemon's old names. `purpose` ends the
// --leader-elect help ("so that only one replica binds").
void addLeaderElectionFlags(CLI::App& app, LeaderElectionFlags& flags, std::string_view purpose,
                            const LeaderElectionAliases& aliases = {});

}  // namespace kc::cli
