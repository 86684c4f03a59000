// RedfishDriver: reading the service into a View (systems, ResourceBlocks, who holds which
// GPU), for inventory() and for planning and verifying moves.

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/fabric/redfish_driver_internal.hpp"

namespace kc::fabric {
namespace {

bool healthy(const std::optional<std::string>& health) {
  return !health || *health == "OK";
}

// The pool's view of a GPU ResourceBlock and its GPU Processor.
GpuInfo gpuInfoOf(const std::string& chassis, const redfish::ResourceBlock& block,
                  const redfish::Processor& gpuProc) {
  GpuInfo gpu;
  gpu.chassis = chassis;
  gpu.localId = block.id;
  gpu.id = makeGpuId(chassis, block.id);
  // Redfish UUIDs are bare; NVIDIA_VISIBLE_DEVICES and nvidia-smi use "GPU-<uuid>".
  gpu.uuid = gpuProc.uuid.empty() || gpuProc.uuid.rfind("GPU-", 0) == 0 ? gpuProc.uuid
                                                                        : "GPU-" + gpuProc.uuid;
  gpu.model = gpuProc.model;
  const bool stateBad =
      block.compositionState == "Failed" || block.compositionState == "Unavailable" ||
      (block.state && (*block.state == "Absent" || *block.state == "UnavailableOffline"));
  if (!healthy(block.health) || !healthy(gpuProc.health) || stateBad) {
    gpu.health = GpuHealth::kUnhealthy;
    gpu.healthDetail = "ResourceBlock health " + block.health.value_or("-") + ", GPU health " +
                       gpuProc.health.value_or("-") + ", CompositionState " +
                       block.compositionState;
  } else if (gpu.uuid.empty()) {
    // Without a UUID no node can tell this GPU from another: never handed to a pod.
    gpu.health = GpuHealth::kUnhealthy;
    gpu.healthDetail = "the GPU Processor reports no UUID (no identity a node can check)";
  }
  return gpu;
}

}  // namespace

void detail::runBounded(std::size_t n, std::size_t width,
                        const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto loop = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      work(i);
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < std::min(width, n); ++t) {
    helpers.emplace_back(loop);
  }
  loop();
  for (auto& t : helpers) {
    t.join();
  }
}

Result<RedfishDriver::View> RedfishDriver::readView() {
  auto view = readViewOnce();
  if (!view && view.error().code == errc::kNotFound) {
    // A link we cached may have moved (service restarted, re-cabled): discover again once.
    root_.reset();
    blocksLink_.clear();
    view = readViewOnce();
  }
  return view;
}

// Systems and ResourceBlocks at once (independent), expanded where the service can; then every
// member that did not arrive inline, and the GPU blocks' Processors, in parallel. The View is
// then built in collection order from those replies, exactly as from one GET after another.
Result<RedfishDriver::View> RedfishDriver::readViewOnce() {
  auto found = discover();
  if (!found) {
    return found.error();
  }
  Result<CollectionRead> systems = makeError(errc::kInternal, "not read");
  Result<CollectionRead> blocks = makeError(errc::kInternal, "not read");
  detail::runBounded(2, options_.readParallelism, [&](std::size_t i) {
    if (i == 0) {
      systems = readCollection(root_->systems, "Redfish Systems collection", 1);
    } else {
      // Two levels: the blocks and their Processors (where the service cascades).
      blocks = readCollection(blocksLink_, "Redfish ResourceBlocks collection", 2);
    }
  });
  if (!systems) {
    return systems.error();
  }
  if (!blocks) {
    return blocks.error();
  }
  Fetched fetched;
  for (auto* read : {&*systems, &*blocks}) {
    for (auto& [link, text] : read->embedded) {
      fetched.emplace(link, Reply{200, std::move(text), std::nullopt, true});
    }
  }
  std::vector<std::string> members = systems->members;
  members.insert(members.end(), blocks->members.begin(), blocks->members.end());
  prefetch(members, fetched);
  prefetchProcessors(blocks->members, fetched);

  View view;
  view.compositionTarget =
      systems->compositionTarget ? systems->compositionTarget : zoneCompositionTarget_;
  for (const auto& link : systems->members) {
    if (auto r = loadSystem(view, link, fetched); !r) {
      return r.error();
    }
  }
  for (const auto& link : blocks->members) {
    if (auto r = loadBlock(view, link, fetched); !r) {
      return r.error();
    }
  }
  if (auto r = readAttachments(view, fetched); !r) {
    return r.error();
  }
  if (auto r = assignGpuHosts(view); !r) {
    return r.error();
  }
  return view;
}

Result<RedfishDriver::Reply> RedfishDriver::fetch(const std::string& link, const Fetched& fetched) {
  const auto it = fetched.find(link);
  if (it != fetched.end()) {
    return it->second;
  }
  return getOk(link);
}

void RedfishDriver::prefetch(const std::vector<std::string>& links, Fetched& fetched) {
  std::vector<std::string> todo;
  for (const auto& link : links) {
    if (!fetched.count(link) && std::find(todo.begin(), todo.end(), link) == todo.end()) {
      todo.push_back(link);
    }
  }
  std::vector<std::optional<Result<Reply>>> replies(todo.size());
  detail::runBounded(todo.size(), std::max<std::uint32_t>(1, options_.readParallelism),
                     [&](std::size_t i) { replies[i] = getOk(todo[i]); });
  for (std::size_t i = 0; i < todo.size(); ++i) {
    fetched.emplace(todo[i], std::move(*replies[i]));
  }
}

void RedfishDriver::prefetchProcessors(const std::vector<std::string>& links, Fetched& fetched) {
  std::vector<std::string> processors;
  for (const auto& link : links) {
    const auto it = fetched.find(link);
    if (it == fetched.end() || !it->second) {
      continue;
    }
    auto block = redfish::parseResourceBlock(it->second->body);
    if (block && !block->isCompute()) {
      processors.insert(processors.end(), block->processors.begin(), block->processors.end());
    }
  }
  prefetch(processors, fetched);
}

std::optional<std::string> RedfishDriver::freshEtag(const std::string& link) {
  auto reply = getOk(link);
  if (!reply) {
    return std::nullopt;  // the action goes without; a 428 re-reads and retries
  }
  if (reply->etag) {
    return reply->etag;
  }
  const auto doc = nlohmann::json::parse(reply->body, nullptr, false);
  if (doc.is_object() && doc.contains("@odata.etag") && doc["@odata.etag"].is_string()) {
    return doc["@odata.etag"].get<std::string>();
  }
  return std::nullopt;
}

Result<Ok> RedfishDriver::loadSystem(View& view, const std::string& link, const Fetched& fetched) {
  auto reply = fetch(link, fetched);
  if (!reply) {
    return reply.error();
  }
  auto sys = redfish::parseComputerSystem(reply->body);
  if (!sys) {
    return sys.error();
  }
  if (view.systemIdToLink.count(sys->id) && view.systemIdToLink[sys->id] != link) {
    return makeError(errc::kProtocol, "two ComputerSystems share the Id " + sys->id);
  }
  view.systemIdToLink[sys->id] = link;
  // The ETag header wins; some services only put it in the body as @odata.etag.
  auto etag = reply->etag ? reply->etag : sys->etag;
  view.systems[link] = System{std::move(*sys), std::move(etag), reply->embedded};
  return Ok{};
}

// The first GPU Processor of a non-compute block, if any.
Result<std::optional<redfish::Processor>> RedfishDriver::gpuProcessorOf(
    const redfish::ResourceBlock& block, const Fetched& fetched) {
  for (const auto& procLink : block.processors) {
    auto procReply = fetch(procLink, fetched);
    if (!procReply) {
      return procReply.error();
    }
    auto proc = redfish::parseProcessor(procReply->body);
    if (!proc) {
      return proc.error();
    }
    if (proc->processorType == "GPU") {
      // One GPU per block is the composable-GPU norm; the block moves as a unit.
      return std::optional<redfish::Processor>(std::move(*proc));
    }
  }
  return std::optional<redfish::Processor>();
}

// A GPU block or a Compute block (a host) into view.blocks; other blocks are skipped.
Result<Ok> RedfishDriver::loadBlock(View& view, const std::string& link, const Fetched& fetched) {
  auto reply = fetch(link, fetched);
  if (!reply) {
    return reply.error();
  }
  auto block = redfish::parseResourceBlock(reply->body);
  if (!block) {
    // One malformed block (no CompositionStatus, a wrong type) must not hide the others.
    view.skipped.push_back("ResourceBlock " + link + ": " + block.error().message);
    return Ok{};
  }
  Block entry;
  entry.link = link;
  entry.embedded = reply->embedded;
  entry.etag = reply->etag ? reply->etag : block->etag;
  std::optional<redfish::Processor> gpuProc;
  if (!block->isCompute()) {
    auto proc = gpuProcessorOf(*block, fetched);
    if (!proc) {
      if (proc.error().code != errc::kProtocol) {
        return proc.error();  // the service failed, not the block
      }
      view.skipped.push_back("ResourceBlock " + link + ": " + proc.error().message);
      return Ok{};
    }
    gpuProc = std::move(*proc);
  }
  if (gpuProc) {
    entry.gpuBlock = true;
    entry.gpu = gpuInfoOf(options_.chassis, *block, *gpuProc);
  } else if (!block->isCompute()) {
    return Ok{};  // memory, storage or network blocks are not ours
  } else {
    view.computeHosts = true;
  }
  entry.systemLinks.insert(block->systems.begin(), block->systems.end());
  const std::string id = block->id;
  view.blockLinkToId[link] = id;
  view.blockLinkToId[block->odataId] = id;
  entry.block = std::move(*block);
  if (!view.blocks.emplace(id, std::move(entry)).second) {
    return makeError(errc::kProtocol, "two ResourceBlocks share the Id " + id);
  }
  return Ok{};
}

// Attachment from both sides: a block names its systems, a system names its blocks. Systems a
// block names that the Systems collection did not list are read too.
Result<Ok> RedfishDriver::readAttachments(View& view, const Fetched& fetched) {
  for (auto& [id, block] : view.blocks) {
    for (const auto& sysLink : block.systemLinks) {
      if (!view.systems.count(sysLink)) {
        if (auto r = loadSystem(view, sysLink, fetched); !r) {
          return r.error();
        }
      }
    }
  }
  for (const auto& [sysLink, sys] : view.systems) {
    for (const auto& blockLink : sys.system.resourceBlocks) {
      const auto it = view.blockLinkToId.find(blockLink);
      if (it != view.blockLinkToId.end()) {
        view.blocks[it->second].systemLinks.insert(sysLink);
      }
    }
  }
  return Ok{};
}

// Each GPU block's system and host: the system's Id, or with Compute blocks the compute block
// composed into the same system.
Result<Ok> RedfishDriver::assignGpuHosts(View& view) {
  for (auto& [id, block] : view.blocks) {
    if (!block.gpuBlock) {
      continue;
    }
    if (block.systemLinks.size() > 1) {
      return makeError(errc::kProtocol, "ResourceBlock " + id + " is composed into " +
                                            std::to_string(block.systemLinks.size()) +
                                            " systems; shared GPU blocks are not supported");
    }
    if (block.systemLinks.empty()) {
      continue;
    }
    const std::string& sysLink = *block.systemLinks.begin();
    block.systemLink = sysLink;
    block.gpu.hostPort = hostOfSystem(view, sysLink);
  }
  return Ok{};
}

// The host a GPU composed into system `sysLink` (one of view.systems) belongs to.
std::string RedfishDriver::hostOfSystem(const View& view, const std::string& sysLink) {
  if (view.computeHosts) {
    // The host is the compute block composed into the same system.
    for (const auto& [otherId, other] : view.blocks) {
      if (!other.gpuBlock && other.systemLinks.count(sysLink)) {
        return otherId;
      }
    }
  }
  return view.systems.at(sysLink).system.id;
}

}  // namespace kc::fabric
