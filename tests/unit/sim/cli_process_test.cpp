// The kubecomp-sim executable as a separate process, fed hostile input: every case must end
// (a hang fails the test by its deadline, not CI by its timeout), exit 1 with a clear message
// naming the limit, and leave no output file behind.

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kTraceDir = KC_ALIBABA_TRACE_DIR;
const std::string kPods = kTraceDir + "/openb_pod_list_default.csv";
const std::string kNodes = kTraceDir + "/openb_node_list_gpu_node.csv";

struct Run {
  bool finished = false;  // false: killed at the deadline
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string shellQuote(const std::string& s) {
  std::string out;
  out.push_back('\'');
  for (char c : s) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

// Runs kubecomp-sim with `args` in `dir` (stdout and stderr to files there), killing it after
// `deadline`; `addressSpace` > 0 limits its virtual memory (bytes). Started through /bin/sh
// for the working directory, the redirections and `ulimit -v`; `exec` keeps the exit status
// (and the signal of a crash) the simulator's own.
Run runSim(const kc::testing::TempDir& dir, std::vector<std::string> args,
           std::chrono::seconds deadline = std::chrono::seconds(20), rlim_t addressSpace = 0) {
  const std::string outPath = dir.file("stdout.txt");
  const std::string errPath = dir.file("stderr.txt");
  std::string script = "cd " + shellQuote(dir.path()) + " || exit 127; ";
  if (addressSpace > 0) {
    script += "ulimit -v " + std::to_string(addressSpace / 1024) + " || exit 127; ";
  }
  script += "exec " + shellQuote(KC_SIM_BINARY);
  for (const auto& a : args) {
    script += " " + shellQuote(a);
  }
  script += " >" + shellQuote(outPath) + " 2>" + shellQuote(errPath);
  kc::testing::ChildProcess child({"/bin/sh", "-c", script});
  Run r;
  const auto status = child.waitExit(deadline);
  if (status) {
    r.finished = true;
    // A crash (abort on length_error, bad_alloc) is not an exit: -signal.
    r.exitCode = *status > 128 ? -(*status - 128) : *status;
  } else {
    child.kill(SIGKILL);
  }
  r.out = slurp(outPath);
  r.err = slurp(errPath);
  return r;
}

}  // namespace

TEST_CASE("kubecomp-sim process: a count or scale flag out of range is refused by name") {
  kc::testing::TempDir dir;
  auto [flags, message] = GENERATE(table<std::vector<std::string>, std::string>({
      // Used to wrap to 2^64 - 5 and loop forever.
      {{"--workload", "w1", "--jobs", "-5"}, "--jobs must be in 1..10000000 (got -5)"},
      // Used to end in an uncaught bad_alloc.
      {{"--workload", "w1", "--jobs", "10000000000"},
       "--jobs must be in 1..10000000 (got 10000000000)"},
      {{"--workload", "w1", "--pools", "100000000"},
       "--pools must be in 1..100000 (got 100000000)"},
      {{"--workload", "w1", "--pools", "100000", "--unattached", "1000"},
       "more than 10000000 GPUs (the limit)"},
      // Used to loop forever on the real trace.
      {{"--alibaba-pods", kPods, "--alibaba-nodes", kNodes, "--time-scale", "7e8"},
       "--time-scale must be in 1e-06..1e+06 (got 7e+08)"},
      {{"--workload", "w1", "--time-scale", "nan"}, "--time-scale must be in"},
      {{"--workload", "w1", "--lambda", "0"}, "--lambda must be in"},
  }));
  CAPTURE(flags);
  const Run r = runSim(dir, flags);
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains(message));
  CHECK(r.out.empty());
}

TEST_CASE("kubecomp-sim process: --time-scale past the arrival limit writes no trace file") {
  kc::testing::TempDir dir;
  // 1e9 used to report a misleading "negative time" and leave a half-written trace; a scale
  // inside the flag's range can still push the real trace's arrivals past 10^12 s.
  for (const char* scale : {"1e9", "1e6"}) {
    CAPTURE(scale);
    const Run r = runSim(dir, {"--alibaba-pods", kPods, "--alibaba-nodes", kNodes, "--time-scale",
                               scale, "--write-trace", "trace.csv", "--jobs-out", "jobs.csv"});
    REQUIRE(r.finished);
    CHECK(r.exitCode == 1);
    CHECK_THAT(r.err, !Catch::Contains("negative"));
    CHECK_THAT(r.err, Catch::Contains("1000000000000 s") || Catch::Contains("1e+06"));
    CHECK_FALSE(fs::exists(dir.path() / "trace.csv"));
    CHECK_FALSE(fs::exists(dir.path() / "jobs.csv"));
  }
  // A large scale inside every limit runs to the end (stretched arrivals, same durations).
  const Run ok = runSim(dir, {"--alibaba-pods", kPods, "--alibaba-nodes", kNodes, "--time-scale",
                              "5e4", "--quiet", "--summary-out", "sum.json"});
  REQUIRE(ok.finished);
  CHECK(ok.exitCode == 0);
  CHECK_THAT(slurp(dir.file("sum.json")), Catch::Contains("\"completed\": 6203"));
}

TEST_CASE("kubecomp-sim process: times at 2^62 s, or queued past 2^62 ms, end with an error") {
  kc::testing::TempDir dir;
  // Used to abort with length_error from an int64 overflow in the engine.
  dir.write("huge.csv", "arrival_s,duration_s,gpus\n4611686018427387904,1,1\n");
  Run r = runSim(dir, {"--trace-csv", "huge.csv"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("huge.csv:2: arrival_s 4611686018427387904 is above the "
                                    "limit of 1000000000000 s"));

  // Two jobs at the limit used to loop forever: now they run (the second queues to 3e15 ms).
  dir.write("two.csv",
            "arrival_s,duration_s,gpus\n1000000000000,1000000000000,8\n"
            "1000000000000,1000000000000,8\n");
  r = runSim(dir, {"--trace-csv", "two.csv", "--summary-out", "sum.json"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 0);
  CHECK_THAT(slurp(dir.file("sum.json")), Catch::Contains("\"completed\": 2"));

  // 4,612 of them on one GPU would end past 2^62 ms: a clear error, and an existing output
  // file is left as it was (outputs are written only after a successful run).
  std::string many = "arrival_s,duration_s,gpus\n";
  for (int i = 0; i < 4'612; ++i) {
    many += "0,1000000000000,1\n";
  }
  dir.write("many.csv", many);
  dir.write("keep.json", "previous\n");
  r = runSim(dir, {"--trace-csv", "many.csv", "--layout", "1", "--summary-out", "keep.json",
                   "--write-trace", "trace.csv", "--quiet"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("past the simulated-time limit of 2^62 ms"));
  CHECK(slurp(dir.file("keep.json")) == "previous\n");
  CHECK_FALSE(fs::exists(dir.path() / "trace.csv"));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    CHECK_THAT(e.path().filename().string(), !Catch::Contains(".tmp."));
  }
}

TEST_CASE("kubecomp-sim process: a header without rows says 'no jobs', a BOM header is read") {
  kc::testing::TempDir dir;
  dir.write("empty.csv", "arrival_s,duration_s,gpus\n");
  Run r = runSim(dir, {"--trace-csv", "empty.csv", "--summary-out", "sum.json"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("no jobs to simulate: the input has no data rows"));
  CHECK_FALSE(fs::exists(dir.path() / "sum.json"));

  // Every row skipped (CPU-only tasks are skipped by default): "no jobs" too, and why.
  dir.write("cpu.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,"
            "scheduled_time\np,1000,10,0,0,1,5,2\n");
  r = runSim(dir, {"--alibaba-pods", "cpu.csv", "--alibaba-nodes", kNodes});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("no jobs to simulate: every one of the 1 data rows was "
                                    "skipped (1 CPU-only"));

  dir.write("bom.csv", "\xEF\xBB\xBFid,arrival_s,duration_s,gpus\nx,0,10,1\n");
  r = runSim(dir, {"--trace-csv", "bom.csv", "--summary-out", "-"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("\"completed\": 1"));
}

TEST_CASE("kubecomp-sim process: gpu_spec is honoured and unservable rows are reported") {
  kc::testing::TempDir dir;
  dir.write("spec.csv",
            "id,arrival_s,duration_s,gpus,gpu_spec\na,0,10,1,T4\nb,0,10,1,A100|H100\n"
            "c,0,10,9,T4\nd,0,10,1,\n");
  // Layout 2+2 of T4: a runs, b names no model the cluster has, c needs more GPUs than there
  // are (rejected, but not for its model), d accepts any GPU.
  Run r = runSim(dir, {"--trace-csv", "spec.csv", "--layout", "2+2", "--gpu-model", "T4",
                       "--summary-out", "-"});
  REQUIRE(r.finished);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("\"rejected\": 2"));
  CHECK_THAT(r.out, Catch::Contains("\"rejected_gpu_model\": 1"));
  CHECK_THAT(r.out, Catch::Contains("\"gpu_spec_constrained\": 3"));
  CHECK_THAT(r.out, Catch::Contains("\"completed\": 2"));
  // Without --gpu-model the layout's GPUs have no model: every constrained row is unservable.
  r = runSim(dir, {"--trace-csv", "spec.csv", "--layout", "2+2", "--summary-out", "-"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("\"rejected_gpu_model\": 2"));
  r = runSim(dir, {"--trace-csv", "spec.csv", "--gpu-model", "T;4"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("--gpu-model 'T;4' is not a GPU model name"));
}

TEST_CASE("kubecomp-sim process: running out of memory is a message, not an abort") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("not run: AddressSanitizer needs more address space than the limit under test");
  return;
#endif
  kc::testing::TempDir dir;
  // 10,000,000 jobs (the limit) need about 1.4 GiB; with 256 MiB of address space the run
  // used to end in an uncaught bad_alloc (abort, signal 6).
  const Run r = runSim(dir,
                       {"--workload", "w1", "--jobs", "10000000", "--lambda", "1", "--write-trace",
                        "trace.csv", "--quiet"},
                       std::chrono::seconds(60), rlim_t{256} << 20);
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("kubecomp-sim: out of memory"));
  CHECK_FALSE(fs::exists(dir.path() / "trace.csv"));
}

TEST_CASE(
    "kubecomp-sim process: an output that is a FIFO (like /dev/null) is written into, not "
    "replaced") {
  // Renaming a finished temporary file over the target once replaced /dev/null with a plain file
  // when a run was given --summary-out /dev/null (as root). A FIFO shows the same without
  // touching /dev: it must still be a FIFO afterwards and must have carried the summary.
  kc::testing::TempDir dir;
  const std::string fifo = dir.file("summary.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Our read end, open before the simulator starts: its open for writing does not block, and
  // what it writes (a few KiB, within the pipe's buffer) waits here until read.
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  const Run r = runSim(dir, {"--workload", "w1", "--jobs", "5", "--quiet", "--summary-out", fifo});
  std::string received;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    received.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  CHECK(r.exitCode == 0);
  CHECK(fs::is_fifo(fs::status(fifo)));
  CHECK(received.find("\"completed\": 5") != std::string::npos);
  for (const auto& e : fs::directory_iterator(dir.path())) {
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
}

TEST_CASE("kubecomp-sim process: a device, a directory or a huge field ends in a short message") {
  kc::testing::TempDir dir;
  // /dev/zero used to grow one line to about 1 GB (here: out of memory under 256 MiB) and then
  // be called an "empty file (no header)", as a directory was.
  for (const std::string& path : {std::string("/dev/zero"), dir.path().string()}) {
    CAPTURE(path);
    const Run r = runSim(dir, {"--trace-csv", path}, std::chrono::seconds(20), rlim_t{256} << 20);
    REQUIRE(r.finished);
    CHECK(r.exitCode == 1);
    CHECK_THAT(r.err, Catch::Contains(path + ": not a regular file"));
  }
  // A 900 KB field used to be echoed whole; a line over 1 MiB is refused by its number.
  dir.write("field.csv", "arrival_s,duration_s,gpus\n0," + std::string(900'000, 'x') + ",1\n");
  dir.write("line.csv", "arrival_s,duration_s,gpus\n0,1,1\n" + std::string(2 << 20, '1') + "\n");
  Run r = runSim(dir, {"--trace-csv", "field.csv"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("field.csv:2: duration_s is not a number") &&
                        Catch::Contains("...' (900000 bytes)"));
  CHECK(r.err.size() < 300);
  r = runSim(dir, {"--trace-csv", "line.csv"});
  CHECK(r.exitCode == 1);
  CHECK(r.err == "kubecomp-sim: line.csv:3: line longer than 1048576 bytes (the limit)\n");
}

TEST_CASE("kubecomp-sim process: the real trace with pandas' nan gpu_spec runs every job") {
  kc::testing::TempDir dir;
  // The trace as pandas writes it: gpu_spec (the sixth column) nan where it is empty. The nan
  // used to be a model name: 4,111 of the 6,203 jobs were rejected and the run exited 0.
  std::istringstream in(slurp(kPods));
  std::string nanPods;
  std::string line;
  for (bool header = true; std::getline(in, line); header = false) {
    std::size_t comma = 0;
    for (int i = 0; i < 5; ++i) {
      comma = line.find(',', comma) + 1;
    }
    if (!header && line[comma] == ',') {
      line.insert(comma, "nan");
    }
    nanPods += line + "\n";
  }
  REQUIRE(nanPods.find(",nan,") != std::string::npos);
  dir.write("nan_pods.csv", nanPods);
  const Run r = runSim(dir, {"--alibaba-pods", "nan_pods.csv", "--alibaba-nodes", kNodes, "--quiet",
                             "--summary-out", "sum.json"});
  REQUIRE(r.finished);
  CHECK(r.exitCode == 0);
  const std::string sum = slurp(dir.file("sum.json"));
  CHECK_THAT(sum, Catch::Contains("\"completed\": 6203"));
  CHECK_THAT(sum, Catch::Contains("\"rejected\": 0"));
  CHECK(r.err.empty());
}

TEST_CASE("kubecomp-sim process: easy- and slack-backfill above 20,000 jobs are refused at once") {
  kc::testing::TempDir dir;
  // 200,000 jobs used to run for more than two minutes with no output (the pass is quadratic
  // in the jobs waiting at once); the limit is refused before the trace is generated or read.
  std::string rows = "arrival_s,duration_s,gpus\n";
  for (int i = 0; i < 20'001; ++i) {
    rows += "0,300,8\n";
  }
  dir.write("many.csv", rows);
  for (const char* queue : {"easy-backfill", "slack-backfill"}) {
    CAPTURE(queue);
    const Run r =
        runSim(dir, {"--workload", "w1", "--jobs", "200000", "--lambda", "1", "--queue", queue},
               std::chrono::seconds(10));
    REQUIRE(r.finished);
    CHECK(r.exitCode == 1);
    CHECK_THAT(r.err, Catch::Contains(std::string("the ") + queue +
                                      " queue takes at most 20000 jobs (got 200000)"));
    const Run csv =
        runSim(dir, {"--trace-csv", "many.csv", "--queue", queue, "--summary-out", "sum.json"},
               std::chrono::seconds(10));
    REQUIRE(csv.finished);
    CHECK(csv.exitCode == 1);
    CHECK_THAT(csv.err, Catch::Contains("at most 20000 jobs (got 20001)"));
    CHECK_FALSE(fs::exists(dir.path() / "sum.json"));
  }
}
