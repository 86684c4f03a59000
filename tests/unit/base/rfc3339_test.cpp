// libcore/base/rfc3339: formatting at each precision and strict parsing. Expected epoch values
// were computed independently (GNU date -u -d ... +%s.%N).
#include "libcore/base/rfc3339.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>

using namespace std::chrono;
using kc::formatRfc3339;
using kc::parseRfc3339;
using kc::Rfc3339Precision;

namespace {

system_clock::time_point at(std::int64_t secs, std::int64_t nanos = 0) {
  return system_clock::time_point{
      duration_cast<system_clock::duration>(seconds{secs} + nanoseconds{nanos})};
}

}  // namespace

TEST_CASE("RFC 3339 formatting in UTC at each precision, truncating", "[base][rfc3339]") {
  auto [secs, nanos, precision, text] =
      GENERATE(table<std::int64_t, std::int64_t, Rfc3339Precision, std::string>({
          {0, 0, Rfc3339Precision::kSeconds, "1970-01-01T00:00:00Z"},
          {1795381200, 0, Rfc3339Precision::kSeconds, "2026-11-22T21:00:00Z"},
          {1795381200, 999'999'999, Rfc3339Precision::kSeconds, "2026-11-22T21:00:00Z"},
          {1795381200, 123'456'789, Rfc3339Precision::kMillis, "2026-11-22T21:00:00.123Z"},
          {1795381200, 123'456'789, Rfc3339Precision::kMicros, "2026-11-22T21:00:00.123456Z"},
          {1795381200, 5'000, Rfc3339Precision::kMicros, "2026-11-22T21:00:00.000005Z"},
          {951782400, 0, Rfc3339Precision::kSeconds, "2000-02-29T00:00:00Z"},
          {-1, 500'000'000, Rfc3339Precision::kMillis, "1969-12-31T23:59:59.500Z"},
          {4102444799, 0, Rfc3339Precision::kSeconds, "2099-12-31T23:59:59Z"},
      }));
  CAPTURE(secs, nanos, text);
  CHECK(formatRfc3339(at(secs, nanos), precision) == text);
}

TEST_CASE("RFC 3339 parsing accepts fractions, offsets and lower-case separators",
          "[base][rfc3339]") {
  auto [text, secs, nanos] = GENERATE(table<std::string, std::int64_t, std::int64_t>({
      {"1970-01-01T00:00:00Z", 0, 0},
      {"2026-11-22T21:00:00Z", 1795381200, 0},
      {"2026-11-22t21:00:00z", 1795381200, 0},
      {"2026-11-22T21:00:00.5Z", 1795381200, 500'000'000},
      {"2026-11-22T21:00:00.123456Z", 1795381200, 123'456'000},
      {"2026-11-22T21:00:00.123456789Z", 1795381200, 123'456'789},
      {"2026-11-22T21:00:00.1234567891234Z", 1795381200, 123'456'789},
      {"2026-11-22T22:00:00+01:00", 1795381200, 0},
      {"2026-11-22T15:30:00-05:30", 1795381200, 0},
      {"2026-11-23T02:45:00.25+05:45", 1795381200, 250'000'000},
      {"2024-02-29T12:00:00Z", 1709208000, 0},
      {"2000-02-29T00:00:00Z", 951782400, 0},
      {"1969-12-31T23:59:59.5Z", -1, 500'000'000},
  }));
  CAPTURE(text);
  auto r = parseRfc3339(text);
  REQUIRE(r.ok());
  CHECK(*r == at(secs, nanos));
}

TEST_CASE("RFC 3339 parsing refuses malformed or out-of-range text", "[base][rfc3339]") {
  auto text = GENERATE(as<std::string>{},
                       "",                            // empty
                       "2026-11-22",                  // date only
                       "2026-11-22 21:00:00Z",        // space for T
                       "2026-11-22T21:00:00",         // no zone
                       "2026-11-22T21:00Z",           // no seconds
                       "2026-11-22T21:00:00.Z",       // '.' without digits
                       "2026-11-22T21:00:00,5Z",      // comma fraction
                       "2026-13-22T21:00:00Z",        // month 13
                       "2026-00-22T21:00:00Z",        // month 0
                       "2026-11-31T21:00:00Z",        // November 31
                       "2026-02-29T00:00:00Z",        // not a leap year
                       "1900-02-29T00:00:00Z",        // century, not leap
                       "2026-11-00T21:00:00Z",        // day 0
                       "2026-11-22T24:00:00Z",        // hour 24
                       "2026-11-22T21:60:00Z",        // minute 60
                       "2026-12-31T23:59:60Z",        // leap second (Go rejects it too)
                       "2026-11-22T21:00:00+1:00",    // short offset
                       "2026-11-22T21:00:00+0100",    // offset without colon
                       "2026-11-22T21:00:00+24:00",   // offset hour 24
                       "2026-11-22T21:00:00+01:60",   // offset minute 60
                       "2026-11-22T21:00:00Zjunk",    // trailing text
                       "2026-11-22T21:00:00+01:00 ",  // trailing blank
                       " 2026-11-22T21:00:00Z",       // leading blank
                       "+2026-11-22T21:00:00Z",       // sign
                       "20261122T210000Z",            // basic ISO 8601 form
                       "0001-01-01T00:00:00Z",        // valid text, outside the clock
                       "9999-12-31T23:59:59Z");       // valid text, outside the clock
  CAPTURE(text);
  auto r = parseRfc3339(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
}

TEST_CASE("RFC 3339 format then parse is the identity at the format's precision",
          "[base][rfc3339]") {
  const auto t = at(1795381200, 123'456'789);
  CHECK(*parseRfc3339(formatRfc3339(t, Rfc3339Precision::kSeconds)) == at(1795381200));
  CHECK(*parseRfc3339(formatRfc3339(t, Rfc3339Precision::kMillis)) == at(1795381200, 123'000'000));
  CHECK(*parseRfc3339(formatRfc3339(t, Rfc3339Precision::kMicros)) == at(1795381200, 123'456'000));
}
