#include "services/bridge-pod/multipart.hpp"

#include <random>

#include "libcore/net/http.hpp"

namespace kc::bridge::pod {

std::string MimePart::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (kc::net::iequals(n, name)) {
      return v;
    }
  }
  return {};
}

std::string buildMultipart(const std::string& boundary, const std::vector<MimePart>& parts) {
  std::string out;
  for (const MimePart& p : parts) {
    out += "--" + boundary + "\r\n";
    for (const auto& [n, v] : p.headers) {
      out += n + ": " + v + "\r\n";
    }
    out += "\r\n" + p.body + "\r\n";
  }
  out += "--" + boundary + "--\r\n";
  return out;
}

Result<std::string> multipartBoundary(std::string_view contentType) {
  const auto at = contentType.find("boundary=");
  if (at == std::string_view::npos) {
    return makeError(errc::kInvalid,
                     "Content-Type '" + std::string(contentType) + "' has no boundary");
  }
  std::string b(contentType.substr(at + 9));
  if (auto semi = b.find(';'); semi != std::string::npos) {
    b = b.substr(0, semi);
  }
  while (!b.empty() && (b.back() == ' ' || b.back() == '\t')) {
    b.pop_back();
  }
  if (b.size() >= 2 && b.front() == '"' && b.back() == '"') {
    b = b.substr(1, b.size() - 2);
  }
  if (b.empty() || b.size() > 70) {
    return makeError(errc::kInvalid, "multipart boundary must be 1..70 characters");
  }
  return b;
}

namespace {

// The next "<prefix>--boundary" that is a real delimiter: followed by CRLF or "--" (a longer
// boundary starting with this one, e.g. a nested part's, is not).
std::size_t findDelimiter(std::string_view body, std::string_view delimiter, std::size_t from) {
  for (auto at = body.find(delimiter, from); at != std::string_view::npos;
       at = body.find(delimiter, at + 1)) {
    const auto after = body.substr(at + delimiter.size(), 2);
    if (after == "\r\n" || after == "--") {
      return at;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Result<std::vector<MimePart>> parseMultipart(std::string_view body, const std::string& boundary) {
  const std::string delim = "--" + boundary;
  std::vector<MimePart> parts;
  std::size_t pos = 0;  // the first delimiter: at the start, or after a preamble and CRLF
  if (findDelimiter(body, delim, 0) != 0) {
    pos = findDelimiter(body, "\r\n" + delim, 0);
    if (pos == std::string_view::npos) {
      return makeError(errc::kInvalid, "multipart body without its first boundary");
    }
    pos += 2;
  }
  for (;;) {
    pos += delim.size();
    if (body.substr(pos, 2) == "--") {
      return parts;  // closing delimiter
    }
    const auto lineEnd = body.find("\r\n", pos);
    if (lineEnd == std::string_view::npos) {
      return makeError(errc::kInvalid, "multipart boundary line not ended");
    }
    const auto headersEnd = body.find("\r\n\r\n", lineEnd);
    // A part without headers starts with the blank line at once.
    const bool noHeaders = body.substr(lineEnd, 4) == "\r\n\r\n";
    if (headersEnd == std::string_view::npos) {
      return makeError(errc::kInvalid, "multipart part without the blank line after its headers");
    }
    MimePart part;
    if (!noHeaders) {
      std::string_view hs = body.substr(lineEnd + 2, headersEnd - lineEnd - 2);
      std::size_t h = 0;
      while (h < hs.size()) {
        auto e = hs.find("\r\n", h);
        std::string_view line =
            hs.substr(h, e == std::string_view::npos ? std::string_view::npos : e - h);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) {
          return makeError(errc::kInvalid, "multipart header line without ':'");
        }
        std::string value(line.substr(colon + 1));
        while (!value.empty() && value.front() == ' ') {
          value.erase(0, 1);
        }
        part.headers.emplace_back(std::string(line.substr(0, colon)), value);
        if (e == std::string_view::npos) {
          break;
        }
        h = e + 2;
      }
    }
    const auto start = headersEnd + 4;
    const auto next = findDelimiter(body, "\r\n" + delim, start);
    if (next == std::string_view::npos) {
      return makeError(errc::kInvalid, "multipart body without its closing boundary");
    }
    part.body = std::string(body.substr(start, next - start));
    parts.push_back(std::move(part));
    pos = next + 2;
  }
}

std::string newBoundary() {
  static thread_local std::mt19937_64 gen(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string b = "kc-";
  for (int i = 0; i < 32; ++i) {
    b += hex[gen() & 15];
  }
  return b;
}

std::string xmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace kc::bridge::pod
