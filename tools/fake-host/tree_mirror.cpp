#include "tools/fake-host/tree_mirror.hpp"

#include <fstream>
#include <iterator>

#include "libcore/base/error_codes.hpp"

namespace kc::fakehost {
namespace {

namespace fs = std::filesystem;

Error fsError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return makeError(errc::kInternal, what + " " + path.string() + ": " + ec.message());
}

Result<std::string> readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(errc::kNotFound, "cannot read " + path.string());
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

fs::file_type typeOf(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type();  // not_found when absent
}

bool present(const fs::path& path) {
  const fs::file_type t = typeOf(path);
  return t != fs::file_type::not_found && t != fs::file_type::none;
}

// Puts what `make` creates at `scratch` in place of `target` in one rename. A directory in the
// way (rename cannot replace one with a file) is removed first.
template <typename Make>
Status replaceWith(const fs::path& target, const fs::path& scratch, Make make) {
  std::error_code ec;
  fs::remove_all(scratch, ec);
  if (Status s = make(scratch); !s) {
    return s;
  }
  if (typeOf(target) == fs::file_type::directory) {
    fs::remove_all(target, ec);
    if (ec) {
      return fsError("remove", target, ec);
    }
  }
  fs::rename(scratch, target, ec);
  return ec ? Status(fsError("rename into", target, ec)) : okStatus();
}

Status writeTo(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  return out ? okStatus() : Status(makeError(errc::kInternal, "cannot write " + path.string()));
}

Status mirrorLink(const fs::path& from, const fs::path& to, const fs::path& scratch) {
  std::error_code ec;
  const fs::path want = fs::read_symlink(from, ec);
  if (ec) {
    return fsError("read link", from, ec);
  }
  if (typeOf(to) == fs::file_type::symlink && fs::read_symlink(to, ec) == want && !ec) {
    return okStatus();
  }
  return replaceWith(to, scratch, [&](const fs::path& tmp) -> Status {
    std::error_code mk;
    fs::create_symlink(want, tmp, mk);
    return mk ? Status(fsError("link", tmp, mk)) : okStatus();
  });
}

Status mirrorFile(const fs::path& from, const fs::path& to, bool writtenSinceLook,
                  const fs::path& scratch) {
  auto want = readText(from);
  if (!want) {
    return want.error();
  }
  if (typeOf(to) == fs::file_type::regular) {
    auto have = readText(to);
    if (have && (*have == *want || (want->empty() && !have->empty() && writtenSinceLook))) {
      return okStatus();
    }
  }
  return replaceWith(to, scratch, [&](const fs::path& tmp) { return writeTo(tmp, *want); });
}

Status mirrorDirectory(const fs::path& to) {
  std::error_code ec;
  if (typeOf(to) == fs::file_type::directory) {
    return okStatus();
  }
  if (present(to)) {
    fs::remove(to, ec);
  }
  fs::create_directory(to, ec);
  return ec ? Status(fsError("create", to, ec)) : okStatus();
}

}  // namespace

Result<std::set<std::string>> pullWrites(const fs::path& fresh, const fs::path& live) {
  std::set<std::string> pulled;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fresh, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry;
    if (it->symlink_status(entry).type() != fs::file_type::regular ||
        fs::file_size(it->path(), entry) != 0 || entry) {
      continue;
    }
    const fs::path rel = it->path().lexically_relative(fresh);
    if (typeOf(live / rel) != fs::file_type::regular) {
      continue;
    }
    auto text = readText(live / rel);
    if (text && !text->empty()) {
      if (Status s = writeTo(it->path(), *text); !s) {
        return s.error();
      }
      pulled.insert(rel.string());
    }
  }
  if (ec) {
    return fsError("list", fresh, ec);
  }
  return pulled;
}

Result<std::set<std::string>> listTree(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.insert(it->path().lexically_relative(dir).string());
  }
  if (ec) {
    return fsError("list", dir, ec);
  }
  return out;
}

Status mirrorTree(const fs::path& fresh, const fs::path& live, const std::set<std::string>& before,
                  const std::set<std::string>& pulled, const fs::path& scratch) {
  if (Status s = mirrorDirectory(live); !s) {
    return s;
  }
  // What fresh holds, parents before children (directory iteration is pre-order).
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fresh, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(fresh);
    std::error_code entry;
    const fs::file_type type = it->symlink_status(entry).type();
    Status s = okStatus();
    if (type == fs::file_type::symlink) {
      s = mirrorLink(it->path(), live / rel, scratch);
    } else if (type == fs::file_type::directory) {
      s = mirrorDirectory(live / rel);
    } else if (type == fs::file_type::regular) {
      s = mirrorFile(it->path(), live / rel, pulled.count(rel.string()) == 0, scratch);
    }
    if (!s) {
      return s;
    }
  }
  if (ec) {
    return fsError("list", fresh, ec);
  }
  // Then what the command took away; children sort after their parents, so go backwards.
  for (auto it = before.rbegin(); it != before.rend(); ++it) {
    if (!present(fresh / *it) && present(live / *it)) {
      fs::remove_all(live / *it, ec);
      if (ec) {
        return fsError("remove", live / *it, ec);
      }
    }
  }
  return okStatus();
}

}  // namespace kc::fakehost
