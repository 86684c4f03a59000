// HttpClient redirect following: same-origin only, bounded hops, method and body per status.
// A real HttpServer on port 0 answers with the redirects; it records what arrives after them.
#include <catch2/catch.hpp>
#include <mutex>
#include <vector>

#include "libcore/net/http_client.hpp"
#include "libcore/net/http_server.hpp"

using namespace kc::net;

namespace {

struct Seen {
  std::string method;
  std::string target;
  std::string body;
  std::string contentType;
  std::string auth;
};

// Serves "/final..." (echo of what arrived) and "/r/<status>/<location>" style redirects set
// per path by the test.
class RedirectServer {
 public:
  RedirectServer() {
    server_.routePrefix("", "/", [this](const Request& req) {
      std::lock_guard lock(mutex_);
      seen_.push_back({req.method, req.target, req.body, req.header("Content-Type").value_or(""),
                       req.header("Authorization").value_or("")});
      const auto it = redirects_.find(req.target);  // with the query: "/a?page=2" is not "/a"
      if (it != redirects_.end()) {
        Response r = Response::text(it->second.first, "moved");
        if (!it->second.second.empty()) {
          r.withHeader("Location", it->second.second);
        }
        return r;
      }
      return Response::text(200, "final " + req.method + " " + req.target + " body=" + req.body);
    });
    REQUIRE(server_.start().ok());
  }
  void redirect(const std::string& path, unsigned status, const std::string& location) {
    std::lock_guard lock(mutex_);
    redirects_[path] = {status, location};
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }
  std::string url() const { return server_.baseUrl(); }
  std::uint16_t port() const {
    return static_cast<std::uint16_t>(std::stoi(url().substr(url().rfind(':') + 1)));
  }

 private:
  HttpServer server_;
  std::mutex mutex_;  // guards the members below
  std::map<std::string, std::pair<unsigned, std::string>> redirects_;
  std::vector<Seen> seen_;
};

std::unique_ptr<HttpClient> clientFor(const std::string& base, std::uint32_t maxRedirects = 5) {
  ClientOptions o;
  o.baseUrl = base;
  o.maxRedirects = maxRedirects;
  auto c = HttpClient::create(o);
  REQUIRE(c.ok());
  return std::move(c).value();
}

}  // namespace

TEST_CASE("client redirects: method and body per status", "[net][client][redirect]") {
  // status, method sent, method expected after the redirect, body kept?
  auto [status, method, after, bodyKept] =
      GENERATE(table<unsigned, std::string, std::string, bool>({
          {308, "GET", "GET", false},
          {308, "POST", "POST", true},
          {308, "DELETE", "DELETE", false},
          {307, "POST", "POST", true},
          {307, "PATCH", "PATCH", true},
          {301, "GET", "GET", false},
          {301, "HEAD", "HEAD", false},
          {301, "POST", "GET", false},  // common practice (RFC 9110 15.4.2 allows it)
          {302, "POST", "GET", false},
          {302, "PUT", "PUT", true},  // only POST is rewritten
          {303, "POST", "GET", false},
          {303, "DELETE", "GET", false},
      }));
  CAPTURE(status, method);
  RedirectServer server;
  server.redirect("/redfish/v1", status, "/redfish/v1/");
  auto client = clientFor(server.url());
  const std::string body =
      method == "GET" || method == "HEAD" || method == "DELETE" ? "" : R"({"a":1})";
  Headers headers{{"Authorization", "Basic YTpi"}};
  if (!body.empty()) {
    headers.push_back({"Content-Type", "application/json"});
  }
  auto r = client->request(method, "/redfish/v1", body, headers);
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  const auto seen = server.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].target == "/redfish/v1");
  CHECK(seen[1].target == "/redfish/v1/");
  CHECK(seen[1].method == after);
  CHECK(seen[1].body == (bodyKept ? body : ""));
  CHECK(seen[1].contentType == (bodyKept ? "application/json" : ""));
  CHECK(seen[1].auth == "Basic YTpi");  // same origin: credentials go along
}

TEST_CASE("client redirects: Location forms are resolved against the request",
          "[net][client][redirect]") {
  RedirectServer server;
  auto [location, expected] = GENERATE_REF(table<std::string, std::string>({
      {"/x/y/", "/x/y/"},
      {"z", "/a/b/z"},
      {"../z?q=1", "/a/z?q=1"},
      {"./", "/a/b/"},
      {"?page=2", "/a/b/c?page=2"},
      {"/final#frag", "/final"},
      {"http://127.0.0.1:PORT/abs", "/abs"},
      {"HTTP://127.0.0.1:PORT", "/"},
      {"//127.0.0.1:PORT/net?x", "/net?x"},
  }));
  const auto port = std::to_string(server.port());
  std::string loc = location;
  if (const auto p = loc.find("PORT"); p != std::string::npos) {
    loc.replace(p, 4, port);
  }
  CAPTURE(loc);
  server.redirect("/a/b/c", 302, loc);
  auto client = clientFor(server.url());
  auto r = client->request("GET", "/a/b/c");
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  const auto seen = server.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].target == expected);
}

TEST_CASE("client redirects: the base path prefix is not added again after a redirect",
          "[net][client][redirect]") {
  RedirectServer server;
  server.redirect("/prefix/redfish/v1", 308, "/prefix/redfish/v1/");
  auto client = clientFor(server.url() + "/prefix");
  auto r = client->request("GET", "/redfish/v1");
  REQUIRE(r.ok());
  CHECK(r->body == "final GET /prefix/redfish/v1/ body=");
}

TEST_CASE("client redirects: other origins, loops and bad Locations are clear errors",
          "[net][client][redirect]") {
  RedirectServer server;
  auto client = clientFor(server.url(), 3);

  SECTION("another host") {
    server.redirect("/a", 308, "http://example.org/a");
    auto r = client->request("GET", "/a");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "redirect");
    CHECK_THAT(r.error().message,
               Catch::Contains("another origin") && Catch::Contains("example.org"));
    CHECK(server.seen().size() == 1);  // nothing was sent there (or anywhere else)
  }
  SECTION("same host, another port or scheme") {
    const std::string other =
        GENERATE(as<std::string>{}, "http://127.0.0.1:1/a", "https://127.0.0.1:PORT/a");
    std::string loc = other;
    if (const auto p = loc.find("PORT"); p != std::string::npos) {
      loc.replace(p, 4, std::to_string(server.port()));
    }
    server.redirect("/a", 301, loc);
    auto r = client->request("GET", "/a");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "redirect");
  }
  SECTION("a loop stops after maxRedirects hops") {
    server.redirect("/a", 302, "/b");
    server.redirect("/b", 302, "/a");
    auto r = client->request("GET", "/a");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "redirect");
    CHECK_THAT(r.error().message, Catch::Contains("more than 3 redirects"));
    CHECK(server.seen().size() == 4);  // the request and three followed hops
  }
  SECTION("exactly maxRedirects hops are followed") {
    server.redirect("/1", 307, "/2");
    server.redirect("/2", 307, "/3");
    server.redirect("/3", 307, "/done");
    auto r = client->request("GET", "/1");
    REQUIRE(r.ok());
    CHECK(r->body == "final GET /done body=");
  }
  SECTION("a malformed Location") {
    server.redirect("/a", 308, "http://[::1");
    auto r = client->request("GET", "/a");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "protocol");
  }
  SECTION("a 3xx without Location is returned as it is") {
    server.redirect("/a", 302, "");
    auto r = client->request("GET", "/a");
    REQUIRE(r.ok());
    CHECK(r->status == 302);
  }
}

TEST_CASE("client redirects: maxRedirects 0 returns the 3xx unfollowed",
          "[net][client][redirect]") {
  RedirectServer server;
  server.redirect("/redfish/v1", 308, "/redfish/v1/");
  auto client = clientFor(server.url(), 0);
  auto r = client->request("GET", "/redfish/v1");
  REQUIRE(r.ok());
  CHECK(r->status == 308);
  CHECK(r->header("Location") == "/redfish/v1/");
  CHECK(server.seen().size() == 1);
}
