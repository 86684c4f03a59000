#include "libcore/fabric/credentials.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kc::fabric {
namespace {

constexpr std::uintmax_t kMaxSecretBytes = 64 * 1024;

Result<std::string> readSmallFile(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return makeError(kc::errc::kInvalid,
                     "cannot read credentials file " + path.string() + ": " + ec.message());
  }
  if (size > kMaxSecretBytes) {
    return makeError(kc::errc::kInvalid,
                     "credentials file " + path.string() + " is larger than 64 KiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(kc::errc::kInvalid, "cannot open credentials file " + path.string());
  }
  std::ostringstream out;
  out << in.rdbuf();
  std::string text = out.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

}  // namespace

std::string Credentials::describe() const {
  return "user=" + username + " password=<redacted>";
}

Result<Credentials> parseUserPass(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0) {
    return makeError(kc::errc::kInvalid,
                     "credentials must have the form user:password (user non-empty)");
  }
  Credentials creds{text.substr(0, colon), text.substr(colon + 1)};
  if (creds.username.find_first_of("\r\n") != std::string::npos ||
      creds.password.find_first_of("\r\n") != std::string::npos) {
    return makeError(kc::errc::kInvalid, "credentials must not contain line breaks");
  }
  return creds;
}

Result<Credentials> loadCredentials(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) {
    auto user = readSmallFile(p / "username");
    if (!user) {
      return user.error();
    }
    auto pass = readSmallFile(p / "password");
    if (!pass) {
      return pass.error();
    }
    if (user->empty()) {
      return makeError(kc::errc::kInvalid, "credentials directory " + path + ": username is empty");
    }
    return Credentials{std::move(*user), std::move(*pass)};
  }
  auto text = readSmallFile(p);
  if (!text) {
    return text.error();
  }
  const auto eol = text->find('\n');
  auto parsed = parseUserPass(text->substr(0, eol));
  if (!parsed) {
    return makeError(kc::errc::kInvalid,
                     "credentials file " + path + ": " + parsed.error().message);
  }
  return parsed;
}

}  // namespace kc::fabric
