// libcore/base/base64: RFC 4648 section 10 test vectors, binary round trips, and every kind of
// malformed input the strict decoder must refuse.
#include "libcore/base/base64.hpp"

#include <catch2/catch.hpp>
#include <string>

using kc::base64Decode;
using kc::Base64DecodeOptions;
using kc::base64Encode;

TEST_CASE("base64 matches the RFC 4648 test vectors both ways", "[base][base64]") {
  auto [bytes, text] = GENERATE(table<std::string, std::string>({
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
      {"user:password", "dXNlcjpwYXNzd29yZA=="},
  }));
  CAPTURE(bytes, text);
  CHECK(base64Encode(bytes) == text);
  auto decoded = base64Decode(text);
  REQUIRE(decoded.ok());
  CHECK(*decoded == bytes);
}

TEST_CASE("base64 round-trips every byte value and lengths across padding cases",
          "[base][base64]") {
  std::string all;
  for (int b = 0; b < 256; ++b) {
    all.push_back(static_cast<char>(b));
  }
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    const std::string bytes = all.substr(all.size() - len);
    CAPTURE(len);
    const std::string text = base64Encode(bytes);
    CHECK(text.size() == 4 * ((len + 2) / 3));
    auto back = base64Decode(text);
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
  // '+' and '/' both appear: 0xfb 0xff encodes to "+/8=".
  CHECK(base64Encode("\xfb\xff") == "+/8=");
  CHECK(*base64Decode("+/8=") == "\xfb\xff");
}

TEST_CASE("strict base64 decoding refuses malformed text", "[base][base64]") {
  auto [text, why] = GENERATE(table<std::string, std::string>({
      {"Zg=", "length not a multiple of 4"},
      {"Zm9", "missing padding"},
      {"Z", "single character"},
      {"Zm9v!", "character outside the alphabet"},
      {"Zm$v", "character outside the alphabet"},
      {"Zm-v", "URL-safe alphabet is not the standard one"},
      {"Zm_v", "URL-safe alphabet is not the standard one"},
      {"Zg=a", "padding followed by data"},
      {"Z===", "three padding characters"},
      {"====", "only padding"},
      {"Zg==Zg==", "padding in the middle"},
      {"Zh==", "non-zero bits before '=='"},
      {"Zm9=", "non-zero bits before '='"},
      {" Zm9v", "leading blank"},
      {"Zm9v ", "trailing blank"},
      {"Zm\n9v", "line break without skipLineBreaks"},
      {std::string("Zm\0v", 4), "NUL byte"},
  }));
  CAPTURE(text, why);
  auto r = base64Decode(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  CHECK(r.error().message.rfind("base64: ", 0) == 0);
}

TEST_CASE("lenient base64 options accept wrapped and unpadded text, nothing more",
          "[base][base64]") {
  const Base64DecodeOptions wrapped{.skipLineBreaks = true};
  CHECK(*base64Decode("Zm9v\r\nYmFy\n", wrapped) == "foobar");
  CHECK(*base64Decode("Zm\n9v\nYg==", wrapped) == "foob");
  CHECK_FALSE(base64Decode("Zm9v YmFy", wrapped).ok());

  const Base64DecodeOptions unpadded{.paddingOptional = true};
  CHECK(*base64Decode("Zg", unpadded) == "f");
  CHECK(*base64Decode("Zm8", unpadded) == "fo");
  CHECK(*base64Decode("Zm8=", unpadded) == "fo");
  CHECK_FALSE(base64Decode("Zm9vY", unpadded).ok());  // 1 leftover character is never valid
  CHECK_FALSE(base64Decode("Zg=", unpadded).ok());    // partly padded
  CHECK_FALSE(base64Decode("Zh", unpadded).ok());     // still canonical-only
}
