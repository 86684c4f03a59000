#pragma once
// The node's own view of its NVIDIA GPUs, read from sysfs and procfs without NVML: which PCI
// functions are NVIDIA display controllers, which driver holds them, and the UUID and device
// minor the nvidia driver reports. This header is the pure part (parsing, classification,
// assembly); host_scan.hpp reads the files. A GPU is handed to a pod only when it is usable:
// bound to the nvidia driver with a well-formed UUID and minor that no other GPU shares.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::node {

// Where the host's pseudo file systems are mounted; tests and simulators point these at fake
// trees with the same layout.
struct HostRoots {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
  std::string dev = "/dev";
};

// The fields we use from /proc/driver/nvidia/gpus/<BDF>/information.
struct NvidiaInformation {
  std::string model;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::optional<std::int32_t> minor;
  std::string busLocation;  // lowercased; "" when the file has no "Bus Location"
  bool excluded = false;    // "GPU Excluded: Yes": the driver refuses to use it

  friend bool operator==(const NvidiaInformation&, const NvidiaInformation&) = default;
};

inline constexpr std::size_t kMaxInformationBytes = 16 * 1024;

// Parses the text of an information file ("Key: \t value" lines; CRLF and any whitespace
// around the value accepted). Error "invalid" naming what is wrong when the text has no
// "GPU UUID" or no "Device Minor", repeats one of them, has a minor that is not 0..255 or a
// UUID that is not "GPU-" + the 36-character 8-4-4-4-12 hex form; "too_large" for a text over
// kMaxInformationBytes.
Result<NvidiaInformation> parseInformation(std::string_view text);

// True for "DDDD:BB:DD.F" in hex (either case), the form of a PCI function's sysfs name.
bool isBdf(std::string_view bdf);

// True when the vendor file says 0x10de and the class file's top 16 bits are 0x0300 (VGA) or
// 0x0302 (3D controller); both as read from sysfs ("0x10de\n", "0x030200\n").
bool isNvidiaDisplay(std::string_view vendor, std::string_view pciClass);

// What one PCI function directory holds (read by the scanner; strings as read, trailing
// newline allowed).
struct PciFunctionFiles {
  std::string bdf;
  std::string vendor;
  std::string pciClass;
  std::string numaNode;
  std::string driver;                      // basename of the driver link target, "" when no link
  std::optional<std::string> information;  // nullopt: no information file
  // Set by the scanner when the information file exists but was not read (too large,
  // unreadable); it is then the GPU's reason and `information` is ignored.
  std::string informationError;
};

struct HostGpu {
  std::string bdf;   // "0000:3b:00.0", lowercased
  std::string uuid;  // "" unknown
  std::optional<std::int32_t> minor;
  std::int32_t numaNode = -1;  // -1 unknown / no NUMA
  std::string driver;          // "" unbound
  std::string model;
  bool usable = false;  // driver "nvidia" bound AND information parsed with uuid and minor
  std::string reason;   // when !usable, for people

  // "/dev/nvidia<minor>" or "" (the path inside the host, not under a root).
  std::string devicePath() const;

  friend bool operator==(const HostGpu&, const HostGpu&) = default;
};

// nullopt when the function is not an NVIDIA display controller (isNvidiaDisplay). Otherwise
// the GPU, usable or with the first reason it is not: "no driver bound", "bound to <driver>",
// the scanner's informationError, "no /proc/driver/nvidia entry", "information: <parse
// error>", "information names bus location <x>", "excluded by the nvidia driver".
std::optional<HostGpu> classify(const PciFunctionFiles& files);

struct HostView {
  std::vector<HostGpu> gpus;          // sorted by bdf
  std::vector<std::string> problems;  // unreadable entries, duplicate UUIDs, oversized files

  // Only a usable GPU whose UUID is unique in the view; nullptr otherwise.
  const HostGpu* byUuid(std::string_view uuid) const;
  // Any GPU at that function (either case); nullptr when none.
  const HostGpu* byBdf(std::string_view bdf) const;

  friend bool operator==(const HostView&, const HostView&) = default;
};

// Sorts by bdf and keeps the first of repeated bdfs. A UUID (or device minor) found at more
// than one bdf makes every such GPU !usable with reason "UUID also at <bdf>[, <bdf>...]" (or
// "minor <n> also at ...") and adds a problem: a pod must never get a GPU that another name
// can also reach.
HostView assembleHostView(std::vector<HostGpu> gpus, std::vector<std::string> problems);

}  // namespace kc::node
