#include "libcore/grpc/unix_server.hpp"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace kc::grpcx {
namespace {

Status checkPath(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty() || path.front() != '/') {
    return makeError(kc::errc::kInvalid, "socket path '" + path + "' is not absolute");
  }
  constexpr std::size_t kMax = sizeof(sockaddr_un::sun_path) - 1;
  if (path.size() > kMax) {
    return makeError(kc::errc::kInvalid,
                     "socket path '" + path + "' is " + std::to_string(path.size()) +
                         " bytes; a unix socket path holds at most " + std::to_string(kMax));
  }
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec)) {
    return makeError(kc::errc::kInvalid,
                     "socket directory '" + parent.string() + "' does not exist");
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return makeError(kc::errc::kInvalid,
                       "'" + path + "' exists and is not a socket; not removing it");
    }
    // A socket left by an earlier run (or by a crashed one): nobody can be using it through
    // this path once we bind a new one, so it goes.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return makeError(kc::errc::kInvalid,
                       "cannot remove stale socket '" + path + "': " + std::strerror(errno));
    }
  }
  return okStatus();
}

}  // namespace

UnixServer::UnixServer(UnixServerOptions options) : opts_(std::move(options)) {}

UnixServer::~UnixServer() {
  stop(std::chrono::milliseconds(0));
}

void UnixServer::addService(grpc::Service* service) {
  services_.push_back(service);
}

void UnixServer::setGenericService(grpc::CallbackGenericService* service) {
  generic_ = service;
}

Status UnixServer::start() {
  std::lock_guard lock(mu_);
  if (server_) {
    return okStatus();
  }
  if (auto s = checkPath(opts_.path); !s) {
    return s;
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + opts_.path, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(opts_.maxReceiveBytes);
  for (grpc::Service* s : services_) {
    builder.RegisterService(s);
  }
  if (generic_ != nullptr) {
    builder.RegisterCallbackGenericService(generic_);
  }
  server_ = builder.BuildAndStart();
  if (!server_) {
    return makeError(kc::errc::kUnavailable, "gRPC could not serve on unix:" + opts_.path);
  }
  ::chmod(opts_.path.c_str(), static_cast<mode_t>(opts_.socketMode));
  struct stat st {};
  if (::lstat(opts_.path.c_str(), &st) == 0) {
    inode_ = st.st_ino;
    device_ = st.st_dev;
  }
  return okStatus();
}

void UnixServer::stop(std::chrono::milliseconds grace) {
  std::unique_ptr<grpc::Server> server;
  ino_t inode = 0;
  dev_t device = 0;
  {
    std::lock_guard lock(mu_);
    server = std::move(server_);
    inode = inode_;
    device = device_;
    inode_ = 0;
    device_ = 0;
  }
  if (!server) {
    return;
  }
  server->Shutdown(std::chrono::system_clock::now() + grace);
  server->Wait();
  struct stat st {};
  if (::lstat(opts_.path.c_str(), &st) == 0 && st.st_ino == inode && st.st_dev == device) {
    ::unlink(opts_.path.c_str());
  }
}

bool UnixServer::running() const {
  std::lock_guard lock(mu_);
  return server_ != nullptr;
}

bool UnixServer::socketPresent() const {
  std::lock_guard lock(mu_);
  if (!server_) {
    return false;
  }
  struct stat st {};
  return ::lstat(opts_.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == inode_ &&
         st.st_dev == device_;
}

}  // namespace kc::grpcx
