#pragma once
// When an idle GPU attached to a node goes back to its pool.
//
// Ours ("keep"): an idle attached GPU stays where it is, free for the next pod on that node at
// no move, until a placement or the idle-time recomposition (idle_recompose.hpp) moves it, with
// the queue in view (docs/dra.md, "where does an idle attached GPU appear?").
//
// Stock ("idle-timeout", a BASELINE modelling CoHDI's dynamic-device-scaler): a GPU attached to
// a node and idle (not in use) for the timeout is detached back to the pool, where any node of
// the pool can have it attached again. CoHDI's default is DEVICE_NO_REMOVAL_DURATION = 600 s
// (dynamic-device-scaler cmd/main.go), checked every SCAN_INTERVAL = 60 s; this model returns
// the GPU exactly at the timeout, and measures idleness from when the GPU last became free where
// it is (CoHDI measures from the last attach, so it returns a GPU reused on its node sooner).
//
// Pure code: the caller keeps, per GPU, the time it last became idle where it is, and passes
// the current time in.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "libcore/alloc/pool_model.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

enum class ReturnKind : std::uint8_t {
  Keep,         // ours: idle GPUs stay attached
  IdleTimeout,  // stock: detached after the idle timeout
};

// A registry entry (policy_registry.hpp lists them).
struct ReturnPolicy {
  std::string_view name;
  std::string_view description;
  ReturnKind kind;
};

struct KeepReturnPolicy {
  static constexpr std::string_view kName = "keep";
  static constexpr std::string_view kDescription =
      "ours: an idle attached GPU stays on its node until a placement or idle recomposition "
      "moves it";
  static constexpr ReturnKind kKind = ReturnKind::Keep;
};
struct IdleTimeoutReturnPolicy {
  static constexpr std::string_view kName = "idle-timeout";
  static constexpr std::string_view kDescription =
      "baseline (CoHDI dynamic-device-scaler): a GPU attached to a node and idle for the "
      "timeout is detached back to the pool";
  static constexpr ReturnKind kKind = ReturnKind::IdleTimeout;
};

// CoHDI dynamic-device-scaler's DEVICE_NO_REMOVAL_DURATION default, in ms.
inline constexpr std::int64_t kDefaultIdleTimeoutMs = 600'000;

// Whether GPU g, idle where it is since `idleSince`, is returned at `now`: it is attached,
// free (not in use, healthy, not draining) and now - idleSince >= timeout. Total: a bad index,
// now before idleSince or a negative timeout give false; no input overflows.
bool idleExpired(const ClusterState& state, GpuIndex g, std::int64_t idleSince, std::int64_t now,
                 std::int64_t timeout);

// Every GPU idleExpired returns, in index order. `idleSince` holds one entry per GPU (read
// only for attached free GPUs). Error "invalid" when its size is not gpuCount().
Result<std::vector<GpuIndex>> expiredIdleGpus(const ClusterState& state,
                                              std::span<const std::int64_t> idleSince,
                                              std::int64_t now, std::int64_t timeout);

}  // namespace kc::alloc
