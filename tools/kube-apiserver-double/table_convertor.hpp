#pragma once
// Server-side Table output (meta.k8s.io/v1 and v1beta1 `Table`), what `kubectl get` prints:
// the built-in columns of pods (NAME READY STATUS RESTARTS AGE; wide: IP NODE NOMINATED NODE
// READINESS GATES), nodes (NAME STATUS ROLES AGE VERSION; wide: INTERNAL-IP EXTERNAL-IP
// OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME), namespaces (NAME STATUS AGE),
// poddisruptionbudgets (NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE), events of
// both groups (LAST SEEN TYPE REASON OBJECT MESSAGE; wide: SUBOBJECT SOURCE FIRST SEEN COUNT
// NAME), resource.k8s.io/v1 (dra_printers.hpp), a CRD's
// additionalPrinterColumns (after NAME; AGE when it declares none), and NAME / Created At for
// every other kind, as the real server's default convertor.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::apiserver {

// One entry of a CRD version's additionalPrinterColumns.
struct PrinterColumn {
  std::string name;
  std::string type;  // integer, number, string, boolean, date
  std::string format;
  std::string description;
  std::int32_t priority = 0;
  std::string jsonPath;  // the simple JSONPath subset: .a.b, .a[0].b, .a['k.x'], escaped \.
};

// (printer_columns.cpp) Parses a simple JSONPath (".spec.replicas", ".status.conditions[0].type",
// ".metadata.labels.app\.kubernetes\.io/name", ".metadata.annotations['a.b/c']") into its
// steps: object keys and array indexes ("#<n>" marks an index). Errors carry code "invalid".
Result<std::vector<std::string>> parseSimpleJsonPath(const std::string& path);

// Parses and validates one additionalPrinterColumns entry as the real server's CRD
// validation does (name and jsonPath required, type one of the five, jsonPath a simple
// path). Error messages name the field under `fieldPath`.
Result<PrinterColumn> parsePrinterColumn(const nlohmann::json& column,
                                         const std::string& fieldPath);

// apimachinery's duration.HumanDuration: "5s", "2m30s", "15m", "3h20m", "2d4h", "400d", "3y20d".
std::string humanDuration(std::chrono::system_clock::duration d);

enum class IncludeObject { kNone, kMetadata, kObject };

struct TableRequest {
  std::string apiVersion = "meta.k8s.io/v1";  // or meta.k8s.io/v1beta1
  IncludeObject include = IncludeObject::kMetadata;
};

class TableConvertor {
 public:
  // group/resource pick the built-in printer; `customColumns` non-null means a custom
  // resource with these additionalPrinterColumns (possibly empty).
  TableConvertor(std::string group, std::string resource,
                 const std::vector<PrinterColumn>* customColumns);

  nlohmann::json columnDefinitions() const;
  // The row for one object (the full stored object, kind/apiVersion included).
  nlohmann::json row(const nlohmann::json& object, std::chrono::system_clock::time_point now,
                     const TableRequest& request) const;

 private:
  enum class Printer { kPod, kNode, kNamespace, kPdb, kEvent, kDra, kCustom, kDefault };
  nlohmann::json cells(const nlohmann::json& object,
                       std::chrono::system_clock::time_point now) const;

  Printer printer_;
  std::string resource_;  // kDra: which resource.k8s.io printer
  std::vector<PrinterColumn> custom_;
  std::vector<std::vector<std::string>> customPaths_;
};

}  // namespace kc::apiserver
