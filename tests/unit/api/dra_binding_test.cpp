#include "libcore/api/dra_binding.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/api/dra_slice.hpp"

namespace {

using kc::api::AttachStep;
using kc::api::BindingState;
using kc::api::Claim;
using kc::api::ClaimCondition;
using kc::api::ClaimDevice;
using kc::api::PoolGpu;

ClaimDevice device(std::string gpuId) {
  return ClaimDevice{"gpu",
                     "gpu.kubecomp.io",
                     "pool-a",
                     kc::api::draDeviceName(gpuId),
                     {"gpu.kubecomp.io/attached"},
                     {"gpu.kubecomp.io/attach-failed"}};
}

Claim allocated(const ClaimDevice& d, std::string node, std::int64_t generation = 2) {
  Claim c;
  c.ns = "ml";
  c.name = "train-gpu";
  c.generation = generation;
  c.allocation = kc::api::ClaimAllocation{{d}, std::move(node), "2026-11-28T09:00:00Z"};
  return c;
}

void setCondition(Claim& c, const ClaimDevice& d, std::string type, std::string status,
                  std::int64_t generation) {
  c.devices = kc::api::withDeviceCondition(
      c.devices, d, ClaimCondition{std::move(type), std::move(status), "R", "m", generation, "T"});
}

PoolGpu gpu(std::string id, std::string node = "", bool healthy = true) {
  PoolGpu g;
  g.id = std::move(id);
  g.chassis = "c0";
  g.node = std::move(node);
  g.healthy = healthy;
  return g;
}

}  // namespace

TEST_CASE("DRA binding: the scheduler's view of the conditions", "[api][dra]") {
  const ClaimDevice d = device("c0.7");
  Claim c = allocated(d, "node-2");
  CHECK(kc::api::bindingState(c, d) == BindingState::kWaiting);
  setCondition(c, d, "gpu.kubecomp.io/attached", "False", 2);
  CHECK(kc::api::bindingState(c, d) == BindingState::kWaiting);
  setCondition(c, d, "gpu.kubecomp.io/attached", "True", 1);  // for an older generation
  CHECK(kc::api::bindingState(c, d) == BindingState::kWaiting);
  setCondition(c, d, "gpu.kubecomp.io/attached", "True", 2);
  CHECK(kc::api::bindingState(c, d) == BindingState::kAttached);
  setCondition(c, d, "gpu.kubecomp.io/attach-failed", "True", 2);  // failure wins
  CHECK(kc::api::bindingState(c, d) == BindingState::kFailed);
  ClaimDevice local = d;
  local.bindingConditions.clear();
  local.bindingFailureConditions.clear();
  CHECK(kc::api::bindingState(c, local) == BindingState::kNone);
}

TEST_CASE("DRA binding: the attach controller's next step", "[api][dra]") {
  const ClaimDevice d = device("c0.7");
  using K = AttachStep::Kind;
  struct Row {
    const char* what;
    std::vector<PoolGpu> gpus;
    K kind;
    std::string reason;
  };
  PoolGpu busyElsewhere = gpu("c0.7", "node-1");
  busyElsewhere.inUseBy = {"ml/other"};
  PoolGpu heldByItself = gpu("c0.7", "node-1");
  heldByItself.inUseBy = {kc::api::claimHolder("ml", "train-gpu")};
  PoolGpu heldByOther = gpu("c0.7", "node-1");
  heldByOther.inUseBy = {kc::api::claimHolder("ml", "train-gpu"), kc::api::claimHolder("ml", "x")};
  PoolGpu draining = gpu("c0.7", "node-2");
  draining.draining = true;
  PoolGpu sick = gpu("c0.7", "", false);
  sick.healthDetail = "XID 79";
  const std::vector<Row> rows = {
      {"unattached: attach it", {gpu("c0.7")}, K::kAttach, ""},
      {"idle on another node: move it", {gpu("c0.7", "node-1")}, K::kAttach, ""},
      {"attached where allocated: report", {gpu("c0.7", "node-2")}, K::kReportAttached, "Attached"},
      {"draining on the node: not usable yet, attach", {draining}, K::kAttach, ""},
      {"in use on another node", {busyElsewhere}, K::kReportFailed, "InUseElsewhere"},
      {"held by the claim itself only: move it", {heldByItself}, K::kAttach, ""},
      {"held by another claim too", {heldByOther}, K::kReportFailed, "InUseElsewhere"},
      {"unhealthy", {sick}, K::kReportFailed, "Unhealthy"},
      {"gone from the pool", {gpu("c0.8")}, K::kReportFailed, "DeviceGone"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    const AttachStep step = kc::api::nextAttachStep(allocated(d, "node-2"), d, "pool-a", r.gpus);
    CHECK(step.kind == r.kind);
    CHECK(step.reason == r.reason);
    if (step.kind == K::kAttach || step.kind == K::kReportAttached) {
      CHECK(step.gpuId == "c0.7");
      CHECK(step.node == "node-2");
    }
  }
  CHECK_THAT(kc::api::nextAttachStep(allocated(d, "node-2"), d, "pool-a", {sick}).message,
             Catch::Contains("XID 79"));
}

TEST_CASE("DRA binding: nothing to do where the claim is not ours to attach", "[api][dra]") {
  const ClaimDevice d = device("c0.7");
  const std::vector<PoolGpu> gpus = {gpu("c0.7")};
  using K = AttachStep::Kind;
  Claim deleting = allocated(d, "node-2");
  deleting.deleting = true;
  CHECK(kc::api::nextAttachStep(deleting, d, "pool-a", gpus).kind == K::kNothing);
  Claim pending = allocated(d, "node-2");
  pending.allocation.reset();
  CHECK(kc::api::nextAttachStep(pending, d, "pool-a", gpus).kind == K::kNothing);
  CHECK(kc::api::nextAttachStep(allocated(d, "node-2"), d, "pool-b", gpus).kind == K::kNothing);
  ClaimDevice otherDriver = d;
  otherDriver.driver = "gpu.nvidia.com";
  CHECK(
      kc::api::nextAttachStep(allocated(otherDriver, "node-2"), otherDriver, "pool-a", gpus).kind ==
      K::kNothing);
  Claim done = allocated(d, "node-2");
  setCondition(done, d, "gpu.kubecomp.io/attached", "True", 2);
  CHECK(kc::api::nextAttachStep(done, d, "pool-a", gpus).kind == K::kNothing);
  Claim failedAlready = allocated(d, "node-2");
  setCondition(failedAlready, d, "gpu.kubecomp.io/attach-failed", "True", 2);
  CHECK(kc::api::nextAttachStep(failedAlready, d, "pool-a", gpus).kind == K::kNothing);
  // A bindsToNode device allocated without a node cannot be attached anywhere.
  const AttachStep noNode = kc::api::nextAttachStep(allocated(d, ""), d, "pool-a", gpus);
  CHECK(noNode.kind == K::kReportFailed);
  CHECK(noNode.reason == "NoNode");
}
