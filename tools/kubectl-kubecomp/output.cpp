#include "tools/kubectl-kubecomp/output.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "libcore/base/error_codes.hpp"

namespace kc::kubectl {

using nlohmann::json;

Result<OutputFormat> parseOutputFormat(std::string_view text) {
  if (text.empty() || text == "table") {
    return OutputFormat::kTable;
  }
  if (text == "wide") {
    return OutputFormat::kWide;
  }
  if (text == "json") {
    return OutputFormat::kJson;
  }
  if (text == "yaml") {
    return OutputFormat::kYaml;
  }
  return makeError(errc::kInvalid, "unknown output format \"" + std::string(text) +
                                       "\" (choose table, wide, json or yaml)");
}

std::string renderTable(const Table& table, bool wide) {
  std::vector<std::size_t> shown;
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (wide || !table.columns[c].wide) {
      shown.push_back(c);
    }
  }
  const auto cell = [&](const std::vector<std::string>& row, std::size_t c) -> std::string {
    return c < row.size() && !row[c].empty() ? row[c] : std::string("<none>");
  };
  std::vector<std::size_t> width(table.columns.size(), 0);
  for (std::size_t c : shown) {
    width[c] = table.columns[c].name.size();
    for (const auto& row : table.rows) {
      width[c] = std::max(width[c], cell(row, c).size());
    }
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < shown.size(); ++i) {
      const std::size_t c = shown[i];
      text += cells[i];
      if (i + 1 < shown.size()) {
        text.append(width[c] - cells[i].size() + 3, ' ');
      }
    }
    while (!text.empty() && text.back() == ' ') {
      text.pop_back();
    }
    out += text + "\n";
  };
  std::vector<std::string> header;
  for (std::size_t c : shown) {
    header.push_back(table.columns[c].name);
  }
  line(header);
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (std::size_t c : shown) {
      cells.push_back(cell(row, c));
    }
    line(cells);
  }
  return out;
}

namespace {

bool lowerEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == y;
         });
}

// Whether `s` may be written as a plain YAML scalar and read back as this string by YAML 1.1 and
// 1.2 parsers alike (so "yes", "0o7", "1e3" and dates are quoted as well).
bool plainSafe(std::string_view s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ' || s.back() == ':') {
    return false;
  }
  static constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`+.~=";
  if (kIndicators.find(s.front()) != std::string_view::npos ||
      std::isdigit(static_cast<unsigned char>(s.front())) != 0) {
    return false;
  }
  for (const char* word :
       {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf"}) {
    if (lowerEquals(s, word)) {
      return false;
    }
  }
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') {
      return false;
    }
  }
  return s.find(": ") == std::string_view::npos && s.find(" #") == std::string_view::npos;
}

std::string scalar(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return plainSafe(s) ? s : json(s).dump();
  }
  return v.dump();
}

bool inlineValue(const json& v) {
  return !v.is_structured() || v.empty();
}

std::string inlineForm(const json& v) {
  if (v.is_object()) {
    return "{}";
  }
  if (v.is_array()) {
    return "[]";
  }
  return scalar(v);
}

void emit(const json& v, std::size_t indent, std::string& out);

// A value after "key:" or "- ": on the same line when inline, else on the next lines.
void emitMember(const json& v, std::size_t indent, std::string& out) {
  if (inlineValue(v)) {
    out += " " + inlineForm(v) + "\n";
    return;
  }
  out += "\n";
  // Sequences inside a mapping sit at the mapping's indentation (as kubectl's YAML printer).
  emit(v, v.is_array() ? indent : indent + 2, out);
}

void emit(const json& v, std::size_t indent, std::string& out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      out += pad + scalar(json(key)) + ":";
      emitMember(value, indent, out);
    }
    return;
  }
  if (v.is_array()) {
    for (const auto& item : v) {
      if (inlineValue(item)) {
        out += pad + "- " + inlineForm(item) + "\n";
        continue;
      }
      // The item's first line goes after "- ", the rest indented under it.
      std::string nested;
      emit(item, indent + 2, nested);
      out += pad + "- " + nested.substr(indent + 2);
    }
    return;
  }
  out += pad + scalar(v) + "\n";
}

}  // namespace

std::string toYaml(const json& value) {
  if (inlineValue(value)) {
    return inlineForm(value) + "\n";
  }
  std::string out;
  emit(value, 0, out);
  return out;
}

std::string renderItems(const View& view, OutputFormat format) {
  json doc = {{"kind", view.kind}};
  for (const auto& [key, value] : view.extra.items()) {
    doc[key] = value;
  }
  doc["items"] = view.items;
  if (format == OutputFormat::kYaml) {
    return toYaml(doc);
  }
  return doc.dump(4) + "\n";
}

std::string humanDuration(std::chrono::nanoseconds d) {
  using std::chrono::duration_cast;
  const auto seconds = duration_cast<std::chrono::seconds>(d).count();
  if (seconds < -1) {
    return "<invalid>";
  }
  if (seconds < 0) {
    return "0s";
  }
  if (seconds < 60 * 2) {
    return std::to_string(seconds) + "s";
  }
  const auto minutes = seconds / 60;
  if (minutes < 10) {
    const auto s = seconds % 60;
    return std::to_string(minutes) + "m" + (s == 0 ? "" : std::to_string(s) + "s");
  }
  if (minutes < 60 * 3) {
    return std::to_string(minutes) + "m";
  }
  const auto hours = minutes / 60;
  if (hours < 8) {
    const auto m = minutes % 60;
    return std::to_string(hours) + "h" + (m == 0 ? "" : std::to_string(m) + "m");
  }
  if (hours < 48) {
    return std::to_string(hours) + "h";
  }
  if (hours < 24 * 8) {
    const auto h = hours % 24;
    return std::to_string(hours / 24) + "d" + (h == 0 ? "" : std::to_string(h) + "h");
  }
  if (hours < 24 * 365 * 2) {
    return std::to_string(hours / 24) + "d";
  }
  if (hours < 24 * 365 * 8) {
    const auto days = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (days == 0 ? "" : std::to_string(days) + "d");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

}  // namespace kc::kubectl
