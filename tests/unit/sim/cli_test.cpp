#include "tools/kubecomp-sim/cli.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kc-sim-cli-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

int run(std::vector<std::string> args) {
  args.insert(args.begin(), "kubecomp-sim");
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  return kc::sim::runCli(static_cast<int>(argv.size()), argv.data());
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("kubecomp-sim CLI: generic CSV in, per-job CSV and summary JSON out") {
  TempDir dir;
  {
    std::ofstream f(dir / "jobs.csv");
    f << "id,arrival_s,duration_s,gpus,cpu\na,0,100,3,1\nb,5,50,1,1\nc,6,20,1,1\nd,7,10,4,1\n";
  }
  const int rc =
      run({"--trace-csv", (dir / "jobs.csv").string(), "--layout", "2+2", "--move-time-s", "10",
           "--jobs-out", (dir / "out.csv").string(), "--summary-out", (dir / "sum.json").string()});
  REQUIRE(rc == 0);
  // The hand-computed trace of engine_test: waits 10, 0, 49, 113.
  const std::string jobs = slurp(dir / "out.csv");
  CHECK_THAT(jobs, Catch::StartsWith("id,arrival,start,end,wait,node,gpus,gpus_moved,status\n"));
  CHECK_THAT(jobs, Catch::Contains("a,0.000,10.000,110.000,10.000,n000000,3,1,done\n"));
  CHECK_THAT(jobs, Catch::Contains("d,7.000,120.000,130.000,113.000,n000000,4,1,done\n"));
  const auto sum = nlohmann::json::parse(slurp(dir / "sum.json"));
  CHECK(sum["wait_s"]["mean"].get<double>() == Approx(43));
  CHECK(sum["gpus_moved"].get<int>() == 2);
  CHECK(sum["trace"]["rows"].get<int>() == 4);
}

TEST_CASE("kubecomp-sim CLI: bad input fails with exit code 1 and writes nothing") {
  TempDir dir;
  {
    std::ofstream f(dir / "bad.csv");
    f << "arrival_s,duration_s,gpus\n0,10,1\n3,-2,1\n";
  }
  const fs::path out = dir / "sum.json";
  CHECK(run({"--trace-csv", (dir / "bad.csv").string(), "--summary-out", out.string()}) == 1);
  CHECK_FALSE(fs::exists(out));
  CHECK(run({"--workload", "w9", "--summary-out", out.string()}) == 1);
  CHECK(run({"--workload", "w1", "--node-policy", "nope", "--summary-out", out.string()}) == 1);
  CHECK(run({"--workload", "w1", "--trace-csv", "x.csv"}) == 1);
  CHECK(run({"--workload", "w1", "--layout", "4+x"}) == 1);
  CHECK(run({"--no-such-flag"}) == 2);
  CHECK_FALSE(fs::exists(out));
}

// The crafted trace of easy_backfill_test.cpp through the CLI: --queue picks the registry's
// queue policy by name; an unknown name fails and writes nothing.
TEST_CASE("kubecomp-sim CLI: --queue easy-backfill, unknown queue names refused") {
  TempDir dir;
  {
    std::ofstream f(dir / "jobs.csv");
    f << "id,arrival_s,duration_s,gpus,cpu\na,0,100,4,1\nb,1,10,8,1\nc,2,50,2,1\nd,3,200,1,1\n";
  }
  const fs::path out = dir / "sum.json";
  const int rc = run({"--trace-csv", (dir / "jobs.csv").string(), "--layout", "4+4",
                      "--move-time-s", "10", "--queue", "easy-backfill", "--jobs-out",
                      (dir / "out.csv").string(), "--summary-out", out.string()});
  REQUIRE(rc == 0);
  const std::string jobs = slurp(dir / "out.csv");
  // b reserved at 100 + 4 moves x 10; c backfilled (ends at 52); d not (it would delay b).
  CHECK_THAT(jobs, Catch::Contains("b,1.000,140.000,150.000,139.000,n000000,8,4,done\n"));
  CHECK_THAT(jobs, Catch::Contains("c,2.000,2.000,52.000,0.000,n000001,2,0,done\n"));
  CHECK_THAT(jobs, Catch::Contains("d,3.000,150.000,350.000,147.000,"));
  const auto sum = nlohmann::json::parse(slurp(out));
  CHECK(sum["config"]["queue"].get<std::string>() == "easy-backfill");
  CHECK(sum["wait_s"]["mean"].get<double>() == Approx((0 + 139 + 0 + 147) / 4.0));
  fs::remove(out);
  CHECK(run({"--trace-csv", (dir / "jobs.csv").string(), "--queue", "easy", "--summary-out",
             out.string()}) == 1);
  CHECK(run({"--trace-csv", (dir / "jobs.csv").string(), "--queue", "FCFS", "--summary-out",
             out.string()}) == 1);
  CHECK_FALSE(fs::exists(out));
}

// The same trace with --recompose idle-gather under fcfs: while b (8 GPUs) waits for a, the four
// GPUs of n000001 move to b's reserved node n000000 one at a time (1-41 s), so b starts when a
// ends (100, no move left); c and d follow b. The summary counts the four background moves, all
// made while a pod waited. An unknown recomposition policy fails and writes nothing.
TEST_CASE("kubecomp-sim CLI: --recompose idle-gather, unknown names refused") {
  TempDir dir;
  {
    std::ofstream f(dir / "jobs.csv");
    f << "id,arrival_s,duration_s,gpus,cpu\na,0,100,4,1\nb,1,10,8,1\nc,2,50,2,1\nd,3,200,1,1\n";
  }
  const fs::path out = dir / "sum.json";
  REQUIRE(run({"--trace-csv", (dir / "jobs.csv").string(), "--layout", "4+4", "--move-time-s", "10",
               "--recompose", "idle-gather", "--jobs-out", (dir / "out.csv").string(),
               "--summary-out", out.string()}) == 0);
  const std::string jobs = slurp(dir / "out.csv");
  CHECK_THAT(jobs, Catch::Contains("b,1.000,100.000,110.000,99.000,n000000,8,0,done\n"));
  const auto sum = nlohmann::json::parse(slurp(out));
  CHECK(sum["config"]["recompose"].get<std::string>() == "idle-gather");
  CHECK(sum["wait_s"]["mean"].get<double>() == Approx((0 + 99 + 108 + 107) / 4.0));
  CHECK(sum["gpus_moved"].get<int>() == 4);
  CHECK(sum["idle_moves"].get<int>() == 4);
  CHECK(sum["gpus_moved_while_waiting"].get<int>() == 4);
  CHECK(sum["gpus_moved_nothing_waiting"].get<int>() == 0);
  CHECK(sum["idle_moves_interrupted"].get<int>() == 0);
  fs::remove(out);
  CHECK(run({"--trace-csv", (dir / "jobs.csv").string(), "--recompose", "idle", "--summary-out",
             out.string()}) == 1);
  CHECK_FALSE(fs::exists(out));
}

// The same trace under slack-backfill: b (8 GPUs, 10 s) is reserved at 140 (a ends at 100, then
// 4 moves x 10 s); its bound is 140 + factor x 10. d (1 GPU, 200 s) started at 3 would hold a GPU
// of n000001 until 203, so b would start at 203 + 40 = 243: refused with factor 10 (bound 240),
// backfilled with factor 11 (bound 250). The summary names the factor only when one is given;
// a bad factor, or one given to another queue, fails and writes nothing.
TEST_CASE("kubecomp-sim CLI: --slack-factor widens slack-backfill's bound, bad values refused") {
  TempDir dir;
  {
    std::ofstream f(dir / "jobs.csv");
    f << "id,arrival_s,duration_s,gpus,cpu\na,0,100,4,1\nb,1,10,8,1\nc,2,50,2,1\nd,3,200,1,1\n";
  }
  const fs::path out = dir / "sum.json";
  auto sim = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--trace-csv",   (dir / "jobs.csv").string(),
                                  "--layout",      "4+4",
                                  "--move-time-s", "10",
                                  "--jobs-out",    (dir / "out.csv").string(),
                                  "--summary-out", out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  REQUIRE(sim({"--queue", "slack-backfill", "--slack-factor", "10"}) == 0);
  std::string jobs = slurp(dir / "out.csv");
  CHECK_THAT(jobs, Catch::Contains("b,1.000,140.000,150.000,139.000,n000000,8,4,done\n"));
  CHECK_THAT(jobs, Catch::Contains("d,3.000,150.000,350.000,147.000,"));
  CHECK(nlohmann::json::parse(slurp(out))["config"]["slack_factor"].get<double>() == 10.0);
  REQUIRE(sim({"--queue", "slack-backfill", "--slack-factor", "11"}) == 0);
  jobs = slurp(dir / "out.csv");
  CHECK_THAT(jobs, Catch::Contains("b,1.000,243.000,253.000,242.000,n000000,8,4,done\n"));
  CHECK_THAT(jobs, Catch::Contains("d,3.000,3.000,203.000,0.000,n000001,1,0,done\n"));
  REQUIRE(sim({"--queue", "slack-backfill"}) == 0);
  CHECK_FALSE(nlohmann::json::parse(slurp(out))["config"].contains("slack_factor"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--queue", "slack-backfill", "--slack-factor", "-1"},
        std::vector<std::string>{"--queue", "slack-backfill", "--slack-factor", "1001"},
        std::vector<std::string>{"--queue", "slack-backfill", "--slack-factor", "nan"},
        std::vector<std::string>{"--queue", "easy-backfill", "--slack-factor", "3"},
        std::vector<std::string>{"--slack-factor", "3"}}) {
    fs::remove(out);
    fs::remove(dir / "out.csv");
    CHECK(sim(bad) == 1);
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(dir / "out.csv"));
  }
}
