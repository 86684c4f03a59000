#include "services/disaggpu-devplugin/dra_driver.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <set>

#include "libcore/api/dra_claim.hpp"
#include "libcore/base/error_codes.hpp"

namespace kc::devplugin {

PrepareAnswer answerFor(const PreparedClaim& claim) {
  PrepareAnswer out;
  for (const PreparedDevice& d : claim.devices) {
    out.devices.push_back(
        PrepareAnswer::Device{d.requestNames, d.pool, d.device, {cdi::qualifiedName(d.cdiName)}});
  }
  return out;
}

DraDriver::DraDriver(DraDriverOptions options, ClaimSource& claims,
                     std::function<NodeInventory()> inventory)
    : opts_(std::move(options)),
      claims_(claims),
      inventory_(std::move(inventory)),
      specs_(opts_.cdiDir),
      checkpoint_(opts_.checkpointPath) {}

Status DraDriver::start() {
  std::lock_guard lock(mu_);
  auto loaded = checkpoint_.load();
  if (loaded) {
    prepared_ = std::move(*loaded);
  } else if (loaded.error().code == kc::errc::kInvalid) {
    const std::string aside = checkpoint_.path() + ".corrupt";
    spdlog::error("{}; kept as {}, starting with no prepared claims (kubelet prepares again)",
                  loaded.error().message, aside);
    std::rename(checkpoint_.path().c_str(), aside.c_str());
    prepared_.clear();
  } else {
    return loaded.error();
  }
  for (const std::string& tag : specs_.tags()) {
    if (prepared_.count(tag) == 0) {
      spdlog::info("removing CDI spec of claim UID {}: not in the checkpoint", tag);
      (void)specs_.remove(tag);
    }
  }
  for (const auto& [uid, claim] : prepared_) {
    if (Status s = writeSpec(claim); !s) {  // a spec lost with /var/run on reboot
      spdlog::warn("claim {}/{}: {}", claim.ns, claim.name, s.error().message);
    }
  }
  return okStatus();
}

Status DraDriver::writeSpec(const PreparedClaim& claim) {
  cdi::SpecOptions so;
  // The runtime reads hostPath on the host: always /dev there, wherever this container sees the
  // host's /dev (opts_.devRoot) to tell which control nodes it has.
  so.devRoot = "/dev";
  so.controlNodes = cdi::presentControlNodes(opts_.devRoot);
  return specs_.write(claim.uid, cdi::buildSpec(cdiGpus(claim), so, /*claimEnv=*/true));
}

std::map<std::string, PrepareAnswer> DraDriver::prepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard lock(mu_);
  std::map<std::string, PrepareAnswer> out;
  for (const ClaimRef& ref : claims) {
    out[ref.uid] = prepareOne(ref);
  }
  return out;
}

PrepareAnswer DraDriver::prepareOne(const ClaimRef& ref) {
  PrepareAnswer fail;
  const std::string who = "ResourceClaim " + ref.ns + "/" + ref.name;
  if (ref.uid.empty() || !cdi::SpecDir::isValidTag(ref.uid)) {
    fail.error = who + ": kubelet sent no usable claim UID";
    return fail;
  }
  if (auto it = prepared_.find(ref.uid); it != prepared_.end()) {
    if (Status s = writeSpec(it->second); !s) {  // present already: a no-op
      fail.error = who + ": " + s.error().message;
      return fail;
    }
    return answerFor(it->second);
  }
  auto object = claims_.getClaim(ref.ns, ref.name);
  if (!object) {
    fail.error = who + ": " + object.error().message;
    return fail;
  }
  auto claim = api::parseClaim(*object);
  if (!claim) {
    fail.error = who + ": " + claim.error().message;
    return fail;
  }
  auto decided = decidePrepare(*claim, ref.uid, opts_.nodeName, inventory_());
  if (!decided) {
    fail.error = decided.error().message;
    return fail;
  }
  if (Status s = writeSpec(*decided); !s) {
    fail.error = who + ": " + s.error().message;
    return fail;
  }
  prepared_[ref.uid] = *decided;
  if (Status s = checkpoint_.save(prepared_); !s) {
    prepared_.erase(ref.uid);
    (void)specs_.remove(ref.uid);
    fail.error = who + ": checkpoint: " + s.error().message;
    return fail;
  }
  spdlog::info("prepared {} ({} GPU(s))", who, decided->devices.size());
  return answerFor(*decided);
}

std::map<std::string, std::string> DraDriver::unprepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard lock(mu_);
  std::map<std::string, std::string> out;
  for (const ClaimRef& ref : claims) {
    out[ref.uid] = unprepareOne(ref);
  }
  return out;
}

std::string DraDriver::unprepareOne(const ClaimRef& ref) {
  const std::string who = "ResourceClaim " + ref.ns + "/" + ref.name;
  if (ref.uid.empty() || !cdi::SpecDir::isValidTag(ref.uid)) {
    return who + ": kubelet sent no usable claim UID";
  }
  // The spec first: a crash after it leaves a checkpoint entry that the repeated call removes.
  if (Status s = specs_.remove(ref.uid); !s) {
    return who + ": " + s.error().message;
  }
  auto it = prepared_.find(ref.uid);
  if (it == prepared_.end()) {
    return "";
  }
  PreparedClaim kept = it->second;
  prepared_.erase(it);
  if (Status s = checkpoint_.save(prepared_); !s) {
    prepared_.emplace(ref.uid, std::move(kept));
    return who + ": checkpoint: " + s.error().message;
  }
  spdlog::info("unprepared {}", who);
  return "";
}

PreparedClaims DraDriver::prepared() const {
  std::lock_guard lock(mu_);
  return prepared_;
}

}  // namespace kc::devplugin
