#pragma once
// Base64 (RFC 4648 section 4, standard alphabet with '=' padding) on OpenSSL's EVP block coder.
// Used for HTTP Basic credentials, kubeconfig *-data fields and opaque continue tokens.

#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc {

// Encodes bytes as padded standard base64 ("hi" -> "aGk=").
std::string base64Encode(std::string_view bytes);

struct Base64DecodeOptions {
  // Skip CR and LF anywhere in the text (wrapped PEM-style input, YAML folded scalars).
  bool skipLineBreaks = false;
  // Accept text whose final '=' padding was left off ("aGk" as "aGk=").
  bool paddingOptional = false;
};

// Decodes standard base64. Strict by default: length a multiple of 4, only the alphabet,
// '=' only as one or two final characters, and the unused bits before padding zero (so every
// accepted text is the one encoding of its bytes). Anything else is an error with code
// "invalid" that names the offending position.
Result<std::string> base64Decode(std::string_view text, Base64DecodeOptions options = {});

}  // namespace kc
