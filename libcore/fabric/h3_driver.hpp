#pragma once
// FabricDriver for the H3 Falcon 4005 REST API (h3api/v1, plain HTTP on the real chassis).
// Every attach/detach is judged by re-reading /h3api/v1/resources: the chassis answers
// Result:[false] to successful assigns, so its reply is only a hint.

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "libcore/fabric/call_policy.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/fabric/driver.hpp"
#include "libcore/fabric/h3_codec.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::fabric {

namespace detail {
struct Endpoint;
}

struct H3Options {
  std::string chassis;    // DNS label; prefix of this chassis' GPU ids
  std::string baseUrl;    // "http://10.0.0.5" or "http://sim:8080/chassis/falcon-a"
  std::string gep = "0";  // the "gep" field of allocation requests (always "0" on the testbed)
  std::string gpuModel;   // resources rows carry no model: what the operator installed
  CallPolicy policy;
  std::optional<Credentials> credentials;  // HTTP basic auth when set (the testbed used none)
  net::ClientTlsOptions tls;
  Sleeper sleeper;  // default: realSleeper()
};

class H3Driver final : public FabricDriver {
 public:
  static Result<std::unique_ptr<H3Driver>> create(H3Options options);
  ~H3Driver() override;

  std::string_view dialect() const override { return "h3"; }
  const std::string& name() const override { return options_.chassis; }

  Result<Inventory> inventory() override;
  Result<MoveReport> attach(const std::string& gpuId, const std::string& host) override;
  Result<MoveReport> detach(const std::string& gpuId) override;
  // Unassign (when `from` is set), assign, then re-read until the row shows the GPU on `to`:
  // one inventory read for the whole move when the chassis does what it is asked (the
  // original manager's sequence, 17-22 s on the testbed), instead of detach()'s and attach()'s
  // read before and after each. An unassign that did not take shows as the GPU still on
  // `from` after the assign (the chassis refuses to assign an attached GPU): kConflict, or
  // kUnverified when the chassis had answered Result:[true] to the unassign.
  Result<MoveReport> move(const std::string& gpuId, const std::optional<std::string>& from,
                          const std::string& to) override;

 private:
  H3Driver(H3Options options, std::unique_ptr<detail::Endpoint> endpoint);
  Result<h3::Resources> readResources();
  Result<h3::Reply> sendAllocation(const std::string& method, const std::string& body);
  // Sends the assign of `devGid` to `port` and re-reads until the row shows it there
  // (verifiedMove). `fromPort`: the host port a move unassigned it from (the GPU still there
  // means the unassign did not take: kUnverified when the chassis claimed it, else kConflict).
  Result<MoveReport> assignVerified(MoveReport report, const std::string& devGid,
                                    std::uint32_t port, const std::string& what,
                                    std::optional<std::uint32_t> fromPort, bool unassignClaimed);
  Result<std::string> localIdOf(const std::string& gpuId) const;
  Inventory toInventory(const h3::Resources& resources) const;
  net::Headers headers() const;

  H3Options options_;
  std::unique_ptr<detail::Endpoint> endpoint_;
  std::mutex mutex_;  // one call at a time per driver
};

}  // namespace kc::fabric
