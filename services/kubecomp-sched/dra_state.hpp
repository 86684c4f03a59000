#pragma once
// kubecomp-sched on the DRA path (docs/dra.md "kubecomp-sched"): the ResourceClaims and
// DeviceClasses it reads, what a pod's claims ask for, and which devices a placement takes.
// Pure: the scheduler cache feeds it from the informers and asks it under its own mutex.
//
// A pod is ours on this path when every claim it names exists and every request of every claim
// asks for devices of a DeviceClass that selects devices of driver gpu.kubecomp.io. The pool
// policy places it as a pod asking that many kubecomp.io/gpu; the devices then come from the
// chosen node's own pool first (no binding conditions), the rest from the GPUPool's other free
// GPUs in the GPU policy's order (with the binding conditions the attach controller answers).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "libcore/api/dra_claim.hpp"
#include "libcore/base/result.hpp"
#include "libcore/cel/cel.hpp"

namespace kc::sched {

// A GPU the scheduler may hand out as a DRA device.
struct DraCandidate {
  std::string gpuId;
  std::string gpuPool;
  std::string model;
  std::string uuid;
  std::string chassis;
  std::string node;  // attached to ("" unattached)
  // Where it is published (api::buildPoolSlices' rule): "<gpuPool>/<node>" or "<gpuPool>".
  std::string pool;
  std::string device;  // api::draDeviceName(gpuId)
};

// One device chosen for one request of one claim.
struct DraPick {
  std::string claim;  // "ns/name"
  api::ClaimDevice device;
  std::string gpuId;
};

// What a pod's claims ask for.
struct DraDemand {
  enum class Verdict {
    kServe,      // none allocated: place the pod, then allocate `gpus` devices
    kAllocated,  // every claim allocated for `node` and reserved for the pod: wait, then bind
    kWait,       // a claim is not created yet (from a template), or is being deleted
    kNotOurs,    // a claim asks for devices of another driver: stays Pending (message)
    kRefuse,     // ours, but outside what kubecomp-sched allocates (message)
  };
  Verdict verdict = Verdict::kWait;
  std::string message;
  std::int64_t gpus = 0;
  std::vector<api::Claim> claims;
  std::string node;
};

class DraState {
 public:
  // Whether anything changed.
  bool setClaim(api::Claim claim);
  bool removeClaim(const std::string& key);
  void setDeviceClass(const std::string& name, std::vector<std::string> selectors);
  void removeDeviceClass(const std::string& name);

  const api::Claim* claim(const std::string& key) const;
  // Some claim's allocation holds device (pool, device).
  bool allocated(const std::string& pool, const std::string& device) const;

  // The pod's claims (refs in spec order; ns and uid the pod's) against `probes`: one device
  // of each kind the pools have (a class that selects none of them is another driver's).
  DraDemand demand(const std::string& ns, const std::string& podUid,
                   const std::vector<api::PodClaimRef>& refs,
                   const std::vector<DraCandidate>& probes) const;

  // Devices for `claims` on `node`: each request's count from `local` (the node's own free
  // devices) first, then `remote` (the pool's other free devices, in the GPU policy's order),
  // every one matching its class's and request's selectors. Devices `taken` says are taken
  // (by deviceKey) are skipped. Devices in `freeSoon` (by deviceKey) count as free although a
  // claim still holds them (what a pick would be once those claims let go).
  // Errors: kUnschedulable (not enough matching devices), kUnsupported (a selector outside the
  // CEL subset, quoting it), kInvalid (a selector that does not compile).
  Result<std::vector<DraPick>> pick(const std::vector<api::Claim>& claims,
                                    const std::vector<DraCandidate>& local,
                                    const std::vector<DraCandidate>& remote,
                                    const std::function<bool(const std::string&)>& taken,
                                    const std::set<std::string>* freeSoon = nullptr) const;

  // The devices (deviceKey) every claim holding them is about to let go of, as `releasing`
  // judges a claim (its pods have finished, so the resourceclaim controller deallocates it).
  std::set<std::string> freeSoon(const std::function<bool(const api::Claim&)>& releasing) const;

 private:
  struct Class {
    std::vector<std::string> selectors;
  };
  // -1: a selector is outside the subset or invalid (`why`), 0: no match, 1: match.
  int matches(const std::vector<std::string>& selectors, const DraCandidate& c,
              std::string* why) const;

  std::unordered_map<std::string, api::Claim> claims_;
  std::map<std::string, Class> classes_;
  std::map<std::string, int> allocated_;  // "pool\ndevice" -> claims holding it
  mutable std::map<std::string, std::optional<cel::Program>> programs_;  // compiled selectors
  mutable std::map<std::string, std::string> programErrors_;
};

// The key `taken` and allocated() use for a device.
std::string deviceKey(const std::string& pool, const std::string& device);
// The CEL view of a candidate: driver gpu.kubecomp.io, attributes id, gpuPool, chassis, model,
// uuid under the driver's domain (as the slices publish them).
cel::Device celDevice(const DraCandidate& c);

}  // namespace kc::sched
