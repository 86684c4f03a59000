#pragma once
// MIME multipart bodies (RFC 2046 section 5.1) as LSF Application Center's web services use
// them: multipart/mixed requests with nested parts, multipart replies for file downloads.

#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::bridge::pod {

struct MimePart {
  std::vector<std::pair<std::string, std::string>> headers;  // name, value (as written)
  std::string body;
  std::string header(std::string_view name) const;  // case-insensitive, "" when absent
};

// `--boundary` delimited parts, CRLF line ends, closing `--boundary--`.
std::string buildMultipart(const std::string& boundary, const std::vector<MimePart>& parts);
// The boundary parameter of a Content-Type ("multipart/mixed; boundary=abc" -> "abc"; quotes
// removed); invalid when there is none.
Result<std::string> multipartBoundary(std::string_view contentType);
// The parts of a body; invalid when a delimiter or the closing delimiter is missing or a part
// has no blank line after its headers.
Result<std::vector<MimePart>> parseMultipart(std::string_view body, const std::string& boundary);
// A fresh boundary (random hex), unlikely in any body.
std::string newBoundary();
// &, <, >, ", ' as XML entities.
std::string xmlEscape(std::string_view text);

}  // namespace kc::bridge::pod
