#include "libcore/kube/framing.hpp"

#include <catch2/catch.hpp>
#include <random>

using namespace kc::kube;

namespace {

// Splits `text` into pieces of random sizes in [1, maxPiece].
std::vector<std::string> randomPieces(const std::string& text, std::mt19937& rng,
                                      std::size_t maxPiece) {
  std::vector<std::string> out;
  std::uniform_int_distribution<std::size_t> len(1, maxPiece);
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = std::min(len(rng), text.size() - i);
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

TEST_CASE("line framer never assumes one event per chunk", "[kube][framing]") {
  std::string stream;
  std::vector<std::string> want;
  for (int i = 0; i < 200; ++i) {
    std::string ev = R"({"type":"MODIFIED","object":{"metadata":{"name":"p)" + std::to_string(i) +
                     R"(","annotations":{"a":"line\nbreak \u00e9 ü"}}}})";
    want.push_back(ev);
    stream += ev + (i % 7 == 0 ? "\r\n" : "\n");
    if (i % 13 == 0) {
      stream += "\n";  // blank lines are skipped
    }
  }
  auto maxPiece = GENERATE(1, 3, 64, 100000);
  std::mt19937 rng(42 + static_cast<unsigned>(maxPiece));
  LineFramer framer;
  std::vector<std::string> got;
  for (const auto& piece : randomPieces(stream, rng, maxPiece)) {
    framer.feed(piece, [&](std::string_view line) {
      got.emplace_back(line);
      return true;
    });
  }
  CHECK(got == want);
  CHECK(framer.buffered() == 0);
}

TEST_CASE("line framer keeps an incomplete tail and can stop", "[kube][framing]") {
  LineFramer f;
  std::vector<std::string> got;
  auto collect = [&](std::string_view l) {
    got.emplace_back(l);
    return got.size() < 2;
  };
  CHECK(f.feed("a\nb\nc\npartial", collect) == false);
  CHECK(got == std::vector<std::string>{"a", "b"});
  CHECK(f.buffered() == std::string("c\npartial").size());
  got.clear();
  CHECK(f.feed("", [&](std::string_view l) {
    got.emplace_back(l);
    return true;
  }));
  CHECK(got == std::vector<std::string>{"c"});
  CHECK(f.buffered() == 7);
}

TEST_CASE("list body parser streams items out of any chunking", "[kube][framing]") {
  nlohmann::json list = {{"kind", "PodList"},
                         {"apiVersion", "v1"},
                         {"metadata", {{"resourceVersion", "4711"}, {"continue", "tok{]"}}},
                         {"items", nlohmann::json::array()}};
  for (int i = 0; i < 300; ++i) {
    list["items"].push_back(
        {{"metadata", {{"name", "p" + std::to_string(i)}, {"labels", {{"k", "v}\"{["}}}}},
         {"spec", {{"containers", {{{"name", "c"}, {"args", {"[", "]", "\\"}}}}}}}});
  }
  auto text = GENERATE(as<bool>{}, false, true) ? list.dump(2) : list.dump();
  auto maxPiece = GENERATE(1, 17, 4096, 10000000);
  std::mt19937 rng(7 + static_cast<unsigned>(maxPiece));
  std::vector<nlohmann::json> items;
  ListBodyParser p([&](nlohmann::json&& item) {
    items.push_back(std::move(item));
    return kc::okStatus();
  });
  for (const auto& piece : randomPieces(text, rng, maxPiece)) {
    REQUIRE(p.feed(piece).ok());
  }
  auto skeleton = p.finish();
  REQUIRE(skeleton.ok());
  CHECK((*skeleton)["metadata"]["resourceVersion"] == "4711");
  CHECK((*skeleton)["metadata"]["continue"] == "tok{]");
  CHECK((*skeleton)["kind"] == "PodList");
  CHECK_FALSE(skeleton->contains("items"));
  REQUIRE(items.size() == 300);
  for (std::size_t i = 0; i < items.size(); ++i) {
    CHECK(items[i] == list["items"][i]);
  }
}

TEST_CASE("list body parser: items first, empty, null, and malformed", "[kube][framing]") {
  std::vector<nlohmann::json> items;
  auto sink = [&](nlohmann::json&& item) {
    items.push_back(std::move(item));
    return kc::okStatus();
  };
  {
    ListBodyParser p(sink);
    REQUIRE(p.feed(R"({"items":[{"a":1},{"b":[2]}],"metadata":{"resourceVersion":"9"}})").ok());
    auto s = p.finish();
    REQUIRE(s.ok());
    CHECK(items.size() == 2);
    CHECK((*s)["metadata"]["resourceVersion"] == "9");
  }
  {
    ListBodyParser p(sink);
    REQUIRE(p.feed(R"({"kind":"items","items":null,"metadata":{}})").ok());
    CHECK(p.finish().ok());
  }
  for (std::string bad :
       {R"({"items":[{"a":1})", R"([1,2])", R"({"items":[1]})", R"({"items":[{"a":}]})", "", "}"}) {
    CAPTURE(bad);
    ListBodyParser p(sink);
    auto st = p.feed(bad);
    CHECK((!st.ok() || !p.finish().ok()));
  }
  {
    ListBodyParser p(
        [](nlohmann::json&&) { return kc::Status(kc::makeError("exhausted", "stop")); });
    CHECK(p.feed(R"({"items":[{"a":1}]})").error().code == "exhausted");
  }
}
