// The move-speed report's arithmetic (move_speed.hpp): ratios over the nearest-rank median of
// the 1-GPU moves, the time spent in each journal phase as seen, and the JSON keys
// bench_reconfig's last line carries. Expectations worked out by hand.
#include "tools/bench/reconfig/move_speed.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

using kc::bench::MoveSpeed;
using kc::bench::ObservedMove;

namespace {

ObservedMove seen(const std::string& gpu, double draining, double detaching, double done) {
  return {gpu, {{"Draining", draining}, {"Detaching", detaching}, {"Succeeded", done}}};
}

MoveSpeed threeMoves() {
  MoveSpeed m;
  m.latencyScale = 0.05;
  m.fabricMs = 1000;
  m.singleMs = {1300, 1100, 1200};
  m.singles = {seen("p-c0.01", 4, 10, 1300), seen("p-c1.01", 2, 8, 1100),
               seen("p-c0.02", 6, 30, 1200)};
  m.demand4Ms = 2600;
  m.demand4 = {seen("d-c0.03", 100, 110, 1300), seen("d-c1.03", 102, 112, 1310),
               seen("d-c0.04", 1305, 1315, 2590), seen("d-c1.04", 1312, 1320, 2600)};
  return m;
}

}  // namespace

TEST_CASE("move speed: ratios over the median 1-GPU move") {
  const MoveSpeed m = threeMoves();
  CHECK(m.singleMedianMs() == 1200);
  CHECK(m.moveMedianMs() == 1194);  // Draining seen -> Succeeded: 1296, 1098, 1194
  CHECK(m.moveVsFabricRatio() == 1.194);
  CHECK(m.demand4VsOneRatio() == 2.167);  // 2600 / 1200, rounded to 0.001

  const auto j = m.toJson();
  CHECK(j.at("move_vs_fabric_ratio") == 1.194);
  CHECK(j.at("demand4_vs_one_ratio") == 2.167);
  CHECK(j.at("fabric_move_ms") == 1000.0);
  CHECK(j.at("safe_move_p50_ms") == 1194.0);
  CHECK(j.at("request_to_moved_p50_ms") == 1200.0);
  CHECK(j.at("demand4_ms") == 2600.0);
  CHECK(j.at("fabric_moves") == 3);
  CHECK(j.at("fabric_latency_scale") == 0.05);
}

TEST_CASE("move speed: time in each phase, medians in the order the phases came") {
  std::ostringstream out;
  threeMoves().print(out, "");
  const std::string text = out.str();
  CAPTURE(text);
  // request -> Draining: 4, 2, 6 -> 4; Draining -> Detaching: 6, 6, 24 -> 6;
  // Detaching -> Succeeded: 1290, 1092, 1170 -> 1170.
  const auto a = text.find("  request -> Draining        median      4.0 ms  (3 of 3");
  const auto b = text.find("  Draining -> Detaching      median      6.0 ms  (3 of 3");
  const auto c = text.find("  Detaching -> Succeeded     median   1170.0 ms  (3 of 3");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  REQUIRE(c != std::string::npos);
  CHECK(a < b);
  CHECK(b < c);
  CHECK(text.find("median 1200.0 ms (min 1100.0, max 1300.0) over 3 moves") != std::string::npos);
  CHECK(text.find("d-c1.04        (d-c1)  first seen  +1312.0 ms  Succeeded  +2600.0 ms") !=
        std::string::npos);
}

TEST_CASE("move speed: no 1-GPU move measured is an error, not a ratio") {
  MoveSpeed m;
  m.fabricMs = 1000;
  CHECK_THROWS_AS(m.moveVsFabricRatio(), std::runtime_error);
}
