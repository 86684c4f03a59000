// The CRD side of server-side printing: parsing a CustomResourceDefinition's
// additionalPrinterColumns and their simple JSONPaths (declared in table_convertor.hpp).

#include <algorithm>
#include <cctype>
#include <set>

#include "tools/kube-apiserver-double/json_access.hpp"
#include "tools/kube-apiserver-double/table_convertor.hpp"

namespace kc::apiserver {

using nlohmann::json;

Result<std::vector<std::string>> parseSimpleJsonPath(const std::string& path) {
  auto bad = [&] {
    return makeError(kc::errc::kInvalid, "must be a simple json path starting with .");
  };
  if (path.empty() || path[0] != '.') {
    return bad();
  }
  std::vector<std::string> steps;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      std::string key;
      while (i < path.size() && path[i] != '.' && path[i] != '[') {
        if (path[i] == '\\' && i + 1 < path.size()) {
          ++i;
        } else if (path[i] == '*' || path[i] == '{' || path[i] == '}' || path[i] == '@' ||
                   path[i] == '?') {
          return bad();
        }
        key += path[i++];
      }
      if (key.empty()) {
        return bad();
      }
      steps.push_back(key);
    } else if (path[i] == '[') {
      std::size_t close = path.find(']', i);
      if (close == std::string::npos || close == i + 1) {
        return bad();
      }
      std::string inner = path.substr(i + 1, close - i - 1);
      if (std::all_of(inner.begin(), inner.end(),
                      [](unsigned char c) { return std::isdigit(c); })) {
        steps.push_back("#" + inner);
      } else if (inner.size() >= 2 && (inner.front() == '\'' || inner.front() == '"') &&
                 inner.back() == inner.front()) {
        steps.push_back(inner.substr(1, inner.size() - 2));
      } else {
        return bad();
      }
      i = close + 1;
    } else {
      return bad();
    }
  }
  return steps;
}

Result<PrinterColumn> parsePrinterColumn(const nlohmann::json& c, const std::string& fieldPath) {
  auto err = [&](const std::string& f, const std::string& msg) {
    return makeError(kc::errc::kInvalid, fieldPath + "." + f + ": " + msg);
  };
  if (!c.is_object()) {
    return makeError(kc::errc::kInvalid, fieldPath + ": Invalid value: must be an object");
  }
  PrinterColumn p;
  p.name = text(c, "name");
  p.type = text(c, "type");
  p.format = text(c, "format");
  p.description = text(c, "description");
  p.jsonPath = text(c, "jsonPath");
  if (member(c, "priority").is_number_integer()) {
    p.priority = member(c, "priority").get<std::int32_t>();
  }
  if (p.name.empty()) {
    return err("name", "Required value");
  }
  static const std::set<std::string> kTypes = {"integer", "number", "string", "boolean", "date"};
  if (p.type.empty()) {
    return err("type", "Required value");
  }
  if (!kTypes.count(p.type)) {
    return err(
        "type",
        "Unsupported value: " + json(p.type).dump() +
            ": supported values: \"boolean\", \"date\", \"integer\", \"number\", \"string\"");
  }
  if (p.priority < 0) {
    return err("priority", "Invalid value: " + std::to_string(p.priority) +
                               ": must be greater than or equal to 0");
  }
  if (p.jsonPath.empty()) {
    return err("jsonPath", "Required value");
  }
  if (!parseSimpleJsonPath(p.jsonPath)) {
    return err("jsonPath", "Invalid value: " + json(p.jsonPath).dump() +
                               ": must be a simple json path starting with .");
  }
  return p;
}

}  // namespace kc::apiserver
