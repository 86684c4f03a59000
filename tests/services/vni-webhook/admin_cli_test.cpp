// `vni-webhook admin` and the server flags as main() parses them, on a real database written
// by the service, with the command's streams captured.
#include "services/vni-webhook/admin_cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "services/vni-webhook/vni_service.hpp"
#include "services/vni-webhook/webhook_cli.hpp"
#include "tests/services/vni-webhook/hook_request_builder.hpp"
#include "tests/support/temp_dir.hpp"

using kc::vni::AdminCliOptions;
using kc::vni::HookKind;
using kc::vni::testing::makeParent;

namespace {

constexpr std::int64_t kNowMs = 1'795'381'200'000;

// Two owners in "ml", one in "web", allocated by the service itself (VNIs 1024, 1025, 1026).
void seedDatabase(const std::string& db) {
  kc::vni::ServiceOptions o;
  o.store.path = db;
  auto service = kc::vni::VniService::start(
      o, [] { return kNowMs; }, nullptr);
  REQUIRE(service.ok());
  for (const auto& [ns, uid] : std::vector<std::pair<std::string, std::string>>{
           {"ml", "u-a"}, {"ml", "u-b"}, {"web", "u-c"}}) {
    const auto reply = (*service)->handleNow(
        HookKind::kSync,
        makeParent("Job", "job-" + uid).ns(ns).uid(uid).optIn().body(HookKind::kSync));
    REQUIRE(reply.status == 200);
  }
  (*service)->stop();
}

struct Run {
  int status;
  std::string out;
  std::string err;
};

Run admin(std::vector<std::string> args, const std::string& input = "") {
  CLI::App app;
  AdminCliOptions o;
  CLI::App* cmd = kc::vni::addAdminCommand(app, o);
  args.insert(args.begin(), "admin");
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  REQUIRE(cmd->parsed());
  std::istringstream in(input);
  std::ostringstream out, err;
  const int status = kc::vni::runAdminCommand(o, in, out, err, kNowMs + 1);
  return {status, out.str(), err.str()};
}

}  // namespace

TEST_CASE("admin CLI: list, audit, confirmed release, and usage errors", "[vni][admin]") {
  kc::testing::TempDir dir;
  const std::string db = dir.file("vni.sqlite3");
  seedDatabase(db);

  const Run listMl = admin({"list", "--db", db, "--namespace", "ml"});
  CHECK(listMl.status == 0);
  CHECK(listMl.out ==
        "NAMESPACE\tVNI\tKIND\tNAME\tUID\nml\t1024\tJob\tjob-u-a\tu-a\nml\t1025\tJob\tjob-u-b\tu-"
        "b\n");

  // u-b is gone. The live file is written now, after the allocations; margin 0 judges them all.
  const std::string live = dir.write("live.txt", "ml/u-a\nweb/u-c\n");
  const Run audit = admin({"audit", "--db", db, "--live", live, "--margin-seconds", "0"});
  CHECK(audit.status == 3);
  CHECK(audit.out.rfind("3 allocations, 2 live owners, 1 orphans\n", 0) == 0);
  CHECK_THAT(audit.out, Catch::Contains("ml\t1025\tJob\tjob-u-b\tu-b"));

  const Run declined =
      admin({"audit", "--db", db, "--live", live, "--margin-seconds", "0", "--release"}, "no\n");
  CHECK(declined.status == 3);
  CHECK_THAT(declined.out, Catch::Contains("nothing released"));
  CHECK(admin({"list", "--db", db}).out.find("u-b") != std::string::npos);

  const Run released =
      admin({"audit", "--db", db, "--live", live, "--margin-seconds", "0", "--release"}, "yes\n");
  CHECK(released.status == 0);
  CHECK_THAT(released.out, Catch::Contains("released 1 VNIs"));
  CHECK(admin({"list", "--db", db}).out.find("u-b") == std::string::npos);

  const Run noLive = admin({"audit", "--db", db});
  CHECK(noLive.status == 2);
  CHECK(noLive.err == "error: audit needs --live FILE\n");
  const Run missingLive = admin({"audit", "--db", db, "--live", dir.file("absent.txt")});
  CHECK(missingLive.status == 1);
  CHECK_THAT(missingLive.err, Catch::Contains("cannot read live owners file"));
}

TEST_CASE("server flags: --reserved parsing keeps 0 and names a bad value", "[vni][admin]") {
  auto [text, ok, values] = GENERATE(table<std::string, bool, std::vector<kc::alloc::Vni>>({
      {"1,10", true, {0, 1, 10}},
      {" 7 , ,65535", true, {0, 7, 65535}},
      {"", true, {0}},
      {"65536", false, {}},
      {"1,x", false, {}},
      {"-1", false, {}},
      {"12abc", false, {}},
  }));
  CAPTURE(text);
  const auto parsed = kc::vni::parseReservedVnis(text);
  REQUIRE(parsed.ok() == ok);
  if (ok) {
    CHECK(*parsed == values);
  } else {
    CHECK(parsed.error().code == "invalid");
    CHECK_THAT(parsed.error().message, Catch::Contains("is not a VNI"));
  }
}
