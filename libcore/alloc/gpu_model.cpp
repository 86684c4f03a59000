#include "libcore/alloc/gpu_model.hpp"

#include <algorithm>

namespace kc::alloc {
namespace {

std::string_view trimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

bool validGpuModelName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == ' ' || name.back() == ' ' ||
      name.find("  ") != std::string_view::npos) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' ||
           c == '_' || c == '.' || c == '(' || c == ')' || c == '+' || c == '/' || c == ' ';
  });
}

Result<GpuModelFilter> GpuModelFilter::parse(std::string_view text, char separator) {
  GpuModelFilter out;
  if (trimBlanks(text).empty()) {
    return out;
  }
  std::string_view rest = text;
  while (true) {
    const std::size_t at = rest.find(separator);
    const std::string_view name = trimBlanks(rest.substr(0, at));
    if (name.empty()) {
      return makeError(kc::errc::kInvalid, "GPU model list '" + std::string(text) +
                                               "' has an empty name (models joined by '" +
                                               std::string(1, separator) + "')");
    }
    if (!validGpuModelName(name)) {
      return makeError(kc::errc::kInvalid, "GPU model list '" + std::string(text) + "': '" +
                                               std::string(name) + "' is not a GPU model name (" +
                                               std::string(kGpuModelNameRule) + ")");
    }
    out.models_.emplace_back(name);
    if (at == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(at + 1);
  }
  std::sort(out.models_.begin(), out.models_.end());
  out.models_.erase(std::unique(out.models_.begin(), out.models_.end()), out.models_.end());
  return out;
}

bool GpuModelFilter::accepts(std::string_view model) const {
  return models_.empty() || std::binary_search(models_.begin(), models_.end(), model);
}

std::string GpuModelFilter::toString(char separator) const {
  std::string out;
  for (const std::string& m : models_) {
    if (!out.empty()) {
      out += separator;
    }
    out += m;
  }
  return out;
}

}  // namespace kc::alloc
