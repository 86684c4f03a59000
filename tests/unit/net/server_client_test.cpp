// HttpServer and HttpClient against each other (and against a raw socket where a proper client
// cannot misbehave enough). Everything binds port 0 on 127.0.0.1; no test sleeps idly: waits
// are on futures/conditions with generous upper bounds.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "libcore/net/http_client.hpp"
#include "libcore/net/http_server.hpp"
#include "tests/unit/net/raw_socket.hpp"

using namespace kc::net;
using namespace std::chrono_literals;

namespace {

Response echo(const Request& req) {
  nlohmann::json j{{"method", req.method},
                   {"path", req.path},
                   {"target", req.target},
                   {"body", req.body},
                   {"remote", req.remoteAddress}};
  nlohmann::json q = nlohmann::json::array();
  for (const auto& [k, v] : req.query) {
    q.push_back({k, v});
  }
  j["query"] = q;
  j["xtest"] = req.header("x-test").value_or("");
  return Response::json(200, j);
}

std::string errorCode(const Response& r) {
  return nlohmann::json::parse(r.body).value("error", "");
}

// Splits a byte string at seeded random positions (chunk boundaries inside events on purpose).
std::vector<std::string> randomPieces(const std::string& all, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> len(1, 97);
  std::vector<std::string> out;
  for (std::size_t off = 0; off < all.size();) {
    const std::size_t n = std::min(len(rng), all.size() - off);
    out.push_back(all.substr(off, n));
    off += n;
  }
  return out;
}

}  // namespace

TEST_CASE("routing: exact, prefix, fallback, 404, 405 and HEAD", "[net][server]") {
  HttpServer server;
  server.route("GET", "/a", [](const Request&) { return Response::text(200, "get-a"); });
  server.route("POST", "/a", [](const Request&) { return Response::text(201, "post-a"); });
  server.routePrefix("GET", "/p/",
                     [](const Request&) { return Response::text(200, "short-prefix"); });
  server.routePrefix("GET", "/p/long/",
                     [](const Request&) { return Response::text(200, "long-prefix"); });
  server.routePrefix("", "/any/",
                     [](const Request& r) { return Response::text(200, "any-" + r.method); });
  server.route("PUT", "/only-put", [](const Request&) { return Response::text(200, "put"); });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());

  auto [method, target, status, body] =
      GENERATE(table<std::string, std::string, unsigned, std::string>({
          {"GET", "/a", 200, "get-a"},
          {"POST", "/a", 201, "post-a"},
          {"GET", "/p/x", 200, "short-prefix"},
          {"GET", "/p/long/x", 200, "long-prefix"},
          {"DELETE", "/any/thing", 200, "any-DELETE"},
          {"HEAD", "/a", 200, ""},
          {"GET", "/missing", 404, ""},
          {"DELETE", "/a", 405, ""},
          {"GET", "/only-put", 405, ""},
      }));
  CAPTURE(method, target);
  auto r = (*client)->request(method, target);
  REQUIRE(r.ok());
  CHECK(r->status == status);
  if (status < 400) {
    CHECK(r->body == body);
  } else {
    CHECK(r->header("content-type") == "application/json");
    CHECK(errorCode(*r) == (status == 404 ? "not_found" : "method_not_allowed"));
  }
  if (method == "HEAD") {
    CHECK(r->header("content-length") == "5");  // length of the GET body, no body sent
  }
  if (status == 405 && target == "/a") {
    CHECK(r->header("allow") == "GET, POST");
  }
}

TEST_CASE("request fields: decoded path and query, headers, body, remote address",
          "[net][server]") {
  HttpServer server;
  server.route("POST", "/x y/z", echo);
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  auto r = (*client)->request("POST", "/x%20y/z?labelSelector=app%3Dweb&watch&x=1&x=2", "payload",
                              {{"X-Test", "hello"}, {"Content-Type", "text/plain"}});
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  auto j = nlohmann::json::parse(r->body);
  CHECK(j["path"] == "/x y/z");
  CHECK(j["target"] == "/x%20y/z?labelSelector=app%3Dweb&watch&x=1&x=2");
  CHECK(j["query"] ==
        nlohmann::json::parse(R"([["labelSelector","app=web"],["watch",""],["x","1"],["x","2"]])"));
  CHECK(j["body"] == "payload");
  CHECK(j["xtest"] == "hello");
  CHECK(j["remote"].get<std::string>().rfind("127.0.0.1:", 0) == 0);
}

TEST_CASE("fallback sees unrouted paths, handler exceptions become 500", "[net][server]") {
  HttpServer server;
  server.route("GET", "/boom",
               [](const Request&) -> Response { throw std::runtime_error("kaput"); });
  server.setFallback([](const Request& r) { return Response::text(200, "fallback " + r.path); });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  auto a = (*client)->request("GET", "/api/v1/pods");
  REQUIRE(a.ok());
  CHECK(a->body == "fallback /api/v1/pods");
  auto b = (*client)->request("GET", "/boom");
  REQUIRE(b.ok());
  CHECK(b->status == 500);
  CHECK(nlohmann::json::parse(b->body)["message"].get<std::string>().find("kaput") !=
        std::string::npos);
}

TEST_CASE("body limit: 413 by Content-Length and by chunked size, limit is configurable",
          "[net][server]") {
  ServerOptions so;
  so.bodyLimit = 1000;
  HttpServer server(so);
  server.route("POST", "/b",
               [](const Request& r) { return Response::text(200, std::to_string(r.body.size())); });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());

  auto ok = (*client)->request("POST", "/b", std::string(1000, 'a'));
  REQUIRE(ok.ok());
  CHECK(ok->body == "1000");

  auto tooBig = (*client)->request("POST", "/b", std::string(200'000, 'a'));
  REQUIRE(tooBig.ok());
  CHECK(tooBig->status == 413);
  CHECK(errorCode(*tooBig) == "too_large");

  // Chunked body: the size is only known while reading.
  test::RawSocket raw(server.port());
  REQUIRE(raw.connected());
  std::string chunked = "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) {
    chunked += "258\r\n" + std::string(600, 'c') + "\r\n";
  }
  chunked += "0\r\n\r\n";
  raw.send(chunked);
  const std::string answer = raw.readAll();
  CHECK(answer.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(answer.find("\"too_large\"") != std::string::npos);
}

TEST_CASE("malformed HTTP gets 400 with a JSON body and the connection closes", "[net][server]") {
  HttpServer server;
  server.route("GET", "/", [](const Request&) { return Response::text(200, "ok"); });
  REQUIRE(server.start().ok());
  auto garbage = GENERATE(as<std::string>{}, "GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nHost x\r\n\r\n",
                          "GET / HTTP/9.9\r\n\r\n", "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
                          "GET nopath HTTP/1.1\r\nHost: x\r\n\r\n");
  CAPTURE(garbage);
  test::RawSocket raw(server.port());
  REQUIRE(raw.connected());
  raw.send(garbage);
  bool closed = false;
  const std::string answer = raw.readAll(&closed);
  CHECK(answer.rfind("HTTP/1.1 400", 0) == 0);
  CHECK(answer.find("\"bad_request\"") != std::string::npos);
  CHECK(closed);
}

TEST_CASE("keep-alive: several requests reuse one connection", "[net][server][client]") {
  HttpServer server;
  std::mutex m;
  std::set<std::string> remotes;
  server.route("GET", "/k", [&](const Request& r) {
    std::lock_guard lock(m);
    remotes.insert(r.remoteAddress);
    return Response::text(200, "k");
  });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  for (int i = 0; i < 10; ++i) {
    auto r = (*client)->request("GET", "/k");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  CHECK(remotes.size() == 1);
  CHECK(server.openConnections() == 1);

  // Without keep-alive every request has its own connection.
  auto once = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl(), .keepAlive = false});
  REQUIRE(once.ok());
  for (int i = 0; i < 3; ++i) {
    auto r = (*once)->request("GET", "/k");
    REQUIRE(r.ok());
    CHECK(r->header("connection") == "close");
  }
  CHECK(remotes.size() == 4);
}

TEST_CASE("client retries once when the server closed an idle keep-alive connection",
          "[net][client]") {
  ServerOptions so;
  so.idleTimeout = 100ms;
  HttpServer server(so);
  server.route("GET", "/k", [](const Request&) { return Response::text(200, "k"); });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  REQUIRE((*client)->request("GET", "/k").ok());
  // Wait (bounded) until the server has dropped the idle connection.
  for (int i = 0; i < 500 && server.openConnections() > 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(server.openConnections() == 0);
  auto again = (*client)->request("GET", "/k");
  REQUIRE(again.ok());
  CHECK(again->status == 200);
}

TEST_CASE(
    "streaming: many chunks, events split across chunk boundaries, written from another thread",
    "[net][server][client][stream]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  std::string all;
  std::vector<std::string> events;
  for (int i = 0; i < 500; ++i) {
    events.push_back(
        nlohmann::json{{"type", "ADDED"}, {"object", {{"n", i}, {"pad", std::string(i % 50, 'x')}}}}
            .dump());
    all += events.back() + "\n";
  }
  const auto pieces = randomPieces(all, seed);

  HttpServer server;
  std::thread producer;
  std::atomic<int> failedWrites{0};  // Catch2 assertions are not thread-safe: count, check later
  server.routeStream("GET", "/watch", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    producer = std::thread([s, &pieces, &failedWrites] {
      s->begin(200, {{"Content-Type", "application/json"}});
      for (const auto& p : pieces) {
        if (!s->write(p)) {
          ++failedWrites;
        }
      }
      s->end();
    });
  });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());

  unsigned status = 0;
  std::string contentType;
  std::string buffered;
  std::vector<std::string> received;
  std::size_t deliveries = 0;
  auto st = (*client)->stream("GET", "/watch", {}, {},
                              StreamCallbacks{
                                  .onHeaders =
                                      [&](unsigned s, const Headers& h) {
                                        status = s;
                                        contentType = findHeader(h, "content-type").value_or("");
                                        CHECK(findHeader(h, "transfer-encoding") == "chunked");
                                        return true;
                                      },
                                  .onData =
                                      [&](std::string_view data) {
                                        ++deliveries;
                                        buffered.append(data);
                                        for (auto nl = buffered.find('\n'); nl != std::string::npos;
                                             nl = buffered.find('\n')) {
                                          received.push_back(buffered.substr(0, nl));
                                          buffered.erase(0, nl + 1);
                                        }
                                        return true;
                                      },
                              });
  producer.join();
  REQUIRE(st.ok());
  CHECK(failedWrites == 0);
  CHECK(status == 200);
  CHECK(contentType == "application/json");
  CHECK(buffered.empty());
  CHECK(received == events);
  CHECK(deliveries >= 1);
}

TEST_CASE("stream: client disconnect is seen by the server stream", "[net][server][stream]") {
  HttpServer server;
  std::promise<void> closedPromise;
  auto closed = closedPromise.get_future();
  std::shared_ptr<ResponseStream> kept;
  std::mutex keptMutex;
  server.routeStream("GET", "/watch", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    s->onClose([&closedPromise] { closedPromise.set_value(); });
    s->begin(200, {{"Content-Type", "application/json"}});
    s->write("{\"type\":\"ADDED\"}\n");
    std::lock_guard lock(keptMutex);
    kept = s;  // a watch registry would hold it like this
  });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  auto st = (*client)->stream(
      "GET", "/watch", {}, {},
      StreamCallbacks{.onHeaders = nullptr, .onData = [](std::string_view) { return false; }});
  REQUIRE(st.ok());  // we stopped on purpose: client closes its connection
  REQUIRE(closed.wait_for(10s) == std::future_status::ready);
  std::lock_guard lock(keptMutex);
  CHECK(kept->closed());
  CHECK_FALSE(kept->write("more\n"));
}

TEST_CASE("stream: send() answers asynchronously, abandoned streams are finished",
          "[net][server][stream]") {
  HttpServer server;
  std::vector<std::thread> workers;
  server.routeStream("GET", "/later", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    workers.emplace_back(
        [s] { s->send(Response::error(410, "expired", "too old resource version")); });
  });
  server.routeStream("GET", "/abandon", [](const Request&, std::shared_ptr<ResponseStream>) {});
  server.routeStream("GET", "/half", [](const Request&, std::shared_ptr<ResponseStream> s) {
    s->begin(200, {});
    s->write("partial\n");
  });
  server.routeStream("GET", "/throw", [](const Request&, std::shared_ptr<ResponseStream>) {
    throw std::runtime_error("stream handler failed");
  });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());

  auto later = (*client)->request("GET", "/later");
  REQUIRE(later.ok());
  CHECK(later->status == 410);
  CHECK(errorCode(*later) == "expired");

  auto abandoned = (*client)->request("GET", "/abandon");
  REQUIRE(abandoned.ok());
  CHECK(abandoned->status == 500);

  auto half = (*client)->request("GET", "/half");
  REQUIRE(half.ok());
  CHECK(half->status == 200);
  CHECK(half->body == "partial\n");

  auto thrown = (*client)->request("GET", "/throw");
  REQUIRE(thrown.ok());
  CHECK(thrown->status == 500);
  CHECK(thrown->body.find("stream handler failed") != std::string::npos);
  for (auto& w : workers) {
    w.join();
  }
}

TEST_CASE("stop drains: an in-flight request completes, open streams end, new connections fail",
          "[net][server][drain]") {
  HttpServer server;
  std::mutex m;
  std::condition_variable cv;
  bool entered = false;
  bool release = false;
  server.route("GET", "/slow", [&](const Request&) {
    std::unique_lock lock(m);
    entered = true;
    cv.notify_all();
    // Bounded, so a failing assertion below cannot leave the server unable to stop.
    cv.wait_for(lock, 20s, [&] { return release; });
    return Response::text(200, "finished");
  });
  std::promise<void> streamClosed;
  std::vector<std::shared_ptr<ResponseStream>> watchers;  // the handler keeps its stream open
  server.routeStream("GET", "/watch", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    s->onClose([&] { streamClosed.set_value(); });
    s->begin(200, {});
    s->write("event\n");
    watchers.push_back(std::move(s));
  });
  REQUIRE(server.start().ok());
  const auto port = server.port();
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());

  // An open watch stream, consumed on its own thread.
  std::string watchData;
  std::promise<void> watchStarted;
  auto watchDone = std::async(std::launch::async, [&] {
    auto c = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
    bool first = true;
    return (*c)->stream("GET", "/watch", {}, {},
                        StreamCallbacks{.onHeaders = nullptr, .onData = [&](std::string_view d) {
                                          watchData.append(d);
                                          if (first) {
                                            first = false;
                                            watchStarted.set_value();
                                          }
                                          return true;
                                        }});
  });
  REQUIRE(watchStarted.get_future().wait_for(10s) == std::future_status::ready);
  auto inflight =
      std::async(std::launch::async, [&] { return (*client)->request("GET", "/slow"); });
  {
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, 10s, [&] { return entered; }));
  }
  REQUIRE(server.openConnections() == 2);
  auto stopped = std::async(std::launch::async, [&] { server.stop(10s); });
  // The stream ends (terminating chunk) because of the drain, while /slow is still running.
  REQUIRE(watchDone.wait_for(10s) == std::future_status::ready);
  CHECK(watchDone.get().ok());
  CHECK(watchData == "event\n");
  CHECK(stopped.wait_for(0ms) == std::future_status::timeout);  // still draining /slow
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  auto r = inflight.get();
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  CHECK(r->body == "finished");
  CHECK(r->header("connection") == "close");
  REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
  CHECK(streamClosed.get_future().wait_for(0ms) == std::future_status::ready);
  test::RawSocket after(port);
  CHECK_FALSE(after.connected());
}

TEST_CASE("read timeout closes a silent or slow client, idle keep-alive times out",
          "[net][server][timeout]") {
  ServerOptions so;
  so.readTimeout = 200ms;
  so.idleTimeout = 200ms;
  HttpServer server(so);
  server.route("GET", "/", [](const Request&) { return Response::text(200, "ok"); });
  REQUIRE(server.start().ok());
  const auto partial =
      GENERATE(as<std::string>{}, "", "GET / HTTP/1.1\r\nHost: x\r\n",
               "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part");
  CAPTURE(partial);
  test::RawSocket raw(server.port(), 10'000);
  REQUIRE(raw.connected());
  raw.send(partial);
  const auto t0 = std::chrono::steady_clock::now();
  bool closedByPeer = false;
  raw.readAll(&closedByPeer);
  CHECK(closedByPeer);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
}

TEST_CASE("client timeouts: server never answers, server never accepts", "[net][client][timeout]") {
  HttpServer server;
  std::vector<std::shared_ptr<ResponseStream>> parked;
  std::mutex m;
  server.routeStream("GET", "/never", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    std::lock_guard lock(m);
    parked.push_back(std::move(s));  // never answered
  });
  REQUIRE(server.start().ok());
  auto client =
      HttpClient::create(ClientOptions{.baseUrl = server.baseUrl(), .requestTimeout = 300ms});
  REQUIRE(client.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*client)->request("GET", "/never");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "timeout");
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);

  auto st = (*client)->stream("GET", "/never", {}, {}, StreamCallbacks{});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == "timeout");

  // A stream that started but then goes silent: idleTimeout applies.
  server.routeStream("GET", "/silent", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    s->begin(200, {});
    s->write("one\n");
    std::lock_guard lock(m);
    parked.push_back(std::move(s));
  });
  std::string got;
  auto idle = (*client)->stream("GET", "/silent", {}, {},
                                StreamCallbacks{.onHeaders = nullptr,
                                                .onData =
                                                    [&](std::string_view d) {
                                                      got.append(d);
                                                      return true;
                                                    }},
                                StreamOptions{.idleTimeout = 300ms});
  REQUIRE_FALSE(idle.ok());
  CHECK(idle.error().code == "timeout");
  CHECK(got == "one\n");
}

TEST_CASE("client: refused connection and bad options give clear errors", "[net][client]") {
  std::uint16_t deadPort = 0;
  {
    HttpServer s;
    auto p = s.start();
    REQUIRE(p.ok());
    deadPort = *p;
  }
  auto client =
      HttpClient::create(ClientOptions{.baseUrl = "http://127.0.0.1:" + std::to_string(deadPort)});
  REQUIRE(client.ok());
  auto r = (*client)->request("GET", "/");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "unavailable");
  CHECK(r.error().message.find("refused") != std::string::npos);

  CHECK(HttpClient::create(ClientOptions{.baseUrl = "ftp://x"}).error().code == "invalid");
  auto bad = (*client)->request("GET", "no-slash");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  auto injected = (*client)->request("GET", "/", {}, {{"X-Bad", "a\r\nInjected: 1"}});
  REQUIRE_FALSE(injected.ok());
  CHECK(injected.error().code == "invalid");
}

TEST_CASE("cancel a stream from another thread", "[net][client][stream]") {
  HttpServer server;
  std::vector<std::shared_ptr<ResponseStream>> parked;
  std::mutex m;
  server.routeStream("GET", "/watch", [&](const Request&, std::shared_ptr<ResponseStream> s) {
    s->begin(200, {});
    s->write("first\n");
    std::lock_guard lock(m);
    parked.push_back(std::move(s));
  });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  CancelToken token;
  std::promise<void> gotFirst;
  auto running = std::async(std::launch::async, [&] {
    return (*client)->stream("GET", "/watch", {}, {},
                             StreamCallbacks{.onHeaders = nullptr,
                                             .onData =
                                                 [&](std::string_view) {
                                                   gotFirst.set_value();
                                                   return true;
                                                 }},
                             StreamOptions{.cancel = &token});
  });
  REQUIRE(gotFirst.get_future().wait_for(10s) == std::future_status::ready);
  token.cancel();
  REQUIRE(running.wait_for(10s) == std::future_status::ready);
  auto st = running.get();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == "cancelled");
}

TEST_CASE("bodies beyond Beast's 8 MB default, responseBodyLimit enforced", "[net][client]") {
  ServerOptions so;
  so.bodyLimit = 32u << 20;  // the API double raises the request limit like this
  HttpServer server(so);
  const std::string big(12u << 20, 'z');
  server.route("GET", "/big", [&](const Request&) { return Response::text(200, big); });
  server.route("POST", "/len",
               [](const Request& r) { return Response::text(200, std::to_string(r.body.size())); });
  REQUIRE(server.start().ok());
  auto client = HttpClient::create(ClientOptions{.baseUrl = server.baseUrl()});
  REQUIRE(client.ok());
  auto r = (*client)->request("GET", "/big");
  REQUIRE(r.ok());
  CHECK(r->body.size() == big.size());
  auto up = (*client)->request("POST", "/len", std::string(20u << 20, 'u'));
  REQUIRE(up.ok());
  CHECK(up->body == std::to_string(20u << 20));

  std::size_t streamed = 0;
  auto st =
      (*client)->stream("GET", "/big", {}, {},
                        StreamCallbacks{.onHeaders = nullptr, .onData = [&](std::string_view d) {
                                          streamed += d.size();
                                          return true;
                                        }});
  INFO((st.ok() ? std::string("ok") : st.error().message));
  REQUIRE(st.ok());
  CHECK(streamed == big.size());

  auto limited =
      HttpClient::create(ClientOptions{.baseUrl = server.baseUrl(), .responseBodyLimit = 1u << 20});
  REQUIRE(limited.ok());
  auto tooLarge = (*limited)->request("GET", "/big");
  INFO((tooLarge.ok()
            ? std::to_string(tooLarge->status) + " " + std::to_string(tooLarge->body.size())
            : tooLarge.error().message));
  REQUIRE_FALSE(tooLarge.ok());
  CHECK(tooLarge.error().code == "too_large");
}

TEST_CASE("default headers and a per-request header provider (rotating token)", "[net][client]") {
  HttpServer server;
  server.route("GET", "/h", [](const Request& r) {
    return Response::text(200, r.header("authorization").value_or("-") + "|" +
                                   r.header("x-default").value_or("-") + "|" +
                                   r.header("user-agent").value_or("-"));
  });
  REQUIRE(server.start().ok());
  std::atomic<int> rotation{0};
  ClientOptions co;
  co.baseUrl = server.baseUrl();
  co.defaultHeaders = {{"X-Default", "d"}};
  co.headerProvider = [&] {
    return Headers{{"Authorization", "Bearer t" + std::to_string(rotation.load())}};
  };
  auto client = HttpClient::create(co);
  REQUIRE(client.ok());
  CHECK((*client)->request("GET", "/h")->body == "Bearer t0|d|kubecomp/0.1");
  rotation = 1;
  CHECK((*client)->request("GET", "/h")->body == "Bearer t1|d|kubecomp/0.1");
  CHECK((*client)->request("GET", "/h", {}, {{"x-default", "override"}})->body ==
        "Bearer t1|override|kubecomp/0.1");
}

TEST_CASE("start fails clearly on a busy port or a bad address", "[net][server]") {
  HttpServer first;
  auto port = first.start();
  REQUIRE(port.ok());
  ServerOptions so;
  so.port = *port;
  HttpServer second(so);
  auto busy = second.start();
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == "unavailable");
  ServerOptions bad;
  bad.bindAddress = "not-an-ip";
  HttpServer third(bad);
  auto invalid = third.start();
  REQUIRE_FALSE(invalid.ok());
  CHECK(invalid.error().code == "invalid");
}
