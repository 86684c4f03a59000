#include "services/reconfig-mgr/move_journal.hpp"

#include <array>
#include <utility>

#include "libcore/alloc/move_schedule.hpp"

namespace kc::reconfig {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<MovePhase, std::string_view>, 7> kPhases = {{
    {MovePhase::kDraining, "Draining"},
    {MovePhase::kDetaching, "Detaching"},
    {MovePhase::kAttaching, "Attaching"},
    {MovePhase::kVerifying, "Verifying"},
    {MovePhase::kRollingBack, "RollingBack"},
    {MovePhase::kSucceeded, "Succeeded"},
    {MovePhase::kFailed, "Failed"},
}};

Status readString(const json& j, const char* key, std::string& out, bool required) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) {
      return makeError(errc::kInvalid, std::string("move record: '") + key + "' is missing");
    }
    return okStatus();
  }
  if (!it->is_string()) {
    return makeError(errc::kInvalid, std::string("move record: '") + key + "' is not a string");
  }
  out = it->get<std::string>();
  return okStatus();
}

}  // namespace

std::string_view toString(MovePhase phase) {
  for (const auto& [p, name] : kPhases) {
    if (p == phase) {
      return name;
    }
  }
  return "Unknown";
}

std::optional<MovePhase> parseMovePhase(std::string_view text) {
  for (const auto& [p, name] : kPhases) {
    if (name == text) {
      return p;
    }
  }
  return std::nullopt;
}

bool finished(MovePhase phase) {
  return phase == MovePhase::kSucceeded || phase == MovePhase::kFailed;
}

std::string_view toString(MoveKind kind) {
  switch (kind) {
    case MoveKind::kBackground:
      return "Background";
    case MoveKind::kClaim:
      return "Claim";
    case MoveKind::kDemand:
      break;
  }
  return "Demand";
}

json toJson(const Move& m) {
  json j = {{"gpu", m.gpu},
            {"fromNode", m.fromNode},
            {"fromHost", m.fromHost},
            {"toNode", m.toNode},
            {"toHost", m.toHost},
            {"pod", m.podKey()},
            {"podUID", m.podUid},
            {"phase", std::string(toString(m.phase))},
            {"attempts", m.attempts},
            {"startedAt", m.startedAt},
            {"phaseSince", m.phaseSince},
            {"message", m.message}};
  if (m.staleWithdrawn) {
    j["staleWithdrawn"] = true;
  }
  if (m.background()) {
    j["kind"] = std::string(toString(m.kind));
    j["pod"] = "";
    j["reason"] = m.reason;
  }
  if (m.forClaim()) {
    j["kind"] = std::string(toString(m.kind));
    j["pod"] = "";
    j["claim"] = m.claimKey();
    j["claimUID"] = m.claimUid;
  }
  if (m.cancelled) {
    j["cancelled"] = true;
  }
  return j;
}

Result<Move> parseMove(const json& j) {
  if (!j.is_object()) {
    return makeError(errc::kInvalid, "move record is not an object");
  }
  Move m;
  std::string pod;
  std::string phase;
  std::string kind;
  std::string claim;
  for (const auto& [key, out, required] :
       std::initializer_list<std::tuple<const char*, std::string*, bool>>{
           {"gpu", &m.gpu, true},
           {"fromNode", &m.fromNode, false},
           {"fromHost", &m.fromHost, false},
           {"toNode", &m.toNode, true},
           {"toHost", &m.toHost, true},
           {"pod", &pod, true},
           {"podUID", &m.podUid, false},
           {"phase", &phase, true},
           {"startedAt", &m.startedAt, false},
           {"phaseSince", &m.phaseSince, false},
           {"message", &m.message, false},
           {"kind", &kind, false},
           {"reason", &m.reason, false},
           {"claim", &claim, false},
           {"claimUID", &m.claimUid, false}}) {
    if (auto s = readString(j, key, *out, required); !s) {
      return s.error();
    }
  }
  if (kind == "Background") {
    m.kind = MoveKind::kBackground;
  } else if (kind == "Claim") {
    m.kind = MoveKind::kClaim;
  } else if (!kind.empty() && kind != "Demand") {
    return makeError(errc::kInvalid, "move record: unknown kind '" + kind + "'");
  }
  if (m.forClaim()) {
    const auto slash = claim.find('/');
    if (!pod.empty() || !m.podUid.empty() || slash == std::string::npos || slash == 0 ||
        slash + 1 == claim.size()) {
      return makeError(errc::kInvalid,
                       "move record: a claim move names no pod and a namespace/name claim");
    }
    m.claimNamespace = claim.substr(0, slash);
    m.claimName = claim.substr(slash + 1);
  } else if (!claim.empty() || !m.claimUid.empty()) {
    return makeError(errc::kInvalid, "move record: only a claim move names a claim");
  } else if (m.background()) {
    if (!pod.empty() || !m.podUid.empty()) {
      return makeError(errc::kInvalid, "move record: a background move names no pod");
    }
  } else {
    const auto slash = pod.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == pod.size()) {
      return makeError(errc::kInvalid, "move record: 'pod' is not namespace/name");
    }
    m.podNamespace = pod.substr(0, slash);
    m.podName = pod.substr(slash + 1);
  }
  const auto p = parseMovePhase(phase);
  if (!p) {
    return makeError(errc::kInvalid, "move record: unknown phase '" + phase + "'");
  }
  m.phase = *p;
  if (m.gpu.empty() || m.toNode.empty() || m.toHost.empty()) {
    return makeError(errc::kInvalid, "move record: gpu, toNode and toHost must not be empty");
  }
  if (m.fromNode.empty() != m.fromHost.empty()) {
    return makeError(errc::kInvalid,
                     "move record: fromNode and fromHost must be both set or both empty");
  }
  if (const auto a = j.find("attempts"); a != j.end()) {
    if (!a->is_number_unsigned() && !(a->is_number_integer() && a->get<std::int64_t>() >= 0)) {
      return makeError(errc::kInvalid, "move record: 'attempts' is not a count");
    }
    m.attempts = static_cast<std::uint32_t>(a->get<std::int64_t>());
  }
  if (const auto s = j.find("staleWithdrawn"); s != j.end()) {
    if (!s->is_boolean()) {
      return makeError(errc::kInvalid, "move record: 'staleWithdrawn' is not a boolean");
    }
    m.staleWithdrawn = s->get<bool>();
  }
  if (const auto c = j.find("cancelled"); c != j.end()) {
    if (!c->is_boolean()) {
      return makeError(errc::kInvalid, "move record: 'cancelled' is not a boolean");
    }
    m.cancelled = c->get<bool>();
  }
  return m;
}

Move* ActiveMoves::find(const std::string& gpu) {
  for (Move& m : moves_) {
    if (m.gpu == gpu) {
      return &m;
    }
  }
  return nullptr;
}

const Move* ActiveMoves::find(const std::string& gpu) const {
  return const_cast<ActiveMoves*>(this)->find(gpu);
}

std::vector<std::string> ActiveMoves::chassis() const {
  std::vector<std::string> out;
  for (const Move& m : moves_) {
    out.emplace_back(alloc::chassisOfGpu(m.gpu));
  }
  return out;
}

std::optional<Move> ActiveMoves::take(const std::string& gpu) {
  for (auto it = moves_.begin(); it != moves_.end(); ++it) {
    if (it->gpu == gpu) {
      Move m = std::move(*it);
      moves_.erase(it);
      return m;
    }
  }
  return std::nullopt;
}

void Journal::retireActive() {
  if (active) {
    retire(active->gpu);
  }
}

void Journal::retire(const std::string& gpu) {
  auto m = active.take(gpu);
  if (!m) {
    return;
  }
  history.insert(history.begin(), std::move(*m));
  if (history.size() > kHistory) {
    history.resize(kHistory);
  }
}

json Journal::toJson() const {
  json out = json::array();
  for (const Move& m : active) {
    out.push_back(reconfig::toJson(m));
  }
  for (const Move& m : history) {
    out.push_back(reconfig::toJson(m));
  }
  return out;
}

ParsedJournal parseJournal(const json& pool) {
  ParsedJournal out;
  const auto status = pool.find("status");
  if (status == pool.end() || !status->is_object()) {
    return out;
  }
  const auto moves = status->find("moves");
  if (moves == status->end() || moves->is_null()) {
    return out;
  }
  if (!moves->is_array()) {
    out.problems.push_back("status.moves is not an array");
    return out;
  }
  for (std::size_t i = 0; i < moves->size(); ++i) {
    auto m = parseMove((*moves)[i]);
    if (!m) {
      out.problems.push_back("status.moves[" + std::to_string(i) + "]: " + m.error().message);
      continue;
    }
    if (m->active()) {
      if (out.journal.active.find(m->gpu) != nullptr) {
        out.problems.push_back("status.moves[" + std::to_string(i) +
                               "]: a second active move of GPU " + m->gpu + " ignored");
        continue;
      }
      out.journal.active.add(std::move(*m));
    } else if (out.journal.history.size() < Journal::kHistory) {
      out.journal.history.push_back(std::move(*m));
    }
  }
  return out;
}

}  // namespace kc::reconfig
