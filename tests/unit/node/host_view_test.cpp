// The pure half of the node's host view: the nvidia driver's information file, which PCI
// functions are GPUs and whether they are usable, and the assembled view's duplicate rules.

#include "libcore/node/host_view.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <string>

using kc::node::HostGpu;
using kc::node::HostView;
using kc::node::PciFunctionFiles;

namespace {

constexpr const char* kUuid = "GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f";

// The driver's real text (535 series), with the UUID, minor and bus location replaceable.
std::string info(const std::string& uuid = kUuid, const std::string& minor = "0",
                 const std::string& bus = "0000:3b:00.0", const std::string& excluded = "No") {
  return "Model: \t\t NVIDIA H100 80GB HBM3\n"
         "IRQ:   \t\t 0\n"
         "GPU UUID: \t " +
         uuid +
         "\n"
         "Video BIOS: \t 96.00.74.00.01\n"
         "Bus Type: \t PCIe\n"
         "DMA Size: \t 52 bits\n"
         "DMA Mask: \t 0xfffffffffffff\n"
         "Bus Location: \t " +
         bus +
         "\n"
         "Device Minor: \t " +
         minor +
         "\n"
         "GPU Firmware: \t 535.161.07\n"
         "GPU Excluded:\t " +
         excluded + "\n";
}

std::string crlf(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  return out;
}

HostGpu gpuAt(const std::string& bdf, const std::string& uuid, std::int32_t minor) {
  HostGpu g;
  g.bdf = bdf;
  g.uuid = uuid;
  g.minor = minor;
  g.driver = "nvidia";
  g.usable = true;
  return g;
}

}  // namespace

TEST_CASE("parseInformation reads the driver's file and refuses what it cannot trust", "[node]") {
  const std::string huge = info() + std::string(kc::node::kMaxInformationBytes, ' ');
  std::string atLimit = info();
  atLimit += std::string(kc::node::kMaxInformationBytes - atLimit.size(), '\n');
  // name, text, error code ("" = ok), words the error names, minor when ok
  const auto [name, text, code, mentions, minor] =
      GENERATE_COPY(table<std::string, std::string, std::string, std::string, int>({
          {"real format", info(), "", "", 0},
          {"CRLF line ends", crlf(info("GPU-5D1C4F6E-2A8B-4C3D-9E7F-0A1B2C3D4E5F", "7")), "", "",
           7},
          {"no blanks around the value", "GPU UUID:" + std::string(kUuid) + "\nDevice Minor:255",
           "", "", 255},
          {"exactly at the size limit", atLimit, "", "", 0},
          {"no UUID line", "Model: x\nDevice Minor: 0\n", "invalid", "GPU UUID", 0},
          {"no minor line", "GPU UUID: " + std::string(kUuid) + "\n", "invalid", "Device Minor", 0},
          {"minor over 255", info(kUuid, "256"), "invalid", "256", 0},
          {"negative minor", info(kUuid, "-1"), "invalid", "-1", 0},
          {"minor with a tail", info(kUuid, "3x"), "invalid", "3x", 0},
          {"empty minor", info(kUuid, ""), "invalid", "Device Minor", 0},
          {"UUID the driver could not read", info("??"), "invalid", "??", 0},
          {"UUID without prefix", info("5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5f"), "invalid",
           "5d1c4f6e", 0},
          {"UUID with a non-hex digit", info("GPU-5d1c4f6e-2a8b-4c3d-9e7f-0a1b2c3d4e5g"), "invalid",
           "4e5g", 0},
          {"UUID dashes misplaced", info("GPU-5d1c4f6e2-a8b-4c3d-9e7f-0a1b2c3d4e5f"), "invalid",
           "GPU UUID", 0},
          {"empty UUID", info(""), "invalid", "GPU UUID", 0},
          {"UUID twice", info() + "GPU UUID: \t " + std::string(kUuid) + "\n", "invalid", "repeats",
           0},
          {"one byte over the limit", huge, "too_large", "16384", 0},
          {"binary garbage",
           std::string("\x7f"
                       "ELF\x02\x01\x01\0\0\xff\xfe",
                       12),
           "invalid", "GPU UUID", 0},
          {"empty text", "", "invalid", "GPU UUID", 0},
      }));
  CAPTURE(name);
  const auto parsed = kc::node::parseInformation(text);
  if (code.empty()) {
    REQUIRE(parsed.ok());
    CHECK(parsed->uuid.size() == 40);
    CHECK(parsed->uuid.substr(0, 4) == "GPU-");
    CHECK(parsed->minor == minor);
  } else {
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == code);
    CHECK_THAT(parsed.error().message, Catch::Contains(mentions));
  }
}

TEST_CASE("parseInformation keeps the model, the bus location and the exclusion", "[node]") {
  const auto parsed = kc::node::parseInformation(info(kUuid, "3", "0000:3B:00.0", "Yes"));
  REQUIRE(parsed.ok());
  CHECK(parsed->model == "NVIDIA H100 80GB HBM3");
  CHECK(parsed->uuid == kUuid);
  CHECK(parsed->minor == 3);
  CHECK(parsed->busLocation == "0000:3b:00.0");
  CHECK(parsed->excluded);
  CHECK_FALSE(kc::node::parseInformation(info())->excluded);
}

TEST_CASE("classify: NVIDIA display controllers only, usable only on the nvidia driver", "[node]") {
  using Opt = std::optional<std::string>;
  const std::string good = info();
  // vendor, class, driver, information, is a GPU, reason ("" = usable)
  const auto [vendor, cls, driver, information, isGpu, reason] =
      GENERATE_COPY(table<std::string, std::string, std::string, Opt, bool, std::string>({
          {"0x10de\n", "0x030200\n", "nvidia", good, true, ""},  // 3D controller (H100)
          {"0x10de\n", "0x030000\n", "nvidia", good, true, ""},  // VGA (workstation boards)
          {"0x10DE", "0x030200", "nvidia", good, true, ""},
          {"0x10de\n", "0x040300\n", "nvidia", good, false, ""},  // the GPU's HDMI audio
          {"0x10de\n", "0x068000\n", "", Opt{}, false, ""},       // NVSwitch-side bridge
          {"0x1002\n", "0x030000\n", "amdgpu", good, false, ""},  // AMD
          {"0x8086\n", "0x030200\n", "nvidia", good, false, ""},  // wrong vendor, right class
          {"0x10de\n", "0x0302\n", "nvidia", good, false, ""},    // not sysfs's 24-bit form
          {"0x10de\n", "garbage", "nvidia", good, false, ""},
          {"", "", "", Opt{}, false, ""},
          {"0x10de\n", "0x030200\n", "", Opt{}, true, "no driver bound"},
          {"0x10de\n", "0x030200\n", "", good, true, "no driver bound"},
          {"0x10de\n", "0x030200\n", "vfio-pci", Opt{}, true, "bound to vfio-pci"},
          {"0x10de\n", "0x030200\n", "nouveau", Opt{}, true, "bound to nouveau"},
          {"0x10de\n", "0x030200\n", "nvidia", Opt{}, true, "no /proc/driver/nvidia entry"},
          {"0x10de\n", "0x030200\n", "nvidia", info("GPU-bad"), true,
           "information: GPU UUID 'GPU-bad' is not GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"},
          {"0x10de\n", "0x030200\n", "nvidia", info(kUuid, "0", "0000:86:00.0"), true,
           "information names bus location '0000:86:00.0'"},
          {"0x10de\n", "0x030200\n", "nvidia", info(kUuid, "0", "0000:3b:00.0", "Yes"), true,
           "excluded by the nvidia driver"},
      }));
  CAPTURE(vendor, cls, driver, information);
  PciFunctionFiles f;
  f.bdf = "0000:3b:00.0";
  f.vendor = vendor;
  f.pciClass = cls;
  f.driver = driver;
  f.information = information;
  const auto gpu = kc::node::classify(f);
  REQUIRE(gpu.has_value() == isGpu);
  if (gpu) {
    CHECK(gpu->reason == reason);
    CHECK(gpu->usable == reason.empty());
    CHECK(gpu->uuid == (gpu->usable ? kUuid : gpu->uuid));
  }
}

TEST_CASE("classify fills the GPU from its files", "[node]") {
  PciFunctionFiles f{"0000:3B:00.0",
                     "0x10de\n",
                     "0x030200\n",
                     "1\n",
                     "nvidia",
                     info(kUuid, "5", "0000:3b:00.0"),
                     ""};
  auto g = kc::node::classify(f);
  REQUIRE(g);
  CHECK(g->bdf == "0000:3b:00.0");
  CHECK(g->uuid == kUuid);
  CHECK(g->minor == 5);
  CHECK(g->numaNode == 1);
  CHECK(g->driver == "nvidia");
  CHECK(g->model == "NVIDIA H100 80GB HBM3");
  CHECK(g->usable);
  CHECK(g->devicePath() == "/dev/nvidia5");

  const auto [numa, expected] = GENERATE(table<std::string, int>(
      {{"-1\n", -1}, {"", -1}, {"0\n", 0}, {"3", 3}, {"x\n", -1}, {"-7\n", -1}}));
  CAPTURE(numa);
  f.numaNode = numa;
  CHECK(kc::node::classify(f)->numaNode == expected);

  // The scanner's reason (an information file it refused) wins over the text.
  f.informationError = "information file too large";
  g = kc::node::classify(f);
  CHECK_FALSE(g->usable);
  CHECK(g->reason == "information file too large");
  CHECK(g->uuid.empty());
  CHECK(g->devicePath().empty());
}

TEST_CASE("isBdf accepts only DDDD:BB:DD.F in hex", "[node]") {
  const auto [bdf, ok] = GENERATE(table<std::string, bool>({
      {"0000:3b:00.0", true},
      {"0000:3B:1f.7", true},
      {"ffff:ff:ff.0", true},
      {"0000:3b:00.8", false},
      {"000:3b:00.0", false},
      {"0000:3g:00.0", false},
      {"0000-3b-00.0", false},
      {"../x", false},
      {"0000:3b:00.0/..", false},
      {"", false},
  }));
  CAPTURE(bdf);
  CHECK(kc::node::isBdf(bdf) == ok);
}

TEST_CASE("assembleHostView sorts, and withholds GPUs that share a UUID or a minor", "[node]") {
  const std::string other = "GPU-00000000-0000-4000-8000-000000000001";
  HostView v =
      kc::node::assembleHostView({gpuAt("0000:86:00.0", kUuid, 1), gpuAt("0000:3b:00.0", kUuid, 0),
                                  gpuAt("0000:af:00.0", other, 2), gpuAt("0000:3b:00.0", other, 9)},
                                 {"earlier problem"});
  REQUIRE(v.gpus.size() == 3);
  CHECK(v.gpus[0].bdf == "0000:3b:00.0");
  CHECK(v.gpus[1].bdf == "0000:86:00.0");
  CHECK(v.gpus[2].bdf == "0000:af:00.0");
  CHECK_FALSE(v.gpus[0].usable);
  CHECK(v.gpus[0].reason == "UUID also at 0000:86:00.0");
  CHECK_FALSE(v.gpus[1].usable);
  CHECK(v.gpus[1].reason == "UUID also at 0000:3b:00.0");
  CHECK(v.gpus[2].usable);
  REQUIRE(v.problems.size() == 3);
  CHECK(v.problems[0] == "earlier problem");
  CHECK_THAT(v.problems[1], Catch::Contains("0000:3b:00.0") && Catch::Contains("twice"));
  CHECK_THAT(v.problems[2],
             Catch::Contains(kUuid) && Catch::Contains("0000:3b:00.0, 0000:86:00.0"));
  CHECK(v.byUuid(kUuid) == nullptr);
  REQUIRE(v.byUuid(other) != nullptr);
  CHECK(v.byUuid(other)->bdf == "0000:af:00.0");
  CHECK(v.byUuid("") == nullptr);
  REQUIRE(v.byBdf("0000:86:00.0") != nullptr);
  CHECK(v.byBdf("0000:AF:00.0") == &v.gpus[2]);
  CHECK(v.byBdf("0000:00:00.0") == nullptr);

  // One minor at two functions: both would open /dev/nvidia4.
  v = kc::node::assembleHostView({gpuAt("0000:3b:00.0", kUuid, 4), gpuAt("0000:86:00.0", other, 4)},
                                 {});
  CHECK(v.gpus[0].reason == "minor also at 0000:86:00.0");
  CHECK(v.gpus[1].reason == "minor also at 0000:3b:00.0");
  CHECK(v.byUuid(kUuid) == nullptr);
  REQUIRE(v.problems.size() == 1);

  // A GPU already withheld keeps its first reason and gains the second.
  HostGpu unbound = gpuAt("0000:86:00.0", kUuid, 1);
  unbound.usable = false;
  unbound.reason = "no driver bound";
  v = kc::node::assembleHostView({gpuAt("0000:3b:00.0", kUuid, 0), unbound}, {});
  CHECK(v.gpus[1].reason == "no driver bound; UUID also at 0000:3b:00.0");
  CHECK(v.byUuid(kUuid) == nullptr);
}

TEST_CASE("byUuid never hands out an unusable GPU or one named twice", "[node]") {
  HostView v;
  v.gpus = {gpuAt("0000:3b:00.0", kUuid, 0)};
  CHECK(v.byUuid(kUuid) == &v.gpus[0]);
  v.gpus[0].usable = false;
  CHECK(v.byUuid(kUuid) == nullptr);
  // Built by hand, not assembled: the duplicate is still refused.
  v.gpus = {gpuAt("0000:3b:00.0", kUuid, 0), gpuAt("0000:86:00.0", kUuid, 1)};
  CHECK(v.byUuid(kUuid) == nullptr);
}
