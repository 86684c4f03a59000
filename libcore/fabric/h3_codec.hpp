#pragma once
// Wire format of the H3 Falcon 4005 REST API (h3api/v1), as used against real hardware:
//   GET    /h3api/v1/resources   -> JSON array of flat string maps (device rows and port rows)
//   POST   /h3api/v1/allocation  Content-Type: text/plain,
//   {"gep":"0","port_gid":"30h","dev_gid":"001300"} DELETE /h3api/v1/allocation  Content-Type:
//   text/plain, {"gep":"0","dev_gid":"001300"} reply
//   {"Action":"...","Result":[true|false],"Remark":"..."}
// Host port numbers are decimal in rows ("Host_Port#":"48") and hex + 'h' in requests ("30h").
// Pure functions: both the driver and the simulator's tests use them; the simulator renders
// its replies with its own code so that the two sides are checked against each other.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::fabric::h3 {

inline constexpr std::string_view kResourcesPath = "/h3api/v1/resources";
inline constexpr std::string_view kAllocationPath = "/h3api/v1/allocation";
inline constexpr std::uint32_t kMaxHostPort = 255;

struct GpuRow {
  std::string devGid;                     // "001300"
  std::optional<std::uint32_t> hostPort;  // Host_Port#, nullopt when unattached ("" or absent)
  std::string guid;                       // OB_GPU_GUID, empty when the chassis cannot read it
};

struct Resources {
  std::vector<GpuRow> gpus;                    // rows with dev_type "GPU", in reply order
  std::map<std::uint32_t, std::string> ports;  // port rows: Port# -> Port_GID
};

// Strict: the reply must be an array of objects; GPU rows need a valid Dev_GID, a Host_Port#
// that is empty/absent or a decimal port, string-typed fields; Dev_GIDs are unique.
Result<Resources> parseResources(std::string_view body);

struct Reply {
  std::string action;
  bool result = false;
  std::string remark;
};
// Strict: object with string Action, array Result holding exactly one boolean, string Remark
// (Remark may be absent).
Result<Reply> parseReply(std::string_view body);

// 48 -> "30h", 0 -> "00h".
Result<std::string> portGid(std::uint32_t hostPort);
// "30h" / "30H" -> 48.
Result<std::uint32_t> parsePortGid(std::string_view gid);
// Decimal "48" -> 48, range 0..kMaxHostPort.
Result<std::uint32_t> parseHostPort(std::string_view text);
// Dev_GID: 1..16 hex digits.
bool isValidDevGid(std::string_view gid);

std::string encodeAssign(std::string_view gep, std::string_view portGid, std::string_view devGid);
std::string encodeUnassign(std::string_view gep, std::string_view devGid);

// Request side, for the simulator.
struct AllocationRequest {
  std::string gep;
  std::optional<std::string> portGid;  // present for assign
  std::string devGid;
};
Result<AllocationRequest> parseAllocationRequest(std::string_view body, bool isAssign);

}  // namespace kc::fabric::h3
