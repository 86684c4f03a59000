#pragma once
// `vni-webhook admin list|audit ...`: the operator CLI over the admin functions (admin.hpp).
// Flags are registered on the main CLI::App; the command runs on its own streams so a test
// can drive it.

#include <cstdint>
#include <iosfwd>
#include <string>

namespace CLI {
class App;
}

namespace kc::vni {

inline constexpr const char* kDefaultDbPath = "/var/lib/vni-webhook/vni.sqlite3";

struct AdminCliOptions {
  std::string command;  // "list" or "audit"
  std::string db = kDefaultDbPath;
  std::string ns;        // list: only this namespace
  std::string liveFile;  // audit: live owners (kubectl JSON or namespace/uid lines)
  double marginSec = 300;
  bool release = false;  // audit: free the orphans
  bool yes = false;      // without asking
  bool json = false;
};

// Adds the `admin` subcommand to `app`, writing into `options`; returns the subcommand (its
// parsed() says whether it was chosen).
CLI::App* addAdminCommand(CLI::App& app, AdminCliOptions& options);

// Runs the parsed command. Exit status: 0 done (audit: no orphans, or all released), 1 error,
// 2 usage error, 3 orphans found and not released. `in` answers the confirmation prompt.
int runAdminCommand(const AdminCliOptions& options, std::istream& in, std::ostream& out,
                    std::ostream& err, std::int64_t nowMs);

}  // namespace kc::vni
