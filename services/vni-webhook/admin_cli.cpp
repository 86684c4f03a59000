#include "services/vni-webhook/admin_cli.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "services/vni-webhook/admin.hpp"

namespace kc::vni {

namespace {

int list(const AdminCliOptions& o, const std::vector<AllocationRow>& rows, std::ostream& out) {
  std::vector<AllocationRow> shown;
  for (const auto& r : rows) {
    if (o.ns.empty() || r.ns == o.ns) {
      shown.push_back(r);
    }
  }
  printAllocations(out, shown, o.json);
  return 0;
}

int audit(const AdminCliOptions& o, const std::vector<AllocationRow>& rows, std::istream& in,
          std::ostream& out, std::ostream& err, std::int64_t nowMs) {
  std::ifstream file(o.liveFile);
  if (!file) {
    err << "error: cannot read live owners file " << o.liveFile << "\n";
    return 1;
  }
  std::stringstream text;
  text << file.rdbuf();
  auto live = parseLiveOwners(text.str());
  if (!live) {
    err << "error: " << live.error().message << "\n";
    return 1;
  }
  // The live list is as old as its file: only rows allocated before that (minus a margin
  // for how long the listing took and clock skew) can be judged.
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(o.liveFile, ec);
  if (ec) {
    err << "error: cannot stat " << o.liveFile << ": " << ec.message() << "\n";
    return 1;
  }
  const auto mtimeSys = std::chrono::time_point_cast<std::chrono::milliseconds>(
      std::chrono::file_clock::to_sys(mtime));
  const std::int64_t cutoffMs =
      mtimeSys.time_since_epoch().count() - static_cast<std::int64_t>(o.marginSec * 1000);
  std::size_t tooRecent = 0;
  const auto orphans = findOrphans(rows, *live, cutoffMs, &tooRecent);
  out << rows.size() << " allocations, " << live->size() << " live owners, " << orphans.size()
      << " orphans";
  if (tooRecent > 0) {
    out << ", " << tooRecent << " allocated after the live list was taken (not judged)";
  }
  out << "\n";
  printAllocations(out, orphans, o.json);
  if (!o.release || orphans.empty()) {
    return orphans.empty() ? 0 : 3;
  }
  if (!o.yes) {
    out << "Release these " << orphans.size() << " VNIs? Type 'yes': " << std::flush;
    std::string answer;
    std::getline(in, answer);
    if (answer != "yes") {
      out << "nothing released\n";
      return 3;
    }
  }
  std::vector<OwnerKey> keys;
  for (const auto& orphan : orphans) {
    keys.push_back({orphan.uid, orphan.ns});
  }
  auto released = releaseOwners(o.db, keys, nowMs);
  if (!released) {
    err << "error: " << released.error().message << "\n";
    return 1;
  }
  out << "released " << *released
      << " VNIs (a running vni-webhook reuses them after its next restart)\n";
  return 0;
}

}  // namespace

CLI::App* addAdminCommand(CLI::App& app, AdminCliOptions& o) {
  CLI::App* admin = app.add_subcommand("admin", "operator commands on the database");
  admin->add_option("command", o.command, "list | audit")
      ->required()
      ->check(CLI::IsMember({"list", "audit"}));
  admin->add_option("--db", o.db, "SQLite database file")->envname("VNI_WEBHOOK_DB");
  admin->add_option("--namespace", o.ns, "list: only this namespace");
  admin->add_option("--live", o.liveFile,
                    "audit: live owners (kubectl get ... -A -o json, or namespace/uid lines)");
  admin
      ->add_option("--margin-seconds", o.marginSec,
                   "audit: only judge rows allocated this long before the live file was written")
      ->check(CLI::Range(0.0, 86400.0));
  admin->add_flag("--release", o.release, "audit: free the orphans (asks for confirmation)");
  admin->add_flag("--yes", o.yes, "do not ask");
  admin->add_flag("--json", o.json, "JSON output");
  return admin;
}

int runAdminCommand(const AdminCliOptions& o, std::istream& in, std::ostream& out,
                    std::ostream& err, std::int64_t nowMs) {
  if (o.command == "audit" && o.liveFile.empty()) {
    err << "error: audit needs --live FILE\n";
    return 2;
  }
  auto rows = readAllocations(o.db);
  if (!rows) {
    err << "error: " << rows.error().message << "\n";
    return 1;
  }
  return o.command == "list" ? list(o, *rows, out) : audit(o, *rows, in, out, err, nowMs);
}

}  // namespace kc::vni
