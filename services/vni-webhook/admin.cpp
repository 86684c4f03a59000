#include "services/vni-webhook/admin.hpp"

#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

namespace kc::vni {

Result<std::set<OwnerKey>> parseLiveOwners(const std::string& text) {
  std::set<OwnerKey> live;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("items") || !doc["items"].is_array()) {
      return makeError(kc::errc::kInvalid,
                       "live owners: JSON must be a Kubernetes List with \"items\"");
    }
    for (const auto& item : doc["items"]) {
      const auto& meta = item.value("metadata", nlohmann::json::object());
      const std::string ns = meta.value("namespace", "");
      const std::string uid = meta.value("uid", "");
      if (ns.empty() || uid.empty()) {
        return makeError(kc::errc::kInvalid,
                         "live owners: an item lacks metadata.namespace or uid");
      }
      live.insert(OwnerKey{uid, ns});
    }
    return live;
  }
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.pop_back();
    }
    if (line.empty() || line[0] == '#') {
      continue;
    }
    const auto slash = line.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == line.size()) {
      return makeError(kc::errc::kInvalid,
                       "live owners line " + std::to_string(number) + ": want namespace/uid");
    }
    live.insert(OwnerKey{line.substr(slash + 1), line.substr(0, slash)});
  }
  return live;
}

std::vector<AllocationRow> findOrphans(const std::vector<AllocationRow>& rows,
                                       const std::set<OwnerKey>& live, std::int64_t cutoffMs,
                                       std::size_t* tooRecent) {
  std::vector<AllocationRow> orphans;
  std::size_t recent = 0;
  for (const AllocationRow& row : rows) {
    if (row.allocatedAtMs > cutoffMs) {
      ++recent;
      continue;
    }
    if (live.count(OwnerKey{row.uid, row.ns}) == 0) {
      orphans.push_back(row);
    }
  }
  if (tooRecent != nullptr) {
    *tooRecent = recent;
  }
  return orphans;
}

void printAllocations(std::ostream& out, const std::vector<AllocationRow>& rows, bool json) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const AllocationRow& r : rows) {
      list.push_back({{"namespace", r.ns},
                      {"uid", r.uid},
                      {"vni", r.vni},
                      {"kind", r.kind},
                      {"name", r.name},
                      {"allocatedAtMs", r.allocatedAtMs}});
    }
    out << list.dump(2) << "\n";
    return;
  }
  out << "NAMESPACE\tVNI\tKIND\tNAME\tUID\n";
  for (const AllocationRow& r : rows) {
    out << r.ns << "\t" << r.vni << "\t" << (r.kind.empty() ? "-" : r.kind) << "\t"
        << (r.name.empty() ? "-" : r.name) << "\t" << r.uid << "\n";
  }
}

}  // namespace kc::vni
