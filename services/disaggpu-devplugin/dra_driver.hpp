#pragma once
// The node side of DRA driver gpu.kubecomp.io (docs/devplugin.md, "DRA mode"): what kubelet's
// NodePrepareResources and NodeUnprepareResources do, apart from gRPC. Prepare reads each claim
// from the API server, decides (dra_prepare.hpp), writes the claim's CDI spec, checkpoints the
// claim and answers its CDI device ids; unprepare removes exactly that spec and entry. Both are
// idempotent, as kubelet repeats them after a restart of either side.

#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/cdi/cdi_store.hpp"
#include "services/disaggpu-devplugin/dra_checkpoint.hpp"

namespace kc::devplugin {

// kubelet's Claim message.
struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;
};

// One claim's answer: devices with their CDI ids, or an error (kubelet retries).
struct PrepareAnswer {
  struct Device {
    std::vector<std::string> requestNames;
    std::string pool;
    std::string device;
    std::vector<std::string> cdiIds;
  };
  std::vector<Device> devices;
  std::string error;
};

// Where claims come from (the API server; a fake in tests).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  virtual Result<nlohmann::json> getClaim(const std::string& ns, const std::string& name) = 0;
};

struct DraDriverOptions {
  std::string nodeName;
  std::string checkpointPath;  // <plugin dir>/checkpoint.json
  std::string cdiDir = "/var/run/cdi";
  // The host's /dev as this process sees it: the control nodes present there go into every
  // claim's spec (whose hostPaths are always the host's /dev/...).
  std::string devRoot = "/dev";
};

class DraDriver {
 public:
  // `inventory` gives this node's GPUs as judged by the host view, at the time of the call.
  DraDriver(DraDriverOptions options, ClaimSource& claims,
            std::function<NodeInventory()> inventory);

  // Loads the checkpoint and removes our CDI specs of claims it does not hold (written by a
  // prepare that crashed before its checkpoint; kubelet will prepare those claims again). A
  // checkpoint that cannot be parsed is kept aside as <path>.corrupt and the driver starts
  // empty: kubelet repeats its prepares, and unprepare finds specs by claim UID.
  Status start();

  // Keyed by claim UID, one answer per claim asked.
  std::map<std::string, PrepareAnswer> prepare(const std::vector<ClaimRef>& claims);
  // Keyed by claim UID: "" done (also when nothing was prepared), else why not.
  std::map<std::string, std::string> unprepare(const std::vector<ClaimRef>& claims);

  PreparedClaims prepared() const;

 private:
  PrepareAnswer prepareOne(const ClaimRef& ref);
  std::string unprepareOne(const ClaimRef& ref);
  Status writeSpec(const PreparedClaim& claim);

  DraDriverOptions opts_;
  ClaimSource& claims_;
  std::function<NodeInventory()> inventory_;
  cdi::SpecDir specs_;
  DraCheckpoint checkpoint_;
  mutable std::mutex mu_;  // guards prepared_; held through a whole prepare or unprepare call
  PreparedClaims prepared_;
};

// The answer kubelet gets for a prepared claim.
PrepareAnswer answerFor(const PreparedClaim& claim);

}  // namespace kc::devplugin
