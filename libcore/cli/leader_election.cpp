#include "libcore/cli/leader_election.hpp"

#include <tuple>

namespace kc::cli {

using std::chrono::milliseconds;

namespace {

// A DURATION option writing into `target`; a bad value is a usage error naming the flag.
void durationOption(CLI::App& app, const std::string& name, milliseconds& target,
                    std::string help) {
  app.add_option_function<std::string>(
         name,
         [&target, name](const std::string& v) {
           auto d = parseDuration(v);
           if (!d) {
             throw CLI::ValidationError(name, d.error().message);
           }
           if (d->count() <= 0) {
             throw CLI::ValidationError(name, "must be above zero");
           }
           target = *d;
         },
         std::move(help))
      ->type_name("DURATION")
      ->default_str(formatDuration(target));
}

std::function<void(const std::string&)> durationSetter(const std::string& newName,
                                                       milliseconds& target) {
  return [&target, newName](const std::string& v) {
    auto d = parseDuration(v);
    if (!d || d->count() <= 0) {
      throw CLI::ValidationError(newName, d ? "must be above zero" : d.error().message);
    }
    target = *d;
  };
}

}  // namespace

void addLeaderElectionFlags(CLI::App& app, LeaderElectionFlags& f, std::string_view purpose,
                            const LeaderElectionAliases& aliases) {
  app.add_flag("--leader-elect", f.leaderElect,
               "take a Lease before acting, " + std::string(purpose) +
                   " (--leader-elect=false: a single replica only)")
      ->capture_default_str();
  durationOption(app, "--leader-elect-lease-duration", f.leaseDuration,
                 "how long non-leaders wait after the last renewal before taking the Lease");
  durationOption(app, "--leader-elect-renew-deadline", f.renewDeadline,
                 "the leader steps down when it has not renewed the Lease within this");
  durationOption(app, "--leader-elect-retry-period", f.retryPeriod,
                 "how often the Lease is renewed or tried");
  app.add_option("--leader-elect-resource-namespace", f.resourceNamespace, "namespace of the Lease")
      ->capture_default_str();
  app.add_option("--leader-elect-resource-name", f.resourceName, "name of the Lease")
      ->capture_default_str();

  if (!aliases.leaderElectOff.empty()) {
    addDeprecatedFlag(
        app, aliases.leaderElectOff, "--leader-elect=false",
        [&f](const std::string&) { f.leaderElect = false; }, false);
  }
  if (!aliases.resourceNamespace.empty()) {
    addDeprecatedFlag(app, aliases.resourceNamespace, "--leader-elect-resource-namespace",
                      [&f](const std::string& v) { f.resourceNamespace = v; });
  }
  if (!aliases.resourceName.empty()) {
    addDeprecatedFlag(app, aliases.resourceName, "--leader-elect-resource-name",
                      [&f](const std::string& v) { f.resourceName = v; });
  }
  for (const auto& [oldName, newName, target] :
       {std::tuple{aliases.leaseDuration, std::string("--leader-elect-lease-duration"),
                   &f.leaseDuration},
        std::tuple{aliases.renewDeadline, std::string("--leader-elect-renew-deadline"),
                   &f.renewDeadline},
        std::tuple{aliases.retryPeriod, std::string("--leader-elect-retry-period"),
                   &f.retryPeriod}}) {
    if (!oldName.empty()) {
      addDeprecatedFlag(app, oldName, newName, durationSetter(newName, *target));
    }
  }
}

}  // namespace kc::cli
