#pragma once
// FabricDriver for DMTF Redfish composition: GPUs are ResourceBlocks whose Processors have
// ProcessorType "GPU"; each node is a composed ComputerSystem; a GPU moves with the
// ComputerSystem.RemoveResourceBlock / AddResourceBlock actions. The driver discovers every
// URI from the service root and @odata.id links, sends ETags when the service offers them
// (re-reading and retrying on 428/412), and verifies every action by re-reading the blocks.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "libcore/fabric/call_policy.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/fabric/driver.hpp"
#include "libcore/fabric/redfish_codec.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::fabric {

namespace detail {
struct Endpoint;
}

enum class RedfishAuth : std::uint8_t { kSession, kBasic, kNone };

struct RedfishOptions {
  std::string chassis;  // DNS label; prefix of this service's GPU ids
  std::string baseUrl;  // "https://bmc" (service root at <baseUrl>/redfish/v1)
  RedfishAuth auth = RedfishAuth::kSession;
  std::optional<Credentials> credentials;
  CallPolicy policy;
  net::ClientTlsOptions tls;
  Sleeper sleeper;  // default: realSleeper()
};

class RedfishDriver final : public FabricDriver {
 public:
  static Result<std::unique_ptr<RedfishDriver>> create(RedfishOptions options);
  ~RedfishDriver() override;

  std::string_view dialect() const override { return "redfish"; }
  const std::string& name() const override { return options_.chassis; }

  Result<Inventory> inventory() override;
  Result<MoveReport> attach(const std::string& gpuId, const std::string& host) override;
  Result<MoveReport> detach(const std::string& gpuId) override;

  // Sessions created so far (tests check re-login after expiry).
  std::uint32_t logins() const { return logins_; }

 private:
  struct Block {
    redfish::ResourceBlock block;
    std::optional<std::string> etag;
    GpuInfo gpu;
    std::optional<std::string> systemLink;
  };
  struct System {
    redfish::ComputerSystem system;
    std::optional<std::string> etag;
  };
  struct View {
    std::map<std::string, Block> blocks;    // by ResourceBlock Id
    std::map<std::string, System> systems;  // by link
    std::map<std::string, std::string> systemIdToLink;
  };
  struct Reply {
    unsigned status = 0;
    std::string body;
    std::optional<std::string> etag;
  };

  RedfishDriver(RedfishOptions options, std::unique_ptr<detail::Endpoint> endpoint);
  Result<Reply> call(const std::string& method, const std::string& target, const std::string& body,
                     std::chrono::milliseconds timeout, bool authenticated = true);
  // GET with retries (transport errors, 5xx); anything but 200 is an error.
  Result<Reply> getOk(const std::string& target, bool authenticated = true);
  Result<Ok> login();
  Result<Ok> discover();
  Result<View> readView();  // readViewOnce, re-discovering the links once on a 404
  Result<View> readViewOnce();
  Result<std::string> localIdOf(const std::string& gpuId) const;
  Result<MoveReport> move(const std::string& gpuId, const std::optional<std::string>& host);

  RedfishOptions options_;
  std::unique_ptr<detail::Endpoint> endpoint_;
  std::mutex mutex_;  // one call at a time per driver; guards the fields below
  std::optional<redfish::ServiceRoot> root_;
  std::string blocksLink_;
  std::string token_;
  std::string sessionLink_;
  std::uint32_t logins_ = 0;
};

}  // namespace kc::fabric
