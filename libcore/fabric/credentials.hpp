#pragma once
// Chassis credentials, read from a file or a Kubernetes Secret mount. The password never
// leaves this type in printable form: there is no operator<< and describe() redacts it.

#include <string>

#include "libcore/base/result.hpp"

namespace kc::fabric {

struct Credentials {
  std::string username;
  std::string password;

  bool empty() const { return username.empty(); }
  // "user=<name> password=<redacted>" for logs.
  std::string describe() const;
};

// `path` is either
//  - a directory (a mounted Secret) holding files `username` and `password`, or
//  - a file whose first line is `user:password`.
// Trailing newlines are stripped. Errors never contain the secret's content.
Result<Credentials> loadCredentials(const std::string& path);

// Parses "user:password" (CLI flags). The user must be non-empty and contain no ':'.
Result<Credentials> parseUserPass(const std::string& text);

}  // namespace kc::fabric
