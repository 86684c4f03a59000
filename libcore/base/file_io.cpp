#include "libcore/base/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "libcore/base/error_codes.hpp"

namespace kc {
namespace {

// Closes a file descriptor on scope exit unless closed (and checked) before.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Error ioError(const std::string& what, const std::string& path, int err) {
  const char* code = (err == ENOENT || err == ENOTDIR) ? errc::kNotFound
                     : (err == EACCES || err == EPERM) ? errc::kForbidden
                                                       : errc::kUnavailable;
  return makeError(code, "cannot " + what + " " + path + ": " + std::strerror(err));
}

// The regular file's bytes when at most `limit`; errc::kTooLarge beyond (found by reading one
// byte more). O_NOFOLLOW | O_NONBLOCK: a link or FIFO planted under our name is refused, not
// followed or waited on.
Result<std::string> readFileBoundedImpl(const std::string& path, std::size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return ioError("open", path, errno);
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return makeError(errc::kInvalid, path + " is not a regular file");
  }
  std::string out(limit + 1, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ioError("read", path, errno);
    }
    if (n == 0) {
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  if (got > limit) {
    return makeError(errc::kTooLarge, path + " is over " + std::to_string(limit) + " bytes");
  }
  out.resize(got);
  return out;
}

Status writeAll(int fd, std::string_view text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return ioError("write", path, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return okStatus();
}

Status ensureDirImpl(const std::string& dir, unsigned mode) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    return okStatus();
  }
  std::filesystem::create_directories(dir, ec);
  if (!ec) {
    // The mode runtimes expect whatever the umask (they only read).
    std::filesystem::permissions(dir, std::filesystem::perms(mode), ec);
  }
  if (ec) {
    return makeError(errc::kUnavailable, "cannot create " + dir + ": " + ec.message());
  }
  return okStatus();
}

// Makes a rename or unlink in `dir` durable.
Status syncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ioError("open", dir, errno);
  }
  FdCloser closer(fd);
  if (::fsync(fd) != 0) {
    return ioError("fsync", dir, errno);
  }
  return okStatus();
}

// A hidden temp file beside `path` ("." + name + ".tmp-XXXXXX": runtimes only load *.json and
// *.yaml, tags() skips names starting with '.'), filled, synced, then renamed over `path`.
Status replaceAtomicallyImpl(const std::string& dir, const std::string& fileName,
                             std::string_view text, unsigned mode) {
  const std::string path = dir + "/" + fileName;
  std::string tmp = dir + "/." + fileName + ".tmp-XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    return ioError("create a temp file in", dir, errno);
  }
  FdCloser closer(fd);
  auto fillAndRename = [&]() -> Status {
    if (::fchmod(fd, static_cast<::mode_t>(mode)) != 0) {
      return ioError("chmod", tmp, errno);
    }
    if (Status written = writeAll(fd, text, tmp); !written) {
      return written;
    }
    if (::fsync(fd) != 0) {
      return ioError("fsync", tmp, errno);
    }
    if (::close(closer.release()) != 0) {
      return ioError("close", tmp, errno);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      return ioError("rename a temp file to", path, errno);
    }
    return okStatus();
  };
  if (Status done = fillAndRename(); !done) {
    ::unlink(tmp.c_str());
    return done;
  }
  return syncDir(dir);
}

}  // namespace

Result<std::string> readFileBounded(const std::string& path, std::size_t limit) {
  return readFileBoundedImpl(path, limit);
}

Status replaceFileAtomically(const std::string& path, std::string_view text, unsigned mode) {
  const std::filesystem::path p(path);
  std::string dir = p.parent_path().string();
  if (dir.empty()) {
    dir = ".";
  }
  return replaceAtomicallyImpl(dir, p.filename().string(), text, mode);
}

Status removeFileDurably(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) {
      return okStatus();
    }
    return ioError("remove", path, errno);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return syncDir(dir.empty() ? "." : dir);
}

Status ensureDirectory(const std::string& dir, unsigned mode) {
  return ensureDirImpl(dir, mode);
}

}  // namespace kc
