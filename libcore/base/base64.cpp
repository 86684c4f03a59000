#include "libcore/base/base64.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstddef>

namespace kc {

namespace {

// Value of a base64 alphabet character, or -1.
int sextet(char c) noexcept {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+') {
    return 62;
  }
  if (c == '/') {
    return 63;
  }
  return -1;
}

Error invalid(std::string message) {
  return makeError(kc::errc::kInvalid, "base64: " + std::move(message));
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  // EVP_EncodeBlock takes an int length: encode in chunks of whole 3-byte groups.
  constexpr std::size_t kChunk = 3 * (1u << 20);
  std::string out;
  out.resize(4 * ((bytes.size() + 2) / 3) + 1);  // + the NUL EVP_EncodeBlock writes
  std::size_t written = 0;
  for (std::size_t pos = 0; pos < bytes.size(); pos += kChunk) {
    const std::size_t n = std::min(kChunk, bytes.size() - pos);
    written += static_cast<std::size_t>(EVP_EncodeBlock(
        reinterpret_cast<unsigned char*>(out.data() + written),
        reinterpret_cast<const unsigned char*>(bytes.data() + pos), static_cast<int>(n)));
  }
  out.resize(written);
  return out;
}

Result<std::string> base64Decode(std::string_view text, Base64DecodeOptions options) {
  std::string clean;
  clean.reserve(text.size() + 3);
  for (const char c : text) {
    if (options.skipLineBreaks && (c == '\r' || c == '\n')) {
      continue;
    }
    clean.push_back(c);
  }
  if (options.paddingOptional && clean.size() % 4 >= 2 && clean.find('=') == std::string::npos) {
    clean.append(4 - clean.size() % 4, '=');
  }
  if (clean.size() % 4 != 0) {
    return invalid("length " + std::to_string(clean.size()) + " is not a multiple of 4");
  }
  // EVP_DecodeBlock reads '=' anywhere as a zero sextet and trims blanks: validate first.
  std::size_t padding = 0;
  while (padding < 2 && padding < clean.size() && clean[clean.size() - 1 - padding] == '=') {
    ++padding;
  }
  const std::size_t dataEnd = clean.size() - padding;
  for (std::size_t i = 0; i < dataEnd; ++i) {
    if (sextet(clean[i]) < 0) {
      return invalid("character " + std::to_string(i) + " is not in the alphabet");
    }
  }
  if (padding > 0) {
    // With one '=' the last data character carries 2 unused bits, with two '=' 4 unused bits.
    const int unusedMask = padding == 1 ? 0x3 : 0xF;
    if ((sextet(clean[dataEnd - 1]) & unusedMask) != 0) {
      return invalid("non-zero bits before the padding (not the canonical encoding)");
    }
  }
  std::string out(clean.size() / 4 * 3, '\0');
  std::size_t written = 0;
  constexpr std::size_t kChunk = 4 * (1u << 20);
  for (std::size_t pos = 0; pos < clean.size(); pos += kChunk) {
    const std::size_t n = std::min(kChunk, clean.size() - pos);
    const int got = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data() + written),
                                    reinterpret_cast<const unsigned char*>(clean.data() + pos),
                                    static_cast<int>(n));
    if (got < 0) {
      return invalid("rejected by the decoder");
    }
    written += static_cast<std::size_t>(got);
  }
  // EVP_DecodeBlock counts padding positions as decoded zero bytes.
  out.resize(written - padding);
  return out;
}

}  // namespace kc
