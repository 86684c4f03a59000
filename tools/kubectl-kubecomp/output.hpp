#pragma once
// How kubectl-kubecomp prints what it found: kubectl's table layout (upper-case headers, columns
// three spaces apart, `<none>` for an empty cell, wide-only columns behind -o wide), or the
// same items as JSON or YAML. Pure: strings in, strings out.

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::kubectl {

enum class OutputFormat { kTable, kWide, kJson, kYaml };
// "" and "table" -> kTable, "wide", "json", "yaml"; error "invalid" naming the choices.
Result<OutputFormat> parseOutputFormat(std::string_view text);

struct Column {
  std::string name;   // as printed (upper case)
  bool wide = false;  // only with -o wide
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<std::string>> rows;  // one cell per column
};

// What a command found: the rows for people and the items for programs (an array of objects
// with typed values, a superset of the wide columns).
struct View {
  std::string kind;  // "PoolGPUList", "MoveList", ...
  Table table;
  nlohmann::json items = nlohmann::json::array();
  // The sentence printed (to stderr) instead of an empty table: "No GPU pools found."
  std::string emptyMessage;
  // Printed above the table (rt: the node's kernel, bound and cores); "" none.
  std::string preface;
  // More top-level members of the JSON/YAML document (rt: the node, its kernel and bound).
  nlohmann::json extra = nlohmann::json::object();
};

// kubectl's tabular printer: cells left-aligned, each column as wide as its widest cell, three
// spaces between columns, no trailing spaces; an empty cell prints "<none>".
std::string renderTable(const Table& table, bool wide);
// {"kind": view.kind, view.extra..., "items": view.items}, JSON (indented 4, as kubectl) or YAML.
std::string renderItems(const View& view, OutputFormat format);

// Block-style YAML of a JSON value; strings are quoted whenever a plain scalar could read back
// as something else (a number, a bool, null, a date, text with ': ' or '#', ...), so every
// YAML 1.2 parser reads the JSON back.
std::string toYaml(const nlohmann::json& value);

// apimachinery's HumanDuration (what kubectl prints as AGE): "45s", "3m20s", "5h", "2d4h".
std::string humanDuration(std::chrono::nanoseconds d);

}  // namespace kc::kubectl
