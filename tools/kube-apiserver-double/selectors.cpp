#include "tools/kube-apiserver-double/selectors.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace kc::apiserver {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) {
    return "";
  }
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool validKey(const std::string& k) {
  if (k.empty() || k.size() > 316) {
    return false;
  }
  return std::all_of(k.begin(), k.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

bool validValue(const std::string& v) {
  if (v.size() > 63) {
    return false;
  }
  return std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> splitTopLevel(const std::string& s) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    }
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

Error selectorError(const std::string& text, const std::string& why) {
  return makeError(kc::errc::kInvalid,
                   "unable to parse requested label selector \"" + text + "\": " + why);
}

}  // namespace

Result<LabelSelector> LabelSelector::parse(const std::string& text) {
  LabelSelector sel;
  if (trim(text).empty()) {
    return sel;
  }
  for (const auto& raw : splitTopLevel(text)) {
    std::string part = trim(raw);
    if (part.empty()) {
      return selectorError(text, "empty requirement");
    }
    LabelRequirement r;
    auto setValues = [&](const std::string& list) -> bool {
      std::string inner = trim(list);
      if (inner.size() < 2 || inner.front() != '(' || inner.back() != ')') {
        return false;
      }
      for (const auto& v : splitTopLevel(inner.substr(1, inner.size() - 2))) {
        std::string t = trim(v);
        if (!validValue(t)) {
          return false;
        }
        r.values.push_back(t);
      }
      return true;
    };
    if (part[0] == '!') {
      r.key = trim(part.substr(1));
      r.op = LabelRequirement::Op::kDoesNotExist;
    } else if (auto p = part.find(" notin "); p != std::string::npos) {
      r.key = trim(part.substr(0, p));
      r.op = LabelRequirement::Op::kNotIn;
      if (!setValues(part.substr(p + 7))) {
        return selectorError(text, "expected a parenthesised value list after 'notin'");
      }
    } else if (auto q = part.find(" in "); q != std::string::npos) {
      r.key = trim(part.substr(0, q));
      r.op = LabelRequirement::Op::kIn;
      if (!setValues(part.substr(q + 4))) {
        return selectorError(text, "expected a parenthesised value list after 'in'");
      }
    } else if (auto ne = part.find("!="); ne != std::string::npos) {
      r.key = trim(part.substr(0, ne));
      r.op = LabelRequirement::Op::kNotEquals;
      r.values = {trim(part.substr(ne + 2))};
    } else if (auto ee = part.find("=="); ee != std::string::npos) {
      r.key = trim(part.substr(0, ee));
      r.values = {trim(part.substr(ee + 2))};
    } else if (auto e = part.find('='); e != std::string::npos) {
      r.key = trim(part.substr(0, e));
      r.values = {trim(part.substr(e + 1))};
    } else if (auto gt = part.find('>'); gt != std::string::npos) {
      r.key = trim(part.substr(0, gt));
      r.op = LabelRequirement::Op::kGreaterThan;
      r.values = {trim(part.substr(gt + 1))};
    } else if (auto lt = part.find('<'); lt != std::string::npos) {
      r.key = trim(part.substr(0, lt));
      r.op = LabelRequirement::Op::kLessThan;
      r.values = {trim(part.substr(lt + 1))};
    } else {
      r.key = part;
      r.op = LabelRequirement::Op::kExists;
    }
    if (!validKey(r.key)) {
      return selectorError(text, "invalid label key \"" + r.key + "\"");
    }
    for (const auto& v : r.values) {
      if (!validValue(v)) {
        return selectorError(text, "invalid label value: \"" + v + "\"");
      }
    }
    if ((r.op == LabelRequirement::Op::kGreaterThan || r.op == LabelRequirement::Op::kLessThan)) {
      char* end = nullptr;
      std::strtoll(r.values[0].c_str(), &end, 10);
      if (r.values[0].empty() || *end != '\0') {
        return selectorError(text, "for 'Gt', 'Lt' operators, the value must be an integer");
      }
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

Result<LabelSelector> LabelSelector::fromJson(const nlohmann::json& selector,
                                              const std::string& fieldPath) {
  auto bad = [&](const std::string& field, const std::string& detail) {
    return makeError(kc::errc::kInvalid, fieldPath + "." + field + ": " + detail);
  };
  LabelSelector sel;
  if (selector.is_null()) {
    return sel;
  }
  if (!selector.is_object()) {
    return makeError(kc::errc::kInvalid, fieldPath + ": Invalid value: must be an object");
  }
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) {
      return bad("matchLabels", "Invalid value: must be an object");
    }
    for (auto it = ml->begin(); it != ml->end(); ++it) {
      if (!validKey(it.key())) {
        return bad("matchLabels",
                   "Invalid value: " + nlohmann::json(it.key()).dump() + ": not a valid label key");
      }
      if (!it->is_string() || !validValue(it->get<std::string>())) {
        return bad("matchLabels", "Invalid value: " + it->dump() + ": not a valid label value");
      }
      sel.reqs_.push_back({it.key(), LabelRequirement::Op::kEquals, {it->get<std::string>()}});
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) {
      return bad("matchExpressions", "Invalid value: must be a list");
    }
    for (std::size_t i = 0; i < me->size(); ++i) {
      const auto& e = (*me)[i];
      const std::string at = "matchExpressions[" + std::to_string(i) + "]";
      if (!e.is_object()) {
        return bad(at, "Invalid value: must be an object");
      }
      LabelRequirement r;
      r.key = e.value("key", "");
      if (!validKey(r.key)) {
        return bad(at + ".key",
                   "Invalid value: " + nlohmann::json(r.key).dump() + ": not a valid label key");
      }
      const std::string op = e.value("operator", "");
      const nlohmann::json values = e.value("values", nlohmann::json::array());
      if (!values.is_array()) {
        return bad(at + ".values", "Invalid value: must be a list");
      }
      for (const auto& v : values) {
        if (!v.is_string()) {
          return bad(at + ".values", "Invalid value: " + v.dump() + ": must be a string");
        }
        r.values.push_back(v.get<std::string>());
      }
      if (op == "In" || op == "NotIn") {
        r.op = op == "In" ? LabelRequirement::Op::kIn : LabelRequirement::Op::kNotIn;
        if (r.values.empty()) {
          return bad(at + ".values",
                     "Required value: must be specified when `operator` is 'In' or 'NotIn'");
        }
      } else if (op == "Exists" || op == "DoesNotExist") {
        r.op = op == "Exists" ? LabelRequirement::Op::kExists : LabelRequirement::Op::kDoesNotExist;
        if (!r.values.empty()) {
          return bad(
              at + ".values",
              "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
        }
      } else {
        return bad(at + ".operator", "Invalid value: " + nlohmann::json(op).dump() +
                                         ": not a valid selector operator");
      }
      sel.reqs_.push_back(std::move(r));
    }
  }
  return sel;
}

bool LabelSelector::matches(const nlohmann::json& labels) const {
  for (const auto& r : reqs_) {
    const nlohmann::json* v = nullptr;
    if (labels.is_object()) {
      auto it = labels.find(r.key);
      if (it != labels.end() && it->is_string()) {
        v = &*it;
      }
    }
    const std::string* s = v ? v->get_ptr<const std::string*>() : nullptr;
    auto in = [&] {
      return s && std::find(r.values.begin(), r.values.end(), *s) != r.values.end();
    };
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
      case LabelRequirement::Op::kIn:
        if (!in()) {
          return false;
        }
        break;
      case LabelRequirement::Op::kNotEquals:
      case LabelRequirement::Op::kNotIn:
        if (in()) {
          return false;
        }
        break;
      case LabelRequirement::Op::kExists:
        if (!s) {
          return false;
        }
        break;
      case LabelRequirement::Op::kDoesNotExist:
        if (s) {
          return false;
        }
        break;
      case LabelRequirement::Op::kGreaterThan:
      case LabelRequirement::Op::kLessThan: {
        if (!s) {
          return false;
        }
        char* end = nullptr;
        long long have = std::strtoll(s->c_str(), &end, 10);
        if (s->empty() || *end != '\0') {
          return false;
        }
        long long want = std::strtoll(r.values[0].c_str(), nullptr, 10);
        if (r.op == LabelRequirement::Op::kGreaterThan ? !(have > want) : !(have < want)) {
          return false;
        }
        break;
      }
    }
  }
  return true;
}

Result<FieldSelector> FieldSelector::parse(const std::string& text,
                                           const std::vector<std::string>& allowedFields) {
  FieldSelector sel;
  if (trim(text).empty()) {
    return sel;
  }
  for (const auto& raw : splitTopLevel(text)) {
    std::string part = trim(raw);
    FieldRequirement r;
    size_t opPos = 0;
    size_t opLen = 0;
    if (auto ne = part.find("!="); ne != std::string::npos) {
      opPos = ne;
      opLen = 2;
      r.negate = true;
    } else if (auto ee = part.find("=="); ee != std::string::npos) {
      opPos = ee;
      opLen = 2;
    } else if (auto e = part.find('='); e != std::string::npos) {
      opPos = e;
      opLen = 1;
    } else {
      return makeError(kc::errc::kInvalid,
                       "invalid selector: '" + text + "'; can't understand '" + part + "'");
    }
    r.field = trim(part.substr(0, opPos));
    r.value = trim(part.substr(opPos + opLen));
    bool allowed =
        r.field == "metadata.name" || r.field == "metadata.namespace" ||
        std::find(allowedFields.begin(), allowedFields.end(), r.field) != allowedFields.end();
    if (!allowed) {
      return makeError(kc::errc::kInvalid, "field label not supported: " + r.field);
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

std::string FieldSelector::fieldValue(const nlohmann::json& object, const std::string& field) {
  const nlohmann::json* cur = &object;
  size_t start = 0;
  while (start <= field.size()) {
    size_t dot = field.find('.', start);
    std::string part =
        field.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) {
      return "";
    }
    auto it = cur->find(part);
    if (it == cur->end()) {
      return "";
    }
    cur = &*it;
    if (dot == std::string::npos) {
      break;
    }
    start = dot + 1;
  }
  if (cur->is_string()) {
    return cur->get<std::string>();
  }
  if (cur->is_boolean()) {
    return cur->get<bool>() ? "true" : "false";
  }
  if (cur->is_null()) {
    return "";
  }
  if (cur->is_number()) {
    return cur->dump();
  }
  return "";
}

bool FieldSelector::matches(const nlohmann::json& object) const {
  for (const auto& r : reqs_) {
    // Core events select "source" by the reporting component.
    std::string v = fieldValue(object, r.field == "source" ? "source.component" : r.field);
    // Booleans compare as the apiserver prints them; absent spec.unschedulable is "false".
    if (v.empty() && (r.field == "spec.unschedulable" || r.field == "spec.hostNetwork")) {
      v = "false";
    }
    if ((v == r.value) == r.negate) {
      return false;
    }
  }
  return true;
}

}  // namespace kc::apiserver
