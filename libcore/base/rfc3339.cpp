#include "libcore/base/rfc3339.hpp"

#include <cstdint>
#include <cstdio>

namespace kc {

namespace {

using namespace std::chrono;

// Reads `count` decimal digits at `pos`, or -1 when any is missing.
int digits(std::string_view s, std::size_t pos, std::size_t count) noexcept {
  if (pos + count > s.size()) {
    return -1;
  }
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      return -1;
    }
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

bool charAt(std::string_view s, std::size_t pos, char lower, char upper = 0) noexcept {
  return pos < s.size() && (s[pos] == lower || (upper != 0 && s[pos] == upper));
}

Error invalid(std::string_view text, std::string_view what) {
  return makeError(kc::errc::kInvalid,
                   "RFC 3339 time '" + std::string(text) + "': " + std::string(what));
}

}  // namespace

std::string formatRfc3339(system_clock::time_point t, Rfc3339Precision precision) {
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{duration_cast<nanoseconds>(t - day)};
  char buf[48];
  int n =
      std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                    static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                    static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                    static_cast<int>(hms.seconds().count()));
  const auto subsecond = hms.subseconds().count();  // nanoseconds
  switch (precision) {
    case Rfc3339Precision::kSeconds:
      break;
    case Rfc3339Precision::kMillis:
      n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ".%03d",
                         static_cast<int>(subsecond / 1'000'000));
      break;
    case Rfc3339Precision::kMicros:
      n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ".%06d",
                         static_cast<int>(subsecond / 1'000));
      break;
  }
  return std::string(buf, static_cast<std::size_t>(n)) + "Z";
}

Result<system_clock::time_point> parseRfc3339(std::string_view s) {
  const int y = digits(s, 0, 4);
  const int mo = digits(s, 5, 2);
  const int d = digits(s, 8, 2);
  if (y < 0 || mo < 0 || d < 0 || !charAt(s, 4, '-') || !charAt(s, 7, '-')) {
    return invalid(s, "date is not YYYY-MM-DD");
  }
  if (!charAt(s, 10, 'T', 't')) {
    return invalid(s, "date and time are not separated by 'T'");
  }
  const int h = digits(s, 11, 2);
  const int mi = digits(s, 14, 2);
  const int sec = digits(s, 17, 2);
  if (h < 0 || mi < 0 || sec < 0 || !charAt(s, 13, ':') || !charAt(s, 16, ':')) {
    return invalid(s, "time is not HH:MM:SS");
  }
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) {
    return invalid(s, "no such date");
  }
  if (h > 23 || mi > 59 || sec > 59) {
    return invalid(s, "hour, minute or second out of range");
  }
  std::size_t pos = 19;
  nanoseconds fraction{0};
  if (charAt(s, pos, '.')) {
    ++pos;
    std::int64_t ns = 0;
    std::size_t used = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (used < 9) {
        ns = ns * 10 + (s[pos] - '0');
      }
      ++used;
      ++pos;
    }
    if (used == 0) {
      return invalid(s, "no digits after '.'");
    }
    for (std::size_t i = used; i < 9; ++i) {
      ns *= 10;
    }
    fraction = nanoseconds{ns};
  }
  minutes offset{0};
  if (charAt(s, pos, 'Z', 'z') && pos + 1 == s.size()) {
    // UTC
  } else if ((charAt(s, pos, '+') || charAt(s, pos, '-')) && pos + 6 == s.size() &&
             charAt(s, pos + 3, ':')) {
    const int oh = digits(s, pos + 1, 2);
    const int om = digits(s, pos + 4, 2);
    if (oh < 0 || om < 0 || oh > 23 || om > 59) {
      return invalid(s, "offset is not +HH:MM or -HH:MM in range");
    }
    offset = hours{oh} + minutes{om};
    if (s[pos] == '-') {
      offset = -offset;
    }
  } else {
    return invalid(s, "must end in 'Z' or a +HH:MM / -HH:MM offset");
  }
  // Whole seconds first: system_clock counts nanoseconds in 64 bits, so it spans only the years
  // 1678..2261, while the text may name any year 0000..9999.
  const sys_seconds whole = sys_days{ymd} + hours{h} + minutes{mi} + seconds{sec} - offset;
  const auto lowest = ceil<seconds>(system_clock::time_point::min()) + seconds{1};
  const auto highest = floor<seconds>(system_clock::time_point::max()) - seconds{1};
  if (whole < lowest || whole > highest) {
    return invalid(s, "outside the years this clock can represent");
  }
  return time_point_cast<system_clock::duration>(whole) +
         duration_cast<system_clock::duration>(fraction);
}

}  // namespace kc
