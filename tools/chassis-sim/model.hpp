#pragma once
// In-memory model of one or more PCIe-fabric GPU chassis, the single source of truth behind
// both wire dialects the simulator serves (H3 Falcon h3api and DMTF Redfish composition).
// Nothing is persisted: every start begins from the topology file.
//
// Thread-safe: every member locks `mutex_`.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::chassis_sim {

using Millis = std::chrono::milliseconds;

enum class Op : std::uint8_t { kInventory, kAssign, kUnassign };
std::string_view toString(Op op);
std::optional<Op> parseOp(std::string_view text);

// What an injected fault does to the next matching operation.
enum class FaultKind : std::uint8_t {
  kFail,          // error reply, nothing changes
  kHang,          // no reply for `hang` (past any sane client timeout), nothing changes
  kLieFailure,    // does the operation, replies failure (the real H3 assign quirk)
  kLieSuccess,    // replies success, does nothing
  kLoseGpu,       // the GPU drops off the fabric (unhealthy); assign/unassign reply success
  kMalformed,     // replies `body` (or `bodyBytes` of filler) with status 200, nothing changes
  kPrecondition,  // Redfish: 428 as if the ETag went stale (concurrent change); H3: like fail
  kBusy,          // HTTP 503 "busy" (another operation in progress), nothing changes
};
std::string_view toString(FaultKind kind);
std::optional<FaultKind> parseFaultKind(std::string_view text);

struct Fault {
  std::string chassis;  // empty = any chassis
  Op op = Op::kAssign;
  FaultKind kind = FaultKind::kFail;
  std::optional<std::string> gpu;  // Dev_GID; empty = any GPU
  std::int32_t times = 1;          // occurrences left; -1 = until cleared
  std::string body;                // kMalformed: raw reply body
  std::size_t bodyBytes = 0;       // kMalformed: when > 0, a body of this many bytes instead
  Millis hang{60'000};             // kHang: how long to hold the request
};
Result<Fault> parseFault(const nlohmann::json& doc);
nlohmann::json toJson(const Fault& fault);

struct LatencyRange {
  Millis min{0};
  Millis max{0};
};
// Defaults: the figures measured on a real H3 Falcon 4005 (KubeComp archive logs).
struct Latencies {
  LatencyRange inventory{Millis{3000}, Millis{4000}};
  LatencyRange unassign{Millis{5000}, Millis{8000}};
  LatencyRange assign{Millis{8000}, Millis{16000}};
  double scale = 1.0;  // 0 = instant (unit tests)
};

struct Host {
  std::uint32_t port = 0;     // H3 host port (decimal); port_gid is its hex + 'h'
  std::string system;         // Redfish ComputerSystem Id
  std::uint64_t version = 1;  // ETag source
};

struct Gpu {
  std::string gid;  // Dev_GID, also the Redfish ResourceBlock Id
  std::string uuid;
  std::string model;
  std::optional<std::uint32_t> host;  // attached host port
  bool healthy = true;
  std::uint64_t version = 1;  // ETag source
};

struct Chassis {
  std::string name;
  std::vector<Host> hosts;
  std::vector<Gpu> gpus;
  // Operation counters (requests that reached the model), for tests.
  std::map<std::string, std::uint64_t> counters;

  const Host* hostByPort(std::uint32_t port) const;
  const Host* hostBySystem(std::string_view system) const;
  Gpu* gpu(std::string_view gid);
  const Gpu* gpu(std::string_view gid) const;
};

// What the Redfish dialect looks like.
//  classic   DSP0266 as written: "/redfish/v1" and "/redfish/v1/" both answer, collections
//            list "Members", every host is a composed ComputerSystem offering the
//            #ComputerSystem.AddResourceBlock/RemoveResourceBlock actions, and GPU blocks and
//            systems link each other.
//  emulator  the variations seen in public implementations (the DMTF Redfish Interface
//            Emulator among them): "/redfish/v1" answers 308 with Location "/redfish/v1/";
//            collections list their members under "Links": {"Members": [...]}; each host is
//            a Compute ResourceBlock (Id = the host's system name, shareable), a ResourceZone
//            advertises specific composition (@Redfish.CollectionCapabilities, UseCase
//            "ComputerSystemComposition"), and a GPU is attached only by POSTing
//            {"Links":{"ResourceBlocks":[compute, gpu]}} to the Systems collection (answered
//            200 with the new system) and detached by DELETE of that composed system; systems
//            have no Add/RemoveResourceBlock actions and GPU blocks carry no
//            Links.ComputerSystems (attachment shows only on the system's side).
//  fabric    DSP0268 Fabrics, as PCIe/CXL fabric managers serve them (redfish_fabric.hpp):
//            no CompositionService; Fabric "PCIe" with one initiator Endpoint per host (Id =
//            the host's system name) and one target Endpoint per GPU (Id = its gid, its GPU
//            Processor under /Chassis), a Connection per attached GPU; attach = POST of a
//            Connection to the Connections collection (201), detach = DELETE of it (204).
enum class RedfishProfile : std::uint8_t { kClassic, kEmulator, kFabric };
std::string_view toString(RedfishProfile profile);
std::optional<RedfishProfile> parseRedfishProfile(std::string_view text);

struct Topology {
  std::vector<Chassis> chassis;
  Latencies latencies;
  // Redfish URIs: "standard" (/Systems/<Id>, /ResourceBlocks/<Id>) or "opaque" (URIs that
  // do not contain the Ids), to prove clients follow links instead of building URIs.
  std::string redfishUris = "standard";
  // Redfish actions without ETags are refused with 428 when true.
  bool redfishRequireEtags = false;
  // > 0: Redfish collections list at most this many members per page and link the rest with
  // Members@odata.nextLink ("<collection>?$skip=N"); 0: one page.
  std::uint32_t redfishPageSize = 0;
  // false: ETags only in the body ("@odata.etag"), no ETag response header (some BMCs).
  bool redfishEtagHeader = true;
  RedfishProfile redfishProfile = RedfishProfile::kClassic;
};

// Topology from JSON or YAML text (see docs/fabric.md for the schema). Validates names,
// unique ids, host references; errors name the offending entry.
Result<Topology> parseTopology(std::string_view text);
Result<Topology> loadTopology(const std::string& path);

// One GPU's attachment and health as a state change of the model left them.
struct GpuChange {
  std::string chassis;
  std::string gid;
  std::optional<std::uint32_t> host;  // attached host port after the change
  bool healthy = true;
};
using GpuChangeListener = std::function<void(const GpuChange&)>;

// The outcome the server should produce for one incoming operation.
struct Plan {
  Millis delay{0};
  std::optional<Fault> fault;
};

class ChassisModel {
 public:
  explicit ChassisModel(Topology topology, std::uint64_t seed = 1);

  std::vector<std::string> chassisNames() const;
  bool hasChassis(std::string_view name) const;
  const Topology& initial() const { return initial_; }

  // Samples the latency of `op` (scaled) and takes the first matching fault occurrence.
  Plan plan(std::string_view chassis, Op op, std::string_view gid);

  // State changes. Errors: "not_found" (chassis/GPU/host), "conflict" (attached elsewhere),
  // "unhealthy" (GPU lost). Assigning to the current host and unassigning an unattached GPU
  // succeed without change.
  Status assign(std::string_view chassis, std::string_view gid, std::uint32_t port);
  // `fromPort`, when given, must be the GPU's current host ("conflict" otherwise).
  Status unassign(std::string_view chassis, std::string_view gid,
                  std::optional<std::uint32_t> fromPort = {});
  Status loseGpu(std::string_view chassis, std::string_view gid);
  // Told of every change assign, unassign and loseGpu make (not of calls that change nothing),
  // in the order they happen and before the call returns, so before the reply goes out: the
  // hosts' side of a move (host_trees.hpp) follows the chassis. Called with the model's lock
  // held: the listener must not call back into the model. Empty: nobody is told.
  void setChangeListener(GpuChangeListener listener);
  void count(std::string_view chassis, std::string_view what);

  // Copy of one chassis' true state.
  std::optional<Chassis> snapshot(std::string_view chassis) const;
  std::vector<Chassis> snapshotAll() const;

  void setLatencyScale(double scale);
  void addFault(Fault fault);
  void clearFaults();
  std::vector<Fault> faults() const;
  // Session tokens (Redfish).
  struct Session {
    std::string id;
    std::string token;
  };
  Session createSession(std::string user);
  bool validSession(std::string_view token) const;
  bool deleteSession(std::string_view id);
  void clearSessions();

  nlohmann::json stateJson() const;

 private:
  Chassis* find(std::string_view name);
  void changed(const Chassis& chassis, const Gpu& gpu);  // with mutex_ held

  Topology initial_;
  mutable std::mutex mutex_;  // guards everything below
  std::vector<Chassis> chassis_;
  Latencies latencies_;
  std::vector<Fault> faults_;
  std::mt19937_64 rng_;
  std::map<std::string, std::pair<std::string, std::string>> sessions_;  // id -> (token, user)
  std::uint64_t sessionCounter_ = 0;
  GpuChangeListener listener_;
};

}  // namespace kc::chassis_sim
