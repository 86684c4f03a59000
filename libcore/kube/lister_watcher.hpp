#pragma once
// ListerWatcher: what an Informer needs from the API server, and nothing more (client-go's
// cache.ListerWatcher). One instance is bound to one resource in one namespace (or all);
// selectors, paging and the watch's resourceVersion come in through ListOptions per call.
//
// ClientListerWatcher is the real one, over a KubeClient. Tests feed an informer through
// kc::testing::FakeListerWatcher (tests/support/fakes/fake_lister_watcher.hpp) instead of
// starting the API server double.
//
// The LIST is a stream too: items are handed out one by one as they are parsed (a 50,000-pod
// LIST is never held as one body or one DOM), followed by the list's metadata.

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/kube/api_error.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"

namespace kc::net {
class CancelToken;
}  // namespace kc::net

namespace kc::kube {

class ListerWatcher {
 public:
  virtual ~ListerWatcher() = default;

  // One LIST page (opts.limit / opts.continueToken, selectors): every item goes to onItem,
  // then the page's metadata is returned (resourceVersion to watch from, continue token).
  // A continue token whose snapshot is gone fails with an expired error (410).
  virtual ApiResult<ListMeta> list(const ListOptions& opts,
                                   const std::function<void(nlohmann::json&&)>& onItem,
                                   net::CancelToken* cancel) = 0;

  // WATCH from opts.resourceVersion; onEvent per event (false stops). Returns ok when the
  // stream ended (timeoutSeconds, server close) or onEvent stopped; an error for a refused
  // watch (410 when the version is too old), a broken stream, or idleTimeout of silence
  // (0: none). cancel->cancel() from another thread ends a blocked call promptly.
  virtual ApiStatus watch(const ListOptions& opts, const std::function<bool(WatchEvent&&)>& onEvent,
                          net::CancelToken* cancel, std::chrono::milliseconds idleTimeout) = 0;
};

// LIST and WATCH of `resource` in `ns` ("" = all namespaces) through a KubeClient.
class ClientListerWatcher final : public ListerWatcher {
 public:
  ClientListerWatcher(KubeClient& client, GroupVersionResource resource, std::string ns)
      : client_(client), resource_(std::move(resource)), ns_(std::move(ns)) {}

  ApiResult<ListMeta> list(const ListOptions& opts,
                           const std::function<void(nlohmann::json&&)>& onItem,
                           net::CancelToken* cancel) override {
    return client_.listEach(resource_, ns_, opts, onItem, cancel);
  }
  ApiStatus watch(const ListOptions& opts, const std::function<bool(WatchEvent&&)>& onEvent,
                  net::CancelToken* cancel, std::chrono::milliseconds idleTimeout) override {
    return client_.watch(resource_, ns_, opts, onEvent, cancel, idleTimeout);
  }

 private:
  KubeClient& client_;
  GroupVersionResource resource_;
  std::string ns_;
};

}  // namespace kc::kube
