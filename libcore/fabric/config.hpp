#pragma once
// Fabric configuration: which chassis make up a GPU pool and how to reach each one, read from
// one YAML (or JSON) file that a daemon gets from a ConfigMap, with credentials from Secret
// mounts. This is how production code (reconfig-mgr) builds its drivers; pointing `url` at
// `tools/chassis-sim` (either dialect) is the simulated configuration used by tests and the
// local demo.
//
//   pool: pool-a                     # optional, default "fabric"
//   chassis:
//     - name: falcon-0               # DNS label, prefix of this chassis' GPU ids
//       dialect: h3                  # h3 | redfish
//       url: http://10.0.0.5         # H3 REST base / Redfish service base (without /redfish/v1)
//       gpuModel: Tesla V100-PCIE-32GB   # h3 only: the resources rows carry no model
//       gep: "0"                     # h3 only
//       auth: session                # redfish only: session | basic | none
//       credentialsFile: /etc/kubecomp/fabric/falcon-0   # Secret mount dir or user:password file
//       caFile: /etc/kubecomp/fabric/ca.crt              # https: trusted CA bundle (PEM)
//       insecureSkipVerify: false    # https: no certificate check (logged as a warning)
//       readParallelism: 4           # redfish only: GETs in flight at once (1..16)
//       expand: true                 # redfish only: $expand where the service advertises it
//       style: composition           # redfish only: composition (CompositionService) | fabric
//       fabric: CXL                  # redfish style fabric only: the Fabric's Id (default: the
//       only one) readTimeoutMs: 15000         # per request, inventory reads moveTimeoutMs: 45000
//       # per request, attach/detach attempts: 3 initialBackoffMs: 500 maxBackoffMs: 8000
//
// Unknown keys are errors (a typo must not silently fall back to a default), as are duplicate
// chassis names, a dialect-specific key on the other dialect, and out-of-range numbers. TLS
// keys need an https url, and caFile and insecureSkipVerify exclude each other (which one was
// meant?). Without caFile an https chassis is checked against the system trust store.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/fabric/call_policy.hpp"
#include "libcore/fabric/driver.hpp"
#include "libcore/fabric/pool.hpp"
#include "libcore/fabric/redfish_driver.hpp"

namespace kc::fabric {

struct ChassisConfig {
  std::string name;
  std::string dialect;  // "h3" | "redfish"
  std::string url;
  std::string gpuModel;                      // h3
  std::string gep = "0";                     // h3
  RedfishAuth auth = RedfishAuth::kSession;  // redfish
  std::string credentialsFile;               // empty: no credentials
  std::string caFile;
  bool insecureSkipVerify = false;
  std::uint32_t readParallelism = 4;                // redfish
  bool expand = true;                               // redfish
  RedfishStyle style = RedfishStyle::kComposition;  // redfish
  std::string fabric;                               // redfish, style fabric: the Fabric Id
  CallPolicy policy;
};

struct FabricConfig {
  std::string pool = "fabric";
  std::vector<ChassisConfig> chassis;
};

// Parses and validates the text (YAML or JSON). Errors are "invalid" and name the key and
// the chassis entry.
Result<FabricConfig> parseFabricConfig(std::string_view text);
Result<FabricConfig> loadFabricConfig(const std::string& path);

// One driver for one entry: reads its credentials file (errors never echo the secret).
// `sleeper` is how drivers wait between attempts (default: real sleeping).
Result<std::unique_ptr<FabricDriver>> makeDriver(const ChassisConfig& chassis,
                                                 Sleeper sleeper = {});
// Every entry behind one FabricPool.
Result<std::unique_ptr<FabricPool>> makePool(const FabricConfig& config, Sleeper sleeper = {});

}  // namespace kc::fabric
