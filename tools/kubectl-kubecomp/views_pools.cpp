// pools, moves and the phase changes moves --watch prints: all from GPUPool status.

#include <map>

#include "libcore/api/gpupool.hpp"
#include "tools/kubectl-kubecomp/view_util.hpp"
#include "tools/kubectl-kubecomp/views.hpp"

namespace kc::kubectl {

using detail::str;
using nlohmann::json;

namespace {

// One record of status.moves (docs/reconfig.md "The safe move and its journal"), read leniently.
struct MoveRecord {
  std::string gpu, fromNode, fromHost, toNode, toHost, pod, claim, kind, phase, startedAt,
      phaseSince, message, reason;
  std::int64_t attempts = 0;
  bool cancelled = false;

  bool active() const { return phase != "Succeeded" && phase != "Failed"; }
  std::string requester() const {
    if (kind == "Background") {
      return "(background)";
    }
    return kind == "Claim" ? "claim " + claim : pod;
  }
  std::string from() const {
    return !fromNode.empty() ? fromNode : !fromHost.empty() ? fromHost : "(unattached)";
  }
  std::string to() const { return !toNode.empty() ? toNode : toHost; }
};

MoveRecord readMove(const json& j) {
  MoveRecord m;
  m.gpu = str(j, {"gpu"});
  m.fromNode = str(j, {"fromNode"});
  m.fromHost = str(j, {"fromHost"});
  m.toNode = str(j, {"toNode"});
  m.toHost = str(j, {"toHost"});
  m.pod = str(j, {"pod"});
  m.claim = str(j, {"claim"});
  m.kind = str(j, {"kind"});
  if (m.kind.empty()) {
    m.kind = "Demand";
  }
  m.phase = str(j, {"phase"});
  m.startedAt = str(j, {"startedAt"});
  m.phaseSince = str(j, {"phaseSince"});
  m.message = str(j, {"message"});
  m.reason = str(j, {"reason"});
  if (j.is_object() && j.contains("attempts") && j["attempts"].is_number_integer()) {
    m.attempts = j["attempts"].get<std::int64_t>();
  }
  m.cancelled = j.is_object() && j.value("cancelled", false) == true;
  return m;
}

std::vector<MoveRecord> journalOf(const json& pool) {
  std::vector<MoveRecord> out;
  const json& moves = detail::at(pool, {"status", "moves"});
  if (moves.is_array()) {
    for (const json& m : moves) {
      if (m.is_object()) {
        out.push_back(readMove(m));
      }
    }
  }
  return out;
}

std::map<std::string, std::string> quarantineOf(const json& pool) {
  std::map<std::string, std::string> out;
  const json& q = detail::at(pool, {"status", "quarantine"});
  if (q.is_array()) {
    for (const json& e : q) {
      if (!str(e, {"gpu"}).empty()) {
        out[str(e, {"gpu"})] = e.value("reason", std::string());
      }
    }
  }
  return out;
}

}  // namespace

View poolsView(const Objects& pools) {
  View v;
  v.kind = "PoolGPUList";
  v.emptyMessage = "No GPU pools found.";
  v.table.columns = {{"POOL"},          {"GPU"},        {"MODEL"},      {"NODE"},
                     {"POD"},           {"HEALTH"},     {"QUARANTINE"}, {"MOVE"},
                     {"CHASSIS", true}, {"HOST", true}, {"UUID", true}, {"DETAIL", true}};
  for (const json& pool : pools) {
    const std::string name = str(pool, {"metadata", "name"});
    const auto gpus = api::parsePoolGpus(pool);
    const auto quarantine = quarantineOf(pool);
    std::map<std::string, MoveRecord> inFlight;
    for (const MoveRecord& m : journalOf(pool)) {
      if (m.active() && !inFlight.contains(m.gpu)) {
        inFlight.emplace(m.gpu, m);
      }
    }
    for (const api::PoolGpu& g : gpus.gpus) {
      std::string health = g.healthy ? "Healthy" : "Unhealthy";
      if (g.draining) {
        health += ",Draining";
      }
      const auto q = quarantine.find(g.id);
      const auto m = inFlight.find(g.id);
      std::string move;
      json moveJson = nullptr;
      if (m != inFlight.end()) {
        move = m->second.phase + " to " + m->second.to() + " for " + m->second.requester();
        moveJson = {{"phase", m->second.phase},
                    {"toNode", m->second.toNode},
                    {"for", m->second.requester()},
                    {"startedAt", m->second.startedAt},
                    {"phaseSince", m->second.phaseSince}};
      }
      const std::string pods = detail::joined(g.inUseBy);
      v.table.rows.push_back({name, g.id, g.model, g.node, pods, health,
                              q != quarantine.end() ? q->second : "", move, g.chassis, g.hostPort,
                              g.uuid, g.healthDetail});
      v.items.push_back({{"pool", name},
                         {"gpu", g.id},
                         {"model", g.model},
                         {"chassis", g.chassis},
                         {"node", g.node},
                         {"hostPort", g.hostPort},
                         {"uuid", g.uuid},
                         {"inUseBy", g.inUseBy},
                         {"healthy", g.healthy},
                         {"healthDetail", g.healthDetail},
                         {"draining", g.draining},
                         {"quarantined", q != quarantine.end()},
                         {"quarantineReason", q != quarantine.end() ? q->second : ""},
                         {"move", moveJson}});
    }
  }
  return v;
}

View movesView(const Objects& pools, const std::string& pool, TimePoint now) {
  View v;
  v.kind = "MoveList";
  v.emptyMessage =
      pool.empty() ? "No GPU moves found." : "No GPU moves found in pool " + pool + ".";
  v.table.columns = {{"POOL"},       {"GPU"},           {"FOR"},          {"FROM"},     {"TO"},
                     {"PHASE"},      {"IN-PHASE"},      {"TOTAL"},        {"ATTEMPTS"}, {"AGE"},
                     {"KIND", true}, {"STARTED", true}, {"MESSAGE", true}};
  for (const json& p : pools) {
    const std::string name = str(p, {"metadata", "name"});
    if (!pool.empty() && name != pool) {
      continue;
    }
    for (const MoveRecord& m : journalOf(p)) {
      // In flight: time in the current phase and since the start, up to now. Finished: the
      // record's phaseSince is when it finished.
      const auto started = detail::time(m.startedAt);
      const auto since = detail::time(m.phaseSince);
      std::optional<std::int64_t> inPhase;
      std::optional<std::int64_t> total;
      if (m.active()) {
        if (since) {
          inPhase = std::chrono::duration_cast<std::chrono::seconds>(now - *since).count();
        }
        if (started) {
          total = std::chrono::duration_cast<std::chrono::seconds>(now - *started).count();
        }
      } else {
        total = detail::secondsBetween(m.startedAt, m.phaseSince);
      }
      const auto fmt = [](const std::optional<std::int64_t>& s) {
        return s ? humanDuration(std::chrono::seconds(*s)) : std::string();
      };
      std::string phase = m.phase + (m.cancelled ? " (cancelled)" : "");
      v.table.rows.push_back({name, m.gpu, m.requester(), m.from(), m.to(), phase, fmt(inPhase),
                              fmt(total), std::to_string(m.attempts), detail::age(m.startedAt, now),
                              m.kind, m.startedAt, m.message});
      v.items.push_back({{"pool", name},
                         {"gpu", m.gpu},
                         {"kind", m.kind},
                         {"for", m.requester()},
                         {"fromNode", m.fromNode},
                         {"fromHost", m.fromHost},
                         {"toNode", m.toNode},
                         {"toHost", m.toHost},
                         {"phase", m.phase},
                         {"active", m.active()},
                         {"cancelled", m.cancelled},
                         {"attempts", m.attempts},
                         {"startedAt", m.startedAt},
                         {"phaseSince", m.phaseSince},
                         {"secondsInPhase", detail::orNull(inPhase)},
                         {"totalSeconds", detail::orNull(total)},
                         {"reason", m.reason},
                         {"message", m.message}});
    }
  }
  return v;
}

json PhaseChange::toJson() const {
  return {{"type", "PhaseChange"},
          {"pool", pool},
          {"gpu", gpu},
          {"for", requester},
          {"toNode", toNode},
          {"fromPhase", fromPhase},
          {"toPhase", toPhase},
          {"fromPhaseSeconds", detail::orNull(fromPhaseSeconds)},
          {"message", message},
          {"record", record}};
}

std::string PhaseChange::line() const {
  std::string out = pool + "  " + gpu + "  " + requester + " -> " + toNode + "  ";
  if (fromPhase.empty()) {
    out += "started in " + toPhase;
  } else {
    out += fromPhase + " -> " + toPhase;
    if (fromPhaseSeconds) {
      out += " (" + fromPhase + " took " + humanDuration(std::chrono::seconds(*fromPhaseSeconds)) +
             ")";
    }
  }
  if (!message.empty()) {
    out += ": " + message;
  }
  return out;
}

std::vector<PhaseChange> phaseChanges(const json& pool, std::map<MoveKey, SeenMove>& seen,
                                      bool report) {
  std::vector<PhaseChange> out;
  const std::string name = str(pool, {"metadata", "name"});
  const json& records = detail::at(pool, {"status", "moves"});
  for (const MoveRecord& m : journalOf(pool)) {
    MoveKey key{name, m.gpu, m.startedAt};
    auto it = seen.find(key);
    if (it != seen.end() && it->second.phase == m.phase) {
      continue;
    }
    if (report) {
      PhaseChange c;
      c.pool = name;
      c.gpu = m.gpu;
      c.requester = m.requester();
      c.toNode = m.to();
      c.toPhase = m.phase + (m.cancelled ? " (cancelled)" : "");
      c.message = m.message;
      if (it != seen.end()) {
        c.fromPhase = it->second.phase;
        c.fromPhaseSeconds = detail::secondsBetween(it->second.phaseSince, m.phaseSince);
      }
      for (const json& r : records) {
        if (str(r, {"gpu"}) == m.gpu && str(r, {"startedAt"}) == m.startedAt) {
          c.record = r;
          break;
        }
      }
      out.push_back(std::move(c));
    }
    seen[key] = SeenMove{m.phase, m.phaseSince};
  }
  return out;
}

}  // namespace kc::kubectl
