#include "libcore/node/host_view.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>

namespace kc::node {
namespace {

constexpr std::string_view kNvidiaVendor = "0x10de";
constexpr std::string_view kNvidiaDriver = "nvidia";
constexpr std::uint32_t kClassVga = 0x0300;
constexpr std::uint32_t kClass3d = 0x0302;
constexpr std::int32_t kMaxMinor = 255;  // /dev/nvidia0..255: the driver's minor range

bool isBlank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && isBlank(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

bool isHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

// Untrusted text shown in a message: bounded, control bytes replaced.
std::string shown(std::string_view s) {
  constexpr std::size_t kShown = 64;
  std::string out = "'";
  for (char c : s.substr(0, kShown)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out + (s.size() > kShown ? "...'" : "'");
}

// "GPU-" + 8-4-4-4-12 hex digits.
bool isGpuUuid(std::string_view s) {
  constexpr std::string_view kPrefix = "GPU-";
  if (s.size() != kPrefix.size() + 36 || s.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  const std::string_view body = s.substr(kPrefix.size());
  for (std::size_t i = 0; i < body.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? body[i] != '-' : !isHex(body[i])) {
      return false;
    }
  }
  return true;
}

std::optional<std::int32_t> parseInt(std::string_view s) {
  std::int32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    return std::nullopt;
  }
  return v;
}

// The "Key: value" lines we read; a repeated UUID or minor is refused rather than guessed.
struct InformationFields {
  std::optional<std::string_view> model;
  std::optional<std::string_view> uuid;
  std::optional<std::string_view> minor;
  std::optional<std::string_view> busLocation;
  std::optional<std::string_view> excluded;
};

Result<InformationFields> splitInformation(std::string_view text) {
  InformationFields f;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;  // a line the driver may add in a later version
    }
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    std::optional<std::string_view>* slot = key == "Model"          ? &f.model
                                            : key == "GPU UUID"     ? &f.uuid
                                            : key == "Device Minor" ? &f.minor
                                            : key == "Bus Location" ? &f.busLocation
                                            : key == "GPU Excluded" ? &f.excluded
                                                                    : nullptr;
    if (slot == nullptr) {
      continue;
    }
    if (slot->has_value()) {
      return makeError(errc::kInvalid, "information repeats \"" + std::string(key) + "\"");
    }
    *slot = value;
  }
  return f;
}

std::int32_t parseNuma(std::string_view text) {
  const auto v = parseInt(trim(text));
  return v && *v >= 0 ? *v : -1;
}

// "UUID also at <b>, <c>" for each GPU of a group sharing `key`, and one problem per group.
template <typename KeyOf>
void markShared(std::vector<HostGpu>& gpus, std::vector<std::string>& problems,
                const std::string& what, KeyOf keyOf) {
  std::map<std::string, std::vector<std::size_t>> at;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (auto key = keyOf(gpus[i]); key) {
      at[*key].push_back(i);
    }
  }
  for (const auto& [key, indices] : at) {
    if (indices.size() < 2) {
      continue;
    }
    std::string all;
    for (std::size_t i : indices) {
      all += (all.empty() ? "" : ", ") + gpus[i].bdf;
      std::string others;
      for (std::size_t j : indices) {
        if (j != i) {
          others += (others.empty() ? "" : ", ") + gpus[j].bdf;
        }
      }
      HostGpu& g = gpus[i];
      g.usable = false;
      g.reason += (g.reason.empty() ? "" : "; ") + what + " also at " + others;
    }
    problems.push_back(what + " " + key + " is reported at " + all +
                       "; none of them is handed to a pod");
  }
}

}  // namespace

Result<NvidiaInformation> parseInformation(std::string_view text) {
  if (text.size() > kMaxInformationBytes) {
    return makeError(errc::kTooLarge, "information text of " + std::to_string(text.size()) +
                                          " bytes is over the " +
                                          std::to_string(kMaxInformationBytes) + "-byte limit");
  }
  auto fields = splitInformation(text);
  if (!fields) {
    return std::move(fields).error();
  }
  if (!fields->uuid) {
    return makeError(errc::kInvalid, "information has no \"GPU UUID\"");
  }
  if (!fields->minor) {
    return makeError(errc::kInvalid, "information has no \"Device Minor\"");
  }
  if (!isGpuUuid(*fields->uuid)) {
    return makeError(errc::kInvalid, "GPU UUID " + shown(*fields->uuid) +
                                         " is not GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  }
  const auto minor = parseInt(*fields->minor);
  if (!minor || *minor < 0 || *minor > kMaxMinor) {
    return makeError(errc::kInvalid,
                     "Device Minor " + shown(*fields->minor) + " is not a number in 0..255");
  }
  NvidiaInformation info;
  info.model = std::string(fields->model.value_or(""));
  info.uuid = std::string(*fields->uuid);
  info.minor = *minor;
  info.busLocation = lower(fields->busLocation.value_or(""));
  info.excluded = lower(fields->excluded.value_or("")) == "yes";
  return info;
}

bool isBdf(std::string_view bdf) {
  // DDDD:BB:DD.F
  if (bdf.size() != 12 || bdf[4] != ':' || bdf[7] != ':' || bdf[10] != '.') {
    return false;
  }
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!isHex(bdf[i])) {
      return false;
    }
  }
  return bdf[11] >= '0' && bdf[11] <= '7';
}

bool isNvidiaDisplay(std::string_view vendor, std::string_view pciClass) {
  if (lower(trim(vendor)) != kNvidiaVendor) {
    return false;
  }
  // sysfs writes the 24-bit class code as exactly six hex digits after "0x".
  const std::string cls = lower(trim(pciClass));
  if (cls.size() != 8 || cls.substr(0, 2) != "0x") {
    return false;
  }
  std::uint32_t code = 0;
  const auto [end, ec] = std::from_chars(cls.data() + 2, cls.data() + cls.size(), code, 16);
  if (ec != std::errc() || end != cls.data() + cls.size()) {
    return false;
  }
  const std::uint32_t top = code >> 8;
  return top == kClassVga || top == kClass3d;
}

std::string HostGpu::devicePath() const {
  return minor ? "/dev/nvidia" + std::to_string(*minor) : std::string();
}

std::optional<HostGpu> classify(const PciFunctionFiles& files) {
  if (!isNvidiaDisplay(files.vendor, files.pciClass)) {
    return std::nullopt;
  }
  HostGpu g;
  g.bdf = lower(trim(files.bdf));
  g.numaNode = parseNuma(files.numaNode);
  g.driver = std::string(trim(files.driver));
  std::string infoReason;
  if (!files.informationError.empty()) {
    infoReason = files.informationError;
  } else if (!files.information) {
    infoReason = "no /proc/driver/nvidia entry";
  } else if (auto info = parseInformation(*files.information); !info) {
    infoReason = "information: " + info.error().message;
  } else if (!info->busLocation.empty() && info->busLocation != g.bdf) {
    // Another GPU's entry: its UUID and minor must not be taken for this one's.
    infoReason = "information names bus location " + shown(info->busLocation);
  } else {
    g.uuid = info->uuid;
    g.minor = info->minor;
    g.model = info->model;
    if (info->excluded) {
      infoReason = "excluded by the nvidia driver";
    }
  }
  if (g.driver.empty()) {
    g.reason = "no driver bound";
  } else if (g.driver != kNvidiaDriver) {
    g.reason = "bound to " + g.driver;
  } else {
    g.reason = infoReason;
  }
  g.usable = g.reason.empty();
  return g;
}

const HostGpu* HostView::byUuid(std::string_view uuid) const {
  if (uuid.empty()) {
    return nullptr;
  }
  const HostGpu* found = nullptr;
  for (const HostGpu& g : gpus) {
    if (g.uuid == uuid) {
      if (found != nullptr) {
        return nullptr;  // not unique, whatever assembleHostView was told
      }
      found = &g;
    }
  }
  return found != nullptr && found->usable ? found : nullptr;
}

const HostGpu* HostView::byBdf(std::string_view bdf) const {
  const std::string wanted = lower(bdf);
  for (const HostGpu& g : gpus) {
    if (g.bdf == wanted) {
      return &g;
    }
  }
  return nullptr;
}

HostView assembleHostView(std::vector<HostGpu> gpus, std::vector<std::string> problems) {
  HostView view;
  view.problems = std::move(problems);
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const HostGpu& a, const HostGpu& b) { return a.bdf < b.bdf; });
  for (HostGpu& g : gpus) {
    if (!view.gpus.empty() && view.gpus.back().bdf == g.bdf) {
      view.problems.push_back("PCI function " + g.bdf + " listed twice; the first kept");
      continue;
    }
    view.gpus.push_back(std::move(g));
  }
  markShared(view.gpus, view.problems, "UUID", [](const HostGpu& g) {
    return g.uuid.empty() ? std::nullopt : std::optional<std::string>(g.uuid);
  });
  // Two GPUs with one minor would share /dev/nvidia<n>: a pod would get the other one.
  markShared(view.gpus, view.problems, "minor", [](const HostGpu& g) {
    return g.minor ? std::optional<std::string>(std::to_string(*g.minor)) : std::nullopt;
  });
  return view;
}

}  // namespace kc::node
