#pragma once
// A gRPC server on a unix socket, with what every node daemon needs around it: the socket
// path checked before binding (a clear error instead of gRPC's null server), a stale socket
// from a previous run removed (never a file that is not a socket), the socket's identity kept
// so the daemon can tell when someone deleted or replaced it (kubelet deletes every socket in
// its device-plugin directory when it restarts), and a bounded, idempotent stop for SIGTERM.

#include <grpcpp/server.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace grpc {
class Service;
class CallbackGenericService;
}  // namespace grpc

namespace kc::grpcx {

struct UnixServerOptions {
  std::string path;               // absolute path of the socket file
  int maxReceiveBytes = 4 << 20;  // request size limit
  unsigned socketMode = 0600;     // who may connect (kubelet runs as root)
};

class UnixServer {
 public:
  explicit UnixServer(UnixServerOptions options);
  // Stops with no grace period if still running.
  ~UnixServer();
  UnixServer(const UnixServer&) = delete;
  UnixServer& operator=(const UnixServer&) = delete;

  // Services are owned by the caller and must outlive the server. Register before start().
  void addService(grpc::Service* service);
  // Serves every method no registered service has (a proxy: rt-kubelet-shim). At most one.
  void setGenericService(grpc::CallbackGenericService* service);

  // Binds and starts serving. Errors: "invalid" (path not absolute, too long for a unix
  // socket, parent directory missing, an existing non-socket file at the path), "unavailable"
  // (gRPC could not bind). Calling start() again after stop() starts a fresh server (kubelet
  // restarted and deleted our socket: the daemon serves again on a new socket).
  Status start();

  // Stops accepting, lets in-flight calls finish for up to `grace`, then cancels them; removes
  // the socket file if it is still the one this server created. Idempotent.
  void stop(std::chrono::milliseconds grace);

  bool running() const;
  const std::string& path() const { return opts_.path; }

  // True when the socket file this server created is still at path() (not deleted, not
  // replaced by another process's socket). False when not running.
  bool socketPresent() const;

 private:
  UnixServerOptions opts_;
  std::vector<grpc::Service*> services_;
  grpc::CallbackGenericService* generic_ = nullptr;
  mutable std::mutex mu_;  // guards server_, inode_, device_
  std::unique_ptr<grpc::Server> server_;
  ino_t inode_ = 0;
  dev_t device_ = 0;
};

}  // namespace kc::grpcx
