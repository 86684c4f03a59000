// Temporary placeholder so dependants can link against the API; the Beast implementation
// replaces it in the next commit.
#include "libcore/net/http_client.hpp"

namespace kc::net {

void CancelToken::cancel() {
  std::function<void()> hook;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    hook = hook_;
  }
  if (hook) {
    hook();
  }
}
void CancelToken::setHook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  hook_ = std::move(hook);
}
void CancelToken::clearHook() {
  std::lock_guard lock(mutex_);
  hook_ = nullptr;
}

class HttpClient::Impl {
 public:
  Url url;
};

Result<std::unique_ptr<HttpClient>> HttpClient::create(ClientOptions) {
  return makeError("unavailable", "HttpClient not implemented yet");
}
HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;
Result<Response> HttpClient::request(std::string_view, std::string_view, std::string, Headers, RequestOptions) {
  return makeError("unavailable", "HttpClient not implemented yet");
}
Status HttpClient::stream(std::string_view, std::string_view, std::string, Headers, const StreamCallbacks&, StreamOptions) {
  return makeError("unavailable", "HttpClient not implemented yet");
}
const Url& HttpClient::baseUrl() const { return impl_->url; }
void HttpClient::closeIdleConnections() {}

}  // namespace kc::net
