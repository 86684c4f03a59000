// libcore/cdi: device names, the spec's exact shape, the strict reader, the spec directory.
// Expected values are written by hand from ../shared/peers/cdi/SPEC.md (the hashes with an
// independent FNV-1a 64 in Python), never computed by the code under test.
#include "libcore/cdi/cdi_spec.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "libcore/cdi/cdi_store.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using kc::cdi::CdiGpu;
using nlohmann::json;

std::vector<CdiGpu> twoGpus() {
  return {CdiGpu{.name = "c0.1", .gpuId = "c0.1", .uuid = "GPU-aaa", .minor = 3},
          CdiGpu{.name = "c1.2", .gpuId = "c1.2", .uuid = "GPU-bbb", .minor = 0}};
}

kc::cdi::SpecOptions hostOptions() {
  kc::cdi::SpecOptions o;
  o.devRoot = "/host/dev/";
  // Out of order, with a name that is not a control node: the spec lists them in
  // kControlNodeNames' order and drops the stranger.
  o.controlNodes = {"nvidia-uvm", "nvidiactl", "nvidia-caps"};
  return o;
}

std::vector<std::string> listDir(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct stat statOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("cdiDeviceName keeps valid names and maps the rest to valid, hashed ones", "[cdi]") {
  const auto [raw, expected] = GENERATE(table<std::string, std::string>({
      // SPEC.md v0.5.0: alphanumeric at both ends, [A-Za-z0-9_.-] between, digit first allowed.
      {"c0.1", "c0.1"},
      {"GPU-1234", "GPU-1234"},
      {"0gpu", "0gpu"},
      {"a", "a"},
      {"A_b.c-9", "A_b.c-9"},
      // Invalid characters become '-', ends are trimmed to alphanumerics, a hash is appended.
      {"c0/1", "c0-1_h4c4c3491cee836ce"},
      {"Chassis 0:GPU 7", "Chassis-0-GPU-7_hf508d1c6ecae78ce"},
      {"", "hcbf29ce484222325"},
      // A valid string that has the mapped form is mapped too, so it cannot take the name of
      // "c0/1" mapped above.
      {"a-b_h4c4c3491cee836ce", "a-b_h4c4c3491cee836ce_h282af11da7b3ca75"},
  }));
  CAPTURE(raw);
  CHECK(kc::cdi::cdiDeviceName(raw) == expected);
  CHECK(kc::cdi::isValidDeviceName(expected));
}

TEST_CASE("cdiDeviceName: every output is valid and distinct inputs never collide", "[cdi]") {
  std::vector<std::string> inputs = {
      "x",
      "-x",
      "x-",
      ".x",
      "x.",
      "_x",
      "x_",
      "a/b",
      "a:b",
      "a b",
      "a-b",
      "a_b",
      "a.b",
      "A-B",
      "ü",
      "é",
      "-",
      ".",
      "..",
      "/",
      "",
      " ",
      "0",
      "00",
      "h",
      "x_h",
      "hcbf29ce484222325",       // the mapped name of "" (mapped form: rehashed)
      "c0-1_h4c4c3491cee836ce",  // the mapped name of "c0/1"
      "c0/1"};
  inputs.push_back(std::string(128, 'a'));  // longest kept
  inputs.push_back(std::string(129, 'a'));  // too long: shortened and hashed
  inputs.push_back(std::string(130, 'a'));
  inputs.push_back(std::string(1000, '/') + "tail");
  for (int chassis = 0; chassis < 40; ++chassis) {
    for (int gpu = 0; gpu < 40; ++gpu) {
      inputs.push_back("chassis/" + std::to_string(chassis) + "/gpu:" + std::to_string(gpu));
      inputs.push_back("chassis-" + std::to_string(chassis) + "-gpu-" + std::to_string(gpu));
    }
  }
  std::set<std::string> seen;
  for (const std::string& raw : inputs) {
    CAPTURE(raw);
    const std::string name = kc::cdi::cdiDeviceName(raw);
    CHECK(kc::cdi::isValidDeviceName(name));
    CHECK(name.size() <= kc::cdi::kMaxKeptNameLength);
    CHECK(name == kc::cdi::cdiDeviceName(raw));  // stable
    CHECK(seen.insert(name).second);
  }
  CHECK(kc::cdi::cdiDeviceName(std::string(128, 'a')) == std::string(128, 'a'));
  CHECK(kc::cdi::cdiDeviceName(std::string(129, 'a')).starts_with(std::string(64, 'a') + "_h"));
}

TEST_CASE("isValidDeviceName follows SPEC.md's name rule", "[cdi]") {
  const auto [name, valid] = GENERATE(table<std::string, bool>({
      {"a", true},
      {"9", true},
      {"a-b_c.d", true},
      {"", false},
      {"-a", false},
      {"a-", false},
      {".a", false},
      {"a.", false},
      {"_a", false},
      {"a/b", false},
      {"a=b", false},
      {"a b", false},
  }));
  CAPTURE(name);
  CHECK(kc::cdi::isValidDeviceName(name) == valid);
}

TEST_CASE("qualifiedName and the spec file prefix", "[cdi]") {
  CHECK(kc::cdi::qualifiedName("c0.1") == "kubecomp.io/gpu=c0.1");
  CHECK(kc::cdi::specFilePrefix() == "kubecomp.io-gpu");
}

TEST_CASE("buildSpec: the device-plugin form of two GPUs, exactly", "[cdi]") {
  const json expected = json::parse(R"json({
    "cdiVersion": "0.5.0",
    "kind": "kubecomp.io/gpu",
    "devices": [
      {"name": "c0.1", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia3", "hostPath": "/host/dev/nvidia3"}],
        "env": ["NVIDIA_VISIBLE_DEVICES=GPU-aaa", "KUBECOMP_GPU_IDS=c0.1"]}},
      {"name": "c1.2", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/host/dev/nvidia0"}],
        "env": ["NVIDIA_VISIBLE_DEVICES=GPU-bbb", "KUBECOMP_GPU_IDS=c1.2"]}}
    ],
    "containerEdits": {
      "deviceNodes": [
        {"path": "/dev/nvidiactl", "hostPath": "/host/dev/nvidiactl"},
        {"path": "/dev/nvidia-uvm", "hostPath": "/host/dev/nvidia-uvm"}
      ]
    }
  })json");
  CHECK(kc::cdi::buildSpec(twoGpus(), hostOptions(), false) == expected);
}

TEST_CASE("buildSpec: a claim's spec puts the comma-joined env at spec level", "[cdi]") {
  const json expected = json::parse(R"json({
    "cdiVersion": "0.5.0",
    "kind": "kubecomp.io/gpu",
    "devices": [
      {"name": "c0.1", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia3", "hostPath": "/dev/nvidia3"}]}},
      {"name": "c1.2", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"}]}}
    ],
    "containerEdits": {
      "deviceNodes": [
        {"path": "/dev/nvidiactl", "hostPath": "/dev/nvidiactl"},
        {"path": "/dev/nvidia-uvm", "hostPath": "/dev/nvidia-uvm"},
        {"path": "/dev/nvidia-uvm-tools", "hostPath": "/dev/nvidia-uvm-tools"}
      ],
      "env": ["NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb", "KUBECOMP_GPU_IDS=c0.1,c1.2"]
    }
  })json");
  kc::cdi::SpecOptions o;
  o.controlNodes = {"nvidia-uvm-tools", "nvidia-uvm", "nvidiactl"};
  CHECK(kc::cdi::buildSpec(twoGpus(), o, true) == expected);
}

TEST_CASE("buildSpec: no control nodes and per-device env leave out spec-level edits", "[cdi]") {
  const json expected = json::parse(R"json({
    "cdiVersion": "0.5.0",
    "kind": "kubecomp.io/gpu",
    "devices": [
      {"name": "7", "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia7", "hostPath": "/dev/nvidia7"}],
        "env": ["NVIDIA_VISIBLE_DEVICES=", "KUBECOMP_GPU_IDS=7"]}}
    ]
  })json");
  const CdiGpu gpu{.name = "7", .gpuId = "7", .uuid = "", .minor = 7};
  CHECK(kc::cdi::buildSpec({gpu}, kc::cdi::SpecOptions{}, false) == expected);
}

TEST_CASE("parseOurSpec reads back what buildSpec wrote, in both forms", "[cdi]") {
  const bool claimEnv = GENERATE(false, true);
  CAPTURE(claimEnv);
  std::vector<CdiGpu> gpus = twoGpus();
  gpus.push_back(CdiGpu{.name = "0x", .gpuId = "c2/0", .uuid = "", .minor = 2147483647});
  auto back = kc::cdi::parseOurSpec(kc::cdi::buildSpec(gpus, hostOptions(), claimEnv));
  REQUIRE(back.ok());
  CHECK(*back == gpus);
}

TEST_CASE("parseOurSpec refuses what is not our spec, naming the field", "[cdi]") {
  using Mutation = std::function<void(json&)>;
  const auto devEnv = [](json& s) -> json& { return s["devices"][0]["containerEdits"]["env"]; };
  const auto devNode = [](json& s) -> json& {
    return s["devices"][0]["containerEdits"]["deviceNodes"][0];
  };
  // Device 0's node as /dev/<node> on host /host/dev/<node>.
  const auto setNode = [&](json& s, const std::string& node) {
    devNode(s) = {{"path", "/dev/" + node}, {"hostPath", "/host/dev/" + node}};
  };
  const std::vector<std::tuple<std::string, Mutation, std::string>> cases = {
      {"not an object", [](json& s) { s = json::array(); }, "spec"},
      {"other version", [](json& s) { s["cdiVersion"] = "0.6.0"; }, "cdiVersion"},
      {"version missing", [](json& s) { s.erase("cdiVersion"); }, "cdiVersion"},
      {"other kind", [](json& s) { s["kind"] = "nvidia.com/gpu"; }, "kind"},
      {"unknown field", [](json& s) { s["annotations"] = json::object(); }, "annotations"},
      {"no devices", [](json& s) { s["devices"] = json::array(); }, "devices"},
      {"devices missing", [](json& s) { s.erase("devices"); }, "devices"},
      {"bad name", [](json& s) { s["devices"][1]["name"] = "-c1"; }, "devices[1].name"},
      {"name not a string", [](json& s) { s["devices"][1]["name"] = 5; }, "devices[1].name"},
      {"repeated name", [](json& s) { s["devices"][1]["name"] = "c0.1"; }, "devices[1].name"},
      {"device field", [](json& s) { s["devices"][0]["annotations"] = 1; }, "devices[0]"},
      {"edits missing", [](json& s) { s["devices"][0].erase("containerEdits"); },
       "devices[0].containerEdits"},
      {"two nodes",
       [&](json& s) { s["devices"][0]["containerEdits"]["deviceNodes"].push_back(devNode(s)); },
       "devices[0].containerEdits.deviceNodes"},
      {"negative minor", [&](json& s) { setNode(s, "nvidia-1"); }, "deviceNodes[0].path"},
      {"leading zero", [&](json& s) { setNode(s, "nvidia03"); }, "deviceNodes[0].path"},
      {"minor overflow", [&](json& s) { setNode(s, "nvidia2147483648"); }, "deviceNodes[0].path"},
      {"control node as GPU", [&](json& s) { setNode(s, "nvidiactl"); }, "deviceNodes[0].path"},
      {"relative hostPath", [&](json& s) { devNode(s)["hostPath"] = "dev/nvidia3"; },
       "deviceNodes[0].hostPath"},
      {"other node on host", [&](json& s) { devNode(s)["hostPath"] = "/dev/nvidia4"; },
       "deviceNodes[0].hostPath"},
      {"node field", [&](json& s) { devNode(s)["permissions"] = "rw"; }, "deviceNodes[0]"},
      {"repeated minor",
       [](json& s) {
         s["devices"][1]["containerEdits"]["deviceNodes"][0] = {{"path", "/dev/nvidia3"},
                                                                {"hostPath", "/dev/nvidia3"}};
       },
       "devices[1].containerEdits.deviceNodes[0].path"},
      {"env missing", [](json& s) { s["devices"][1]["containerEdits"].erase("env"); }, "env"},
      {"foreign env", [&](json& s) { devEnv(s)[1] = "FOO=1"; }, "devices[0].containerEdits.env"},
      {"repeated env", [&](json& s) { devEnv(s)[1] = "NVIDIA_VISIBLE_DEVICES=x"; },
       "devices[0].containerEdits.env"},
      {"env without =", [&](json& s) { devEnv(s)[1] = "KUBECOMP_GPU_IDS"; },
       "devices[0].containerEdits.env"},
      {"three env", [&](json& s) { devEnv(s).push_back("KUBECOMP_GPU_IDS=x"); },
       "devices[0].containerEdits.env"},
      {"env both places",
       [](json& s) {
         s["containerEdits"]["env"] = {"NVIDIA_VISIBLE_DEVICES=a,b", "KUBECOMP_GPU_IDS=c,d"};
       },
       "containerEdits.env"},
      {"foreign control node",
       [](json& s) {
         s["containerEdits"]["deviceNodes"][0] = {{"path", "/dev/nvidia-caps"},
                                                  {"hostPath", "/dev/nvidia-caps"}};
       },
       "containerEdits.deviceNodes[0].path"},
      {"repeated control node",
       [](json& s) {
         s["containerEdits"]["deviceNodes"][1] = s["containerEdits"]["deviceNodes"][0];
       },
       "containerEdits.deviceNodes[1].path"},
      {"spec edits field", [](json& s) { s["containerEdits"]["mounts"] = json::array(); },
       "mounts"},
  };
  const std::size_t index = GENERATE_COPY(range<std::size_t>(0, cases.size()));
  const auto& [what, mutate, field] = cases[index];
  CAPTURE(what);
  json spec = kc::cdi::buildSpec(twoGpus(), hostOptions(), false);
  REQUIRE(kc::cdi::parseOurSpec(spec).ok());
  mutate(spec);
  auto bad = kc::cdi::parseOurSpec(spec);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  CHECK_THAT(bad.error().message, Catch::Contains(field));
}

TEST_CASE("parseOurSpec: a claim's env must list one value per device", "[cdi]") {
  json spec = kc::cdi::buildSpec(twoGpus(), kc::cdi::SpecOptions{}, true);
  REQUIRE(kc::cdi::parseOurSpec(spec).ok());
  spec["containerEdits"]["env"][1] = "KUBECOMP_GPU_IDS=c0.1,c1.2,c9.9";
  auto bad = kc::cdi::parseOurSpec(spec);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("containerEdits.env"));
}

TEST_CASE("parseOurSpec: a spec with no env at all is ours, one with env on some devices is not",
          "[cdi]") {
  // The device plugin's node spec (cdi-cri): the env comes with Allocate, per container.
  json spec = kc::cdi::buildSpec(twoGpus(), kc::cdi::SpecOptions{}, false);
  for (auto& d : spec["devices"]) {
    d["containerEdits"].erase("env");
  }
  auto ok = kc::cdi::parseOurSpec(spec);
  REQUIRE(ok.ok());
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[0].uuid.empty());
  spec["devices"][0]["containerEdits"]["env"] =
      json::array({"NVIDIA_VISIBLE_DEVICES=GPU-x", "KUBECOMP_GPU_IDS=c0.1"});
  auto bad = kc::cdi::parseOurSpec(spec);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("missing on some device"));
}

TEST_CASE("SpecDir: write, rewrite, remove, tags", "[cdi]") {
  kc::testing::TempDir tmp;
  const std::string dir = tmp.file("run/cdi");  // absent: created on the first write
  kc::cdi::SpecDir specs(dir);
  const std::string path = dir + "/kubecomp.io-gpu_node.json";
  CHECK(specs.pathFor("node") == path);
  CHECK(specs.tags().empty());

  const json first = kc::cdi::buildSpec(twoGpus(), hostOptions(), false);
  REQUIRE(specs.write("node", first).ok());
  CHECK((statOf(dir).st_mode & 07777) == 0755);
  const struct stat written = statOf(path);
  CHECK((written.st_mode & 07777) == 0644);
  auto back = specs.read("node");
  REQUIRE(back.ok());
  CHECK(*back == first);
  CHECK(specs.tags() == std::vector<std::string>{"node"});

  // The same content again touches nothing (the file keeps its inode: no rename happened).
  REQUIRE(specs.write("node", first).ok());
  CHECK(statOf(path).st_ino == written.st_ino);

  // New content replaces the file whole; no temp file is left behind.
  const json second = kc::cdi::buildSpec({twoGpus()[0]}, kc::cdi::SpecOptions{}, false);
  REQUIRE(specs.write("node", second).ok());
  CHECK(statOf(path).st_ino != written.st_ino);
  CHECK(*specs.read("node") == second);
  REQUIRE(specs.write("claim-b", second).ok());
  REQUIRE(specs.write("claim-a", first).ok());
  CHECK(listDir(dir) == std::vector<std::string>{"kubecomp.io-gpu_claim-a.json",
                                                 "kubecomp.io-gpu_claim-b.json",
                                                 "kubecomp.io-gpu_node.json"});
  CHECK(specs.tags() == std::vector<std::string>{"claim-a", "claim-b", "node"});

  // Unprepare removes exactly its file, and again is a success.
  REQUIRE(specs.remove("claim-b").ok());
  CHECK(specs.tags() == std::vector<std::string>{"claim-a", "node"});
  REQUIRE(specs.remove("claim-b").ok());
  auto gone = specs.read("claim-b");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == "not_found");
}

TEST_CASE("SpecDir refuses a tag that could leave the directory, writing nothing", "[cdi]") {
  const std::string tag = GENERATE(std::string(""), std::string("a/b"), std::string(".."),
                                   std::string("../x"), std::string(".hidden"), std::string("a b"),
                                   std::string("a\\b"), std::string(101, 'a'));
  CAPTURE(tag);
  kc::testing::TempDir tmp;
  kc::cdi::SpecDir specs(tmp.file("cdi"));
  CHECK(specs.pathFor(tag).empty());
  const auto wrote = specs.write(tag, kc::cdi::buildSpec(twoGpus(), hostOptions(), false));
  REQUIRE_FALSE(wrote.ok());
  CHECK(wrote.error().code == "invalid");
  CHECK(listDir(tmp.path()).empty());  // not even the directory
  CHECK(specs.remove(tag).error().code == "invalid");
  CHECK(specs.read(tag).error().code == "invalid");
  CHECK(kc::cdi::SpecDir::isValidTag(std::string(100, 'a')));
}

TEST_CASE("SpecDir refuses a spec a runtime could not load, writing nothing", "[cdi]") {
  kc::testing::TempDir tmp;
  kc::cdi::SpecDir specs(tmp.path().string());
  // No device: SPEC.md wants at least one.
  auto wrote = specs.write("node", kc::cdi::buildSpec({}, kc::cdi::SpecOptions{}, false));
  REQUIRE_FALSE(wrote.ok());
  CHECK(wrote.error().code == "invalid");
  CHECK_THAT(wrote.error().message, Catch::Contains("devices"));
  // An invalid device name.
  std::vector<CdiGpu> gpus = twoGpus();
  gpus[0].name = "c0/1";
  CHECK_FALSE(specs.write("node", kc::cdi::buildSpec(gpus, kc::cdi::SpecOptions{}, false)).ok());
  CHECK(listDir(tmp.path()).empty());
}

TEST_CASE("SpecDir::tags ignores other files, temp files and directories", "[cdi]") {
  kc::testing::TempDir tmp;
  kc::cdi::SpecDir specs(tmp.path().string());
  REQUIRE(specs.write("node", kc::cdi::buildSpec(twoGpus(), hostOptions(), false)).ok());
  tmp.write("nvidia.com-gpu.json", "{}");                    // another vendor's spec
  tmp.write("kubecomp.io-gpu_other.yaml", "{}");             // not ours (we write .json)
  tmp.write(".kubecomp.io-gpu_a.json.tmp-Ab12Cd", "{\"cd");  // a stale temp file (crash)
  tmp.write("kubecomp.io-gpu_.json", "{}");                  // empty tag
  tmp.write("kubecomp.io-gpu_bad tag.json", "{}");           // not a valid tag
  std::filesystem::create_directory(tmp.path() / "kubecomp.io-gpu_dir.json");
  CHECK(specs.tags() == std::vector<std::string>{"node"});
  CHECK(kc::cdi::SpecDir(tmp.file("absent")).tags().empty());
}

TEST_CASE("SpecDir::read is bounded and refuses what is not JSON", "[cdi]") {
  kc::testing::TempDir tmp;
  kc::cdi::SpecDir specs(tmp.path().string());
  tmp.write("kubecomp.io-gpu_big.json",
            "\"" + std::string(kc::cdi::kMaxSpecBytes, 'x') + "\"");  // 1 MiB + 2 bytes
  tmp.write("kubecomp.io-gpu_junk.json", "{\"cdiVersion\":");
  CHECK(specs.read("big").error().code == "too_large");
  CHECK(specs.read("junk").error().code == "invalid");
}

TEST_CASE("presentControlNodes lists the control nodes the host has, in order", "[cdi]") {
  kc::testing::TempDir tmp;
  CHECK(kc::cdi::presentControlNodes(tmp.path().string()).empty());
  tmp.write("nvidia-uvm-tools", "");
  tmp.write("nvidiactl", "");
  tmp.write("nvidia0", "");
  CHECK(kc::cdi::presentControlNodes(tmp.path().string()) ==
        std::vector<std::string>{"nvidiactl", "nvidia-uvm-tools"});
}
