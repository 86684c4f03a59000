#include "libcore/fabric/credentials.hpp"

#include <catch2/catch.hpp>

#include "tests/unit/fabric/support.hpp"

using namespace kc::fabric;

TEST_CASE("credentials from a mounted Secret directory", "[fabric]") {
  test::TempDir dir;
  dir.write("secret/username", "admin\n");
  dir.write("secret/password", "s3cr3t:with:colons\n");
  auto creds = loadCredentials((dir.path() / "secret").string());
  REQUIRE(creds.ok());
  CHECK(creds->username == "admin");
  CHECK(creds->password == "s3cr3t:with:colons");
  CHECK(creds->describe() == "user=admin password=<redacted>");
}

TEST_CASE("credentials from a user:password file", "[fabric]") {
  test::TempDir dir;
  auto creds = loadCredentials(dir.write("creds", "root:pa:ss\n"));
  REQUIRE(creds.ok());
  CHECK(creds->username == "root");
  CHECK(creds->password == "pa:ss");
}

TEST_CASE("bad credentials files fail without echoing the secret", "[fabric]") {
  test::TempDir dir;
  auto [content, fragment] = GENERATE(table<std::string, std::string>({
      {"nocolon-topsecret", "user:password"},
      {":topsecret", "user:password"},
  }));
  auto creds = loadCredentials(dir.write("creds", content));
  REQUIRE_FALSE(creds.ok());
  CHECK_THAT(creds.error().message, Catch::Contains(fragment));
  CHECK_THAT(creds.error().message, !Catch::Contains("topsecret"));
  CHECK_FALSE(loadCredentials((dir.path() / "missing").string()).ok());
  dir.write("empty/username", "");
  dir.write("empty/password", "x");
  CHECK_FALSE(loadCredentials((dir.path() / "empty").string()).ok());
}
