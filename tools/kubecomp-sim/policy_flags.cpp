#include "tools/kubecomp-sim/policy_flags.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

namespace kc::sim {
namespace {

// --policy: each part of the preset not given by its own flag. Error "not_found" for an
// unknown preset.
Status applyPreset(const CLI::App& app, PolicyFlags& f) {
  if (f.preset.empty()) {
    return okStatus();
  }
  auto preset = alloc::findPolicyPreset(f.preset);
  if (!preset) {
    return preset.error();
  }
  auto set = [&](const char* flag, std::string& field, std::string_view value) {
    if (app.count(flag) == 0) {
      field = std::string(value);
    }
  };
  set("--node-policy", f.nodePolicy, preset->nodePolicy);
  set("--gpu-policy", f.gpuPolicy, preset->gpuPolicy);
  set("--queue", f.queue, preset->queuePolicy);
  set("--recompose", f.recompose, preset->recomposePolicy);
  set("--offer", f.offer, preset->offerPolicy);
  set("--idle-return", f.idleReturn, preset->returnPolicy);
  if (app.count("--idle-timeout-s") == 0) {
    f.idleTimeoutS = static_cast<double>(preset->idleTimeoutMs) / kMsPerSecond;
  }
  return okStatus();
}

}  // namespace

std::string policyList() {
  std::string s;
  auto list = [&s](const char* title, const auto& table) {
    s += title;
    for (const auto& p : table) {
      s += "  " + std::string(p.name) + "  " + std::string(p.description) + "\n";
    }
  };
  list("node policies:\n", alloc::nodePolicies());
  list("GPU policies:\n", alloc::gpuPolicies());
  list("queue policies:\n", alloc::queuePolicies());
  list("recomposition policies:\n", alloc::recomposePolicies());
  list("baseline node policies (a cluster without KubeComp):\n", alloc::baselineNodePolicies());
  list("baseline GPU policies:\n", alloc::baselineGpuPolicies());
  list("device offers (--offer):\n", alloc::offerPolicies());
  list("idle returns (--idle-return):\n", alloc::returnPolicies());
  list("presets (--policy):\n", alloc::policyPresets());
  return s;
}

CLI::Validator uint64Check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        // from_chars takes no sign for an unsigned type and reports overflow.
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc{} || ptr != end) {
          return "must be an integer in 0.." +
                 std::to_string(std::numeric_limits<std::uint64_t>::max()) + " (got " +
                 quoteInput(text) + ")";
        }
        return std::string();
      },
      "", "uint64");
}

void addPolicyFlags(CLI::App& app, PolicyFlags& f) {
  auto* be = "Behaviour";
  app.add_option("--mode", f.mode,
                 "composable (GPUs move on demand) or preconfigured (fixed attachment)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--node-policy", f.nodePolicy,
                 "node selection policy from the libcore/alloc registry (see --list-policies)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--gpu-policy", f.gpuPolicy,
                 "GPU candidate policy from the libcore/alloc registry (see --list-policies)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--policy-seed", f.policySeed,
                 "seed of the random GPU policy (0..18446744073709551615)")
      ->capture_default_str()
      ->check(uint64Check())
      ->group(be);
  app.add_option("--move-time-s", f.moveTimeS,
                 "seconds to move one GPU between nodes; default = midpoint of the measured "
                 "17-22 s; 0 allowed")
      ->capture_default_str()
      ->group(be);
  app.add_option("--moves-per-chassis", f.movesPerChassis,
                 "GPU moves in flight at once on one chassis (1..1024); a GPU's chassis is the "
                 "part of its id before the '.' (see --gpus-per-chassis)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--moves-per-pool", f.movesPerPool,
                 "GPU moves in flight at once in one pool (0 = no pool limit, 1..1000000); the "
                 "default 1 is the paper's serial fabric, whatever --moves-per-chassis says")
      ->capture_default_str()
      ->group(be);
  app.add_option(
         "--queue", f.queue,
         "queue policy: fcfs (the paper), backfill (greedy, beyond the paper), easy-backfill "
         "(beyond the paper: the head gets a reservation counting its GPU moves, later "
         "jobs start only if they do not delay it) or slack-backfill (beyond the paper: "
         "as easy-backfill, but the head may slip by up to its own run time); easy- and "
         "slack-backfill plan for every waiting job at each event and take at most 20,000 jobs")
      ->capture_default_str()
      ->group(be);
  app.add_option("--slack-factor", f.slackFactor,
                 "slack-backfill: the head may slip by up to this many of its own run times (a "
                 "bound fixed when it became the head; textbook relaxed backfill's slack factor; "
                 "0..1000, other queues must keep 1)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--recompose", f.recompose,
                 "idle-time recomposition: none (the paper: GPUs move only for a placement) or "
                 "idle-gather (beyond the paper: free GPUs move in the background, while the "
                 "fabric is idle, toward the waiting head's node or the recent arrivals' largest "
                 "request; composable mode)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--policy", f.preset,
                 "a named combination of policies (see --list-policies): stock-dra = Kubernetes "
                 "DRA + CoHDI without KubeComp; a part given by its own flag overrides it")
      ->group(be);
  app.add_option("--offer", f.offer,
                 "free GPUs a node is offered: pool (ours: any of its pool's) or "
                 "local-or-unattached (stock DRA: its own and the pool's unattached ones; needs "
                 "--idle-return idle-timeout and the fcfs or backfill queue)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--idle-return", f.idleReturn,
                 "an idle attached GPU: keep (ours: stays until moved) or idle-timeout (stock "
                 "CoHDI: detached back to the pool after --idle-timeout-s; composable mode)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--idle-timeout-s", f.idleTimeoutS,
                 "idle-timeout: seconds an attached GPU stays idle before it is returned "
                 "(CoHDI's DEVICE_NO_REMOVAL_DURATION default; 0..1e9)")
      ->capture_default_str()
      ->group(be);
  app.add_option("--return-time-s", f.returnTimeS,
                 "idle-timeout: seconds one idle return (a detach alone) holds its pool's fabric "
                 "(default: midpoint of the measured 5-8 s unassign; 0..1e6)")
      ->capture_default_str()
      ->group(be);
  app.add_flag("--list-policies", f.listPolicies, "print the registered policies and exit")
      ->group(be);
}

Result<SimConfig> buildPolicyConfig(const CLI::App& app, PolicyFlags& f) {
  if (!(f.moveTimeS >= 0 && f.moveTimeS <= 1e6)) {  // also false for NaN
    std::ostringstream m;
    m << "--move-time-s must be in 0..1e+06 (got " << f.moveTimeS << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  if (f.movesPerChassis < 1 || f.movesPerChassis > 1024) {
    return makeError(kc::errc::kInvalid, "--moves-per-chassis must be in 1..1024 (got " +
                                             std::to_string(f.movesPerChassis) + ")");
  }
  if (f.movesPerPool < 0 || f.movesPerPool > 1'000'000) {
    return makeError(kc::errc::kInvalid,
                     "--moves-per-pool must be in 0..1000000, 0 = no pool limit (got " +
                         std::to_string(f.movesPerPool) + ")");
  }
  if (!(f.returnTimeS >= 0 && f.returnTimeS <= 1e6)) {
    std::ostringstream m;
    m << "--return-time-s must be in 0..1e+06 (got " << f.returnTimeS << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  if (!(f.idleTimeoutS >= 0 && f.idleTimeoutS <= 1e9)) {
    std::ostringstream m;
    m << "--idle-timeout-s must be in 0..1e+09 (got " << f.idleTimeoutS << ")";
    return makeError(kc::errc::kInvalid, m.str());
  }
  if (auto s = applyPreset(app, f); !s) {
    return s.error();
  }
  SimConfig config = defaultSimConfig();
  auto np = alloc::findNodeOrBaselinePolicy(f.nodePolicy);
  if (!np) {
    return np.error();
  }
  auto gp = alloc::findGpuOrBaselinePolicy(f.gpuPolicy);
  if (!gp) {
    return gp.error();
  }
  config.nodePolicy = *np;
  config.gpuPolicy = *gp;
  config.seed = f.policySeed;
  if (f.mode == "composable") {
    config.mode = alloc::Composability::Composable;
  } else if (f.mode == "preconfigured") {
    config.mode = alloc::Composability::Preconfigured;
  } else {
    return makeError(kc::errc::kInvalid, "--mode must be 'composable' or 'preconfigured'");
  }
  auto qp = alloc::findQueuePolicy(f.queue);
  if (!qp) {
    return qp.error();
  }
  config.queue = qp->discipline;
  if (auto s = alloc::checkSlackFactor(f.slackFactor); !s) {
    return makeError(kc::errc::kInvalid, "--slack-factor: " + s.error().message);
  }
  if (f.slackFactor != alloc::kDefaultSlackFactor &&
      config.queue != QueueDiscipline::SlackBackfill) {
    return makeError(kc::errc::kInvalid, "--slack-factor applies to --queue slack-backfill only");
  }
  config.slackFactor = f.slackFactor;
  auto rp = alloc::findRecomposePolicy(f.recompose);
  if (!rp) {
    return rp.error();
  }
  config.recompose = rp->kind;
  config.moveTime = static_cast<SimMs>(std::llround(f.moveTimeS * kMsPerSecond));
  config.moves = alloc::MoveConcurrency{static_cast<std::uint32_t>(f.movesPerChassis),
                                        static_cast<std::uint32_t>(f.movesPerPool)};
  auto op = alloc::findOfferPolicy(f.offer);
  if (!op) {
    return op.error();
  }
  config.offer = op->offer;
  auto ir = alloc::findReturnPolicy(f.idleReturn);
  if (!ir) {
    return ir.error();
  }
  config.idleReturn = ir->kind;
  config.idleTimeout = static_cast<SimMs>(std::llround(f.idleTimeoutS * kMsPerSecond));
  config.returnTime = static_cast<SimMs>(std::llround(f.returnTimeS * kMsPerSecond));
  return config;
}

nlohmann::json policyConfigJson(const PolicyFlags& f, const SimConfig& config) {
  nlohmann::json j = {
      {"mode", f.mode},   {"node_policy", f.nodePolicy}, {"gpu_policy", f.gpuPolicy},
      {"queue", f.queue}, {"recompose", f.recompose},    {"move_time_s", f.moveTimeS}};
  if (f.slackFactor != alloc::kDefaultSlackFactor) {
    j["slack_factor"] = f.slackFactor;  // only when given: default outputs unchanged
  }
  if (!f.preset.empty()) {
    j["policy"] = f.preset;
  }
  if (config.moves != alloc::kSerialMoves || f.movesPerChassis != 1) {
    j["moves_per_chassis"] = f.movesPerChassis;  // the move schedule, only when not serial
    j["moves_per_pool"] = f.movesPerPool;
  }
  if (config.offer != alloc::DeviceOffer::Pool || config.idleReturn != alloc::ReturnKind::Keep) {
    j["offer"] = f.offer;  // the DRA-path settings, only when not ours
    j["idle_return"] = f.idleReturn;
    j["idle_timeout_s"] = f.idleTimeoutS;
    j["return_time_s"] = f.returnTimeS;
  }
  return j;
}

}  // namespace kc::sim
