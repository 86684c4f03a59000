// libcore/base/percent_encoding: RFC 3986 unreserved set kept, everything else %XX, and strict
// decoding of escapes.
#include "libcore/base/percent_encoding.hpp"

#include <catch2/catch.hpp>
#include <string>

using kc::percentDecode;
using kc::percentEncode;

TEST_CASE("percent-encoding keeps only unreserved characters", "[base][percent]") {
  auto [raw, encoded] = GENERATE(table<std::string, std::string>({
      {"", ""},
      {"AZaz09-._~", "AZaz09-._~"},
      {"a b", "a%20b"},
      {"a b/c?d=e&f~_.-", "a%20b%2Fc%3Fd%3De%26f~_.-"},
      {"app=web,tier!=db", "app%3Dweb%2Ctier%21%3Ddb"},
      {"+%", "%2B%25"},
      {"\xc3\xa9", "%C3%A9"},
      {std::string("\0\xff", 2), "%00%FF"},
  }));
  CAPTURE(raw, encoded);
  CHECK(percentEncode(raw) == encoded);
  auto back = percentDecode(encoded);
  REQUIRE(back.ok());
  CHECK(*back == raw);
}

TEST_CASE("percent-decoding: hex case, plus as space, and malformed escapes", "[base][percent]") {
  CHECK(*percentDecode("a%2fb%2Fc") == "a/b/c");
  CHECK(*percentDecode("a+b", true) == "a b");
  CHECK(*percentDecode("a+b", false) == "a+b");
  CHECK(*percentDecode("%2B", true) == "+");

  auto bad = GENERATE(as<std::string>{}, "%", "%4", "a%", "%G1", "%1G", "%%41", "x%zz", "abc%2");
  CAPTURE(bad);
  auto r = percentDecode(bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
}
