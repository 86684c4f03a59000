#pragma once
// GPU model constraints: a pod (or simulated job) may accept only some GPU models, e.g. the
// Alibaba cluster-trace-gpu-v2023 `gpu_spec` column ("V100M16|V100M32") or the pod annotation
// kubecomp.io/gpu-models ("A100,H100"). Each GPU of the pool model carries its model
// (GpuState::model); a constrained pod runs only on GPUs whose model it lists, and only those
// GPUs count as free for it, are moved to its node and are handed to it.
//
// Pure code (no I/O): the simulator and the scheduler parse the same text with the same rules.

#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// The pod annotation naming the accepted models, comma-separated (parse with ',').
using api::kGpuModelsAnnotation;
// The separator of the Alibaba trace's gpu_spec column.
inline constexpr char kGpuSpecSeparator = '|';
inline constexpr char kGpuModelsAnnotationSeparator = ',';

// A GPU model name as inventories and nvidia-smi report them: 1..64 characters of letters,
// digits, '-', '_', '.', '(', ')', '+', '/' and single spaces between words (P100, V100M16, G2,
// NVIDIA-A100-SXM4-80GB, "Tesla V100-PCIE-32GB", "NVIDIA RTX 6000 Ada Generation"); never
// the list separators ',' and '|'. Compared exactly (case-sensitive).
bool validGpuModelName(std::string_view name);
// What validGpuModelName accepts, for messages.
inline constexpr std::string_view kGpuModelNameRule =
    "1-64 of A-Z a-z 0-9 - _ . ( ) + / and single inner spaces";

class GpuModelFilter {
 public:
  // Accepts every GPU, whatever its model (also one with no model known).
  GpuModelFilter() = default;

  // Model names joined by `separator`; blanks around a name are ignored, duplicates collapse.
  // Empty (or blank) text accepts any GPU. Error "invalid" naming the bad part: an empty name
  // between separators, a name outside validGpuModelName.
  static Result<GpuModelFilter> parse(std::string_view text, char separator);

  bool acceptsAny() const { return models_.empty(); }
  // True for every model when acceptsAny(); otherwise only for a listed model (never for an
  // unknown, empty model).
  bool accepts(std::string_view model) const;
  // The accepted models, sorted, without duplicates (empty: any).
  const std::vector<std::string>& models() const { return models_; }
  // The canonical text: models() joined by `separator` ("" for any).
  std::string toString(char separator) const;

  friend bool operator==(const GpuModelFilter&, const GpuModelFilter&) = default;

 private:
  std::vector<std::string> models_;
};

}  // namespace kc::alloc
