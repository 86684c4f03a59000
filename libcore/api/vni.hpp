#pragma once
// The VNI object (kubecomp.io/v1, kind VNI): one per job-like object that opted in
// (annotation vni.kubecomp.io/request), named vni-<owner uid> in the owner's namespace, written
// by vni-webhook as a Metacontroller attachment and read back from the hook's observed
// attachments. The owner carries the VNI as label vni.kubecomp.io/vni.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "libcore/api/names.hpp"

namespace kc::api {

// A Slingshot VNI: 1..65535 (16 bits, 0 reserved).
inline constexpr std::uint32_t kMaxVni = 65535;

struct VniObject {
  std::string name;
  std::string ns;
  std::string ownerUid;              // label vni.kubecomp.io/owner-uid
  std::optional<std::uint32_t> vni;  // spec.vni when it is a valid VNI

  friend bool operator==(const VniObject&, const VniObject&) = default;
};

// "vni-" + the owner's uid.
std::string vniObjectName(const std::string& ownerUid);
// The whole object (apiVersion, kind, metadata with the owner label, spec.vni). `vni` must be set.
nlohmann::json toJson(const VniObject& object);
// Lenient, never throws: missing or mistyped fields read as empty; spec.vni as nullopt unless it
// is an integer in 1..kMaxVni.
VniObject parseVniObject(const nlohmann::json& object);

}  // namespace kc::api
