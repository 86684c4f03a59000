#include "libcore/cdi/cdi_store.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "libcore/base/error_codes.hpp"
#include "libcore/base/file_io.hpp"
#include "libcore/base/json_guard.hpp"
#include "libcore/cdi/cdi_spec.hpp"

namespace kc::cdi {
namespace {

constexpr std::string_view kSpecSuffix = ".json";
constexpr unsigned kFileMode = 0644;
constexpr unsigned kDirMode = 0755;

// The shared file layer's errors, said to be about CDI.
Error cdiError(Error e) {
  e.message = "cdi: " + e.message;
  return e;
}

std::string fileNameOf(std::string_view tag) {
  return specFilePrefix() + "_" + std::string(tag) + std::string(kSpecSuffix);
}

Error badTag(std::string_view tag) {
  return makeError(errc::kInvalid, "cdi: invalid spec tag '" + std::string(tag.substr(0, 120)) +
                                       "' (want [A-Za-z0-9_.-], at most " +
                                       std::to_string(kMaxTagLength) + ", not starting with '.')");
}

}  // namespace

std::vector<std::string> presentControlNodes(const std::string& devRoot) {
  std::vector<std::string> out;
  for (std::string_view node : kControlNodeNames) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(devRoot) / node, ec)) {
      out.emplace_back(node);
    }
  }
  return out;
}

SpecDir::SpecDir(std::string dir) : dir_(std::move(dir)) {}

bool SpecDir::isValidTag(std::string_view tag) {
  if (tag.empty() || tag.size() > kMaxTagLength || tag.front() == '.') {
    return false;
  }
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

std::string SpecDir::pathFor(std::string_view tag) const {
  if (!isValidTag(tag)) {
    return "";
  }
  return dir_ + "/" + fileNameOf(tag);
}

Status SpecDir::write(std::string_view tag, const nlohmann::json& spec) {
  if (!isValidTag(tag)) {
    return badTag(tag);
  }
  if (auto ours = parseOurSpec(spec); !ours) {
    return makeError(errc::kInvalid, "cdi: refusing to write spec '" + std::string(tag) +
                                         "': " + ours.error().message);
  }
  const std::string text = spec.dump(2) + "\n";
  if (text.size() > kMaxSpecBytes) {
    return makeError(errc::kTooLarge, "cdi: spec '" + std::string(tag) + "' is over " +
                                          std::to_string(kMaxSpecBytes) + " bytes");
  }
  const std::string path = pathFor(tag);
  // kubelet repeats Prepare and Allocate: the same spec again must not wake every runtime's
  // directory watch.
  if (auto existing = readFileBounded(path, kMaxSpecBytes); existing && *existing == text) {
    return okStatus();
  }
  if (Status made = ensureDirectory(dir_, kDirMode); !made) {
    return cdiError(made.error());
  }
  if (Status written = replaceFileAtomically(path, text, kFileMode); !written) {
    return cdiError(written.error());
  }
  return okStatus();
}

Status SpecDir::remove(std::string_view tag) {
  if (!isValidTag(tag)) {
    return badTag(tag);
  }
  if (Status removed = removeFileDurably(pathFor(tag)); !removed) {
    return cdiError(removed.error());
  }
  return okStatus();
}

Result<nlohmann::json> SpecDir::read(std::string_view tag) const {
  if (!isValidTag(tag)) {
    return badTag(tag);
  }
  const std::string path = pathFor(tag);
  auto text = readFileBounded(path, kMaxSpecBytes);
  if (!text) {
    return cdiError(std::move(text).error());
  }
  auto doc = parseJsonGuarded(*text, "cdi spec " + path, kMaxSpecBytes);
  if (!doc) {
    return makeError(errc::kInvalid, doc.error().message);
  }
  return std::move(*doc);
}

std::vector<std::string> SpecDir::tags() const {
  const std::string prefix = specFilePrefix() + "_";
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() + kSpecSuffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(kSpecSuffix)) {
      continue;
    }
    std::string tag = name.substr(prefix.size(), name.size() - prefix.size() - kSpecSuffix.size());
    std::error_code typeEc;
    if (isValidTag(tag) && it->is_regular_file(typeEc) && !it->is_symlink(typeEc)) {
      out.push_back(std::move(tag));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kc::cdi
