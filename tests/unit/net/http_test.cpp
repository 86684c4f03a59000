// Pure helpers of libcore/net/http.hpp: URL parsing, query strings, headers.
#include "libcore/net/http.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace kc::net;

TEST_CASE("parseUrl accepts http(s) URLs with defaults and IPv6", "[net][url]") {
  auto [text, scheme, host, port, base, authority] =
      GENERATE(table<std::string, std::string, std::string, int, std::string, std::string>({
          {"http://127.0.0.1:8080", "http", "127.0.0.1", 8080, "", "127.0.0.1:8080"},
          {"https://kube.example.org", "https", "kube.example.org", 443, "",
           "kube.example.org:443"},
          {"HTTP://host/prefix/", "http", "host", 80, "/prefix", "host:80"},
          {"https://[::1]:6443/k8s", "https", "::1", 6443, "/k8s", "[::1]:6443"},
      }));
  CAPTURE(text);
  auto url = parseUrl(text);
  REQUIRE(url.ok());
  CHECK(url->scheme == scheme);
  CHECK(url->host == host);
  CHECK(url->port == port);
  CHECK(url->basePath == base);
  CHECK(url->authority() == authority);
}

TEST_CASE("parseUrl rejects what it cannot serve", "[net][url]") {
  auto text =
      GENERATE(as<std::string>{}, "127.0.0.1:80", "ftp://h", "http://", "http://h:0",
               "http://h:70000", "http://h:12ab", "http://h/x?y=1", "http://u@h", "http://[::1");
  CAPTURE(text);
  auto url = parseUrl(text);
  REQUIRE_FALSE(url.ok());
  CHECK(url.error().code == "invalid");
}

TEST_CASE("parseQuery keeps order, repeats and empty values", "[net][query]") {
  auto q = parseQuery("labelSelector=app%3Dweb%2Ctier+in+(a)&watch&limit=5&&x=1&x=2");
  REQUIRE(q.ok());
  using P = std::pair<std::string, std::string>;
  CHECK(*q == std::vector<P>{{"labelSelector", "app=web,tier in (a)"},
                             {"watch", ""},
                             {"limit", "5"},
                             {"x", "1"},
                             {"x", "2"}});
  CHECK_FALSE(parseQuery("a=%zz").ok());
  CHECK(buildQuery({{"fieldSelector", "spec.nodeName=n1"}, {"a b", "c&d"}}) ==
        "fieldSelector=spec.nodeName%3Dn1&a%20b=c%26d");

  Request req;
  req.query = *q;
  CHECK(req.queryParam("x") == "1");
  CHECK(req.queryParams("x") == std::vector<std::string>{"1", "2"});
  CHECK(req.hasQueryParam("watch"));
  CHECK_FALSE(req.queryParam("missing").has_value());
}

TEST_CASE("header lookup is case-insensitive and setHeader replaces", "[net][headers]") {
  Headers h{{"Content-Type", "application/json"}, {"X-A", "1"}, {"x-a", "2"}};
  CHECK(findHeader(h, "content-type") == "application/json");
  CHECK(findHeader(h, "X-a") == "1");
  setHeader(h, "X-A", "3");
  CHECK(h.size() == 2);
  CHECK(findHeader(h, "x-a") == "3");
  CHECK_FALSE(findHeader(h, "missing").has_value());
}

TEST_CASE("Response helpers build JSON and text bodies", "[net][response]") {
  auto e = Response::error(404, "not_found", "no route for GET /x");
  CHECK(e.status == 404);
  CHECK(e.header("content-type") == "application/json");
  auto body = nlohmann::json::parse(e.body);
  CHECK(body["error"] == "not_found");
  CHECK(body["message"] == "no route for GET /x");

  auto t = Response::text(200, "ok").withHeader("X-Trace", "1");
  CHECK(t.body == "ok");
  CHECK(t.header("x-trace") == "1");
  CHECK(reasonPhrase(413) == "Payload Too Large");
  CHECK(reasonPhrase(999) == "Unknown");
}
