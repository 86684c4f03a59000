#pragma once
// FabricDriver for DMTF Redfish composition: GPUs are ResourceBlocks whose Processors have
// ProcessorType "GPU". The driver discovers every URI from the service root ("/redfish/v1/",
// DSP0266's form; same-origin redirects are followed) and @odata.id links, reads collections
// defensively (redfish_codec.hpp), and reads attachment from both sides (ResourceBlock
// Links.ComputerSystems and ComputerSystem Links.ResourceBlocks).
//
// Hosts: when the service has Compute ResourceBlocks (a host's side of the fabric), a host is
// named by its compute block's Id, because composed systems come and go; otherwise a host is a
// ComputerSystem Id.
//
// A move uses what the service offers, in this order:
//  1. the ComputerSystem.AddResourceBlock / RemoveResourceBlock actions of the composed system
//     (when the action's ResourceBlock@Redfish.AllowableValues, if listed, names the block);
//  2. DSP0266 specific composition: attach = POST {"Links":{"ResourceBlocks":[compute, gpu]}}
//     to the collection a @Redfish.CollectionCapabilities "ComputerSystemComposition" names
//     (on the Systems collection or a ResourceZone), when the host's compute block may join
//     another composition; detach = DELETE of the composed system holding the GPU, when it
//     holds nothing else but compute blocks;
//  3. otherwise errc::kUnsupported, naming what the service lacks.
// ETags are sent when the service offers them (re-reading and retrying on 428/412), and every
// move is verified by re-reading (verifiedMove): first the GPU's own ResourceBlock alone (one
// GET), which proves a move when the block names the system it is now in (or, on a service
// whose blocks name their systems, none); whatever that block cannot prove, the whole View
// decides.
//
// Reading: the Systems and ResourceBlocks collections are read with `$expand` when the service
// root advertises it (ProtocolFeaturesSupported.ExpandQuery; redfish_expand.hpp), so members
// arrive inline; members (and GPU Processors) that did not arrive are fetched in parallel,
// `readParallelism` at a time. Whatever way a resource arrived, it is parsed by the same parser
// and in the collection's order, so the View does not depend on how it was read.
//
// Style "fabric" (RedfishStyle::kFabric; redfish_fabric.cpp): DSP0268 Fabrics instead of the
// CompositionService, as PCIe/CXL fabric managers expose them. GPUs are the Fabric's target
// Endpoints whose Processor entity has ProcessorType "GPU" (local id: the Endpoint Id), hosts
// its initiator Endpoints (host: the Endpoint Id), and a Connection from a host to a GPU is
// the attachment: attach = POST of a Connection to the Fabric's Connections collection,
// detach = DELETE of that Connection; verified by re-reading like every move.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "libcore/fabric/call_policy.hpp"
#include "libcore/fabric/credentials.hpp"
#include "libcore/fabric/driver.hpp"
#include "libcore/fabric/redfish_codec.hpp"
#include "libcore/fabric/redfish_expand.hpp"
#include "libcore/fabric/redfish_fabric_codec.hpp"
#include "libcore/fabric/verified_move.hpp"
#include "libcore/net/http_client.hpp"

namespace kc::fabric {

namespace detail {
struct Endpoint;
}

enum class RedfishAuth : std::uint8_t { kSession, kBasic, kNone };
// How the service attaches GPUs: CompositionService ResourceBlocks (DSP0266 composition) or
// DSP0268 Fabrics (Endpoints and Connections).
enum class RedfishStyle : std::uint8_t { kComposition, kFabric };

struct RedfishOptions {
  std::string chassis;  // DNS label; prefix of this service's GPU ids
  std::string baseUrl;  // "https://bmc" (service root at <baseUrl>/redfish/v1)
  RedfishAuth auth = RedfishAuth::kSession;
  std::optional<Credentials> credentials;
  CallPolicy policy;
  net::ClientTlsOptions tls;
  Sleeper sleeper;  // default: realSleeper()
  // Reads: GETs in flight at once (1 = one after the other, as before issue 24), and whether
  // to use $expand where the service advertises it (false: an escape hatch for a service whose
  // expanded replies are wrong).
  std::uint32_t readParallelism = 4;
  bool expand = true;
  RedfishStyle style = RedfishStyle::kComposition;
  std::string fabric;  // kFabric: the Fabric's Id; empty: the service's only Fabric
};

class RedfishDriver final : public FabricDriver {
 public:
  static Result<std::unique_ptr<RedfishDriver>> create(RedfishOptions options);
  ~RedfishDriver() override;

  std::string_view dialect() const override { return "redfish"; }
  RedfishStyle style() const { return options_.style; }
  const std::string& name() const override { return options_.chassis; }

  Result<Inventory> inventory() override;
  Result<MoveReport> attach(const std::string& gpuId, const std::string& host) override;
  Result<MoveReport> detach(const std::string& gpuId) override;

  // Sessions created so far (tests check re-login after expiry).
  std::uint32_t logins() const { return logins_.load(); }
  // GET requests sent so far (retries and redirects of one call count once; tests and the
  // measurements in docs/fabric.md count reads with it).
  std::uint64_t getsSent() const { return gets_.load(); }
  // The $expand query the driver uses for a collection of this service (empty: none), after
  // the service root was read.
  std::string expandInUse() const;

 private:
  struct Block {
    redfish::ResourceBlock block;
    std::string link;  // as listed in the collection
    std::optional<std::string> etag;
    bool gpuBlock = false;
    GpuInfo gpu;
    std::set<std::string> systemLinks;      // both sides: the block's links and systems listing it
    std::optional<std::string> systemLink;  // GPU blocks: the one system holding it
    bool embedded = false;                  // arrived inline in an expanded collection
  };
  struct System {
    redfish::ComputerSystem system;
    std::optional<std::string> etag;
    bool embedded = false;
  };
  struct View {
    std::map<std::string, Block> blocks;    // by ResourceBlock Id
    std::map<std::string, System> systems;  // by link
    std::map<std::string, std::string> systemIdToLink;
    std::map<std::string, std::string> blockLinkToId;  // collection links and @odata.ids
    bool computeHosts = false;                         // hosts are compute block Ids
    std::optional<std::string> compositionTarget;      // where a specific composition POSTs
    std::vector<std::string> skipped;                  // blocks that could not be read, why
  };
  // How one move is done on this service.
  struct MovePlan {
    enum class Kind : std::uint8_t { kAction, kCompose, kDecompose } kind = Kind::kAction;
    std::string target;      // action target, composition collection, or the system to delete
    std::string systemLink;  // kAction: the system the action belongs to
    std::vector<std::string> blocks;  // kCompose
  };
  struct Reply {
    unsigned status = 0;
    std::string body;
    std::optional<std::string> etag;  // the ETag header (none for an embedded resource)
    bool embedded = false;            // cut out of an expanded collection, not fetched
  };
  // The replies of one View read by link: resources that arrived inline and ones fetched ahead
  // in parallel. A link not in it is fetched when asked for.
  using Fetched = std::map<std::string, Result<Reply>>;
  struct CollectionRead {
    std::vector<std::string> members;
    std::map<std::string, std::string> embedded;  // link -> JSON text of inline resources
    std::optional<std::string> compositionTarget;
  };

  // The fabric style's view (redfish_fabric.cpp).
  struct FabricGpu {
    std::string link;  // the Endpoint's @odata.id
    GpuInfo gpu;
    std::vector<std::string> connections;  // Connections that target it (their links)
    std::vector<std::string> named;        // the Endpoint's own Links.Connections
  };
  struct FabricView {
    std::map<std::string, FabricGpu> gpus;             // by Endpoint Id
    std::map<std::string, std::string> hosts;          // initiator Endpoint Id -> link
    std::map<std::string, std::string> linkToId;       // Endpoint links -> Id (GPUs, hosts)
    std::map<std::string, redfish::Connection> conns;  // by link
    std::vector<std::string> skipped;
  };
  struct FabricLinks {
    std::string id;
    std::string endpoints;
    std::optional<std::string> connections;
  };

  RedfishDriver(RedfishOptions options, std::unique_ptr<detail::Endpoint> endpoint);
  Result<Reply> call(const std::string& method, const std::string& target, const std::string& body,
                     std::chrono::milliseconds timeout, bool authenticated = true);
  // GET with retries (transport errors, 5xx); anything but 200 is an error.
  // `probe`: a $expand read; a 400/405/501 is kUnsupported at once (no retries).
  Result<Reply> getOk(const std::string& target, bool authenticated = true, bool probe = false);
  // The reply for `link` from `fetched`, else a GET.
  Result<Reply> fetch(const std::string& link, const Fetched& fetched);
  // GETs every link not yet in `fetched`, readParallelism at a time.
  void prefetch(const std::vector<std::string>& links, Fetched& fetched);
  Error transport(const Error& error, const std::string& what) const;
  Result<Ok> login();
  Result<Ok> discover();
  Result<View> readView();  // readViewOnce, re-discovering the links once on a 404
  Result<View> readViewOnce();
  // The steps of readViewOnce (redfish_view.cpp).
  Result<Ok> loadSystem(View& view, const std::string& link, const Fetched& fetched);
  Result<Ok> loadBlock(View& view, const std::string& link, const Fetched& fetched);
  Result<std::optional<redfish::Processor>> gpuProcessorOf(const redfish::ResourceBlock& block,
                                                           const Fetched& fetched);
  // Processors of the non-compute blocks among `links`, fetched ahead.
  void prefetchProcessors(const std::vector<std::string>& links, Fetched& fetched);
  Result<Ok> readAttachments(View& view, const Fetched& fetched);
  static Result<Ok> assignGpuHosts(View& view);
  static std::string hostOfSystem(const View& view, const std::string& sysLink);
  Result<std::string> localIdOf(const std::string& gpuId) const;
  // A move and its steps (redfish_move.cpp).
  Result<MoveReport> move(const std::string& gpuId, const std::optional<std::string>& host);
  Result<bool> moveNeeded(const View& view, const GpuInfo& gpu, const std::string& gpuId,
                          const std::optional<std::string>& host) const;
  Result<MovePlan> planMove(const View& view, const std::string& localId,
                            const std::optional<std::string>& host) const;
  Result<MovePlan> planAttach(const View& view, const std::string& localId,
                              const std::string& host) const;
  Result<MovePlan> planDetach(const View& view, const std::string& localId) const;
  Result<MoveClaim> sendMove(const View& view, const std::string& localId,
                             const std::optional<std::string>& host, const std::string& verb);
  Result<Observed> observeMove(View& view, const std::string& gpuId, const std::string& localId,
                               const std::optional<std::string>& host, const std::string& verb);
  // One GET of the GPU's own ResourceBlock: kReached when that block alone proves the move,
  // nothing when it does not (observeMove then reads the whole View).
  Result<std::optional<Observed>> observeBlock(View& view, const std::string& localId,
                                               const std::optional<std::string>& host);
  // Every member of a collection (all pages); with `expandLevels` > 0 and a service that
  // expands, asked with $expand and the inline resources kept.
  Result<CollectionRead> readCollection(const std::string& link, const std::string& what,
                                        std::int64_t expandLevels = 0);
  // A fresh ETag of a resource that arrived inline without one (the action needs it).
  std::optional<std::string> freshEtag(const std::string& link);
  // The fabric style (redfish_fabric.cpp); called with mutex_ held.
  Result<Ok> discoverFabric();
  Result<FabricLinks> chooseFabric(const std::vector<std::string>& fabrics);
  Result<FabricView> readFabricView();
  Result<FabricView> readFabricViewOnce();
  Result<Ok> loadEndpoint(FabricView& view, const std::string& link, const Fetched& fetched);
  Result<Ok> loadConnections(FabricView& view, const std::vector<std::string>& links,
                             Fetched& fetched);
  Result<Inventory> fabricInventory();
  Result<MoveReport> fabricMove(const std::string& gpuId, const std::optional<std::string>& host);
  Result<MoveClaim> sendFabricMove(const FabricView& view, const std::string& localId,
                                   const std::optional<std::string>& host, const std::string& verb);
  Result<Observed> observeFabricMove(FabricView& view, const std::string& gpuId,
                                     const std::string& localId,
                                     const std::optional<std::string>& host,
                                     const std::string& verb);

  RedfishOptions options_;
  std::unique_ptr<detail::Endpoint> endpoint_;
  std::mutex mutex_;  // one call at a time per driver; guards the fields below it
  std::optional<redfish::ServiceRoot> root_;
  std::optional<redfish::CompositionService> composition_;
  std::optional<std::string> zoneCompositionTarget_;  // from a ResourceZone's capabilities
  std::string blocksLink_;
  std::optional<FabricLinks> fabric_;       // kFabric: the Fabric in use, once discovered
  redfish::ExpandSupport expand_;           // from the service root
  std::atomic<bool> expandRefused_{false};  // the service answered $expand with 400/405/501
  // The reads of one call run on several threads: the session is shared under its own mutex.
  std::mutex sessionMutex_;  // guards token_ and sessionLink_
  std::string token_;
  std::string sessionLink_;
  std::atomic<std::uint32_t> logins_{0};
  std::atomic<std::uint64_t> gets_{0};
};

}  // namespace kc::fabric
