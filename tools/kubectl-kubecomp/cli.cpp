#include "tools/kubectl-kubecomp/cli.hpp"

#include <CLI/CLI.hpp>
#include <ostream>

#include "libcore/cli/flags.hpp"
#include "libcore/kube/resource.hpp"
#include "tools/kubectl-kubecomp/commands.hpp"

namespace kc::kubectl {

namespace {

struct Flags {
  ConnectionOptions conn;
  std::string ns;
  bool allNamespaces = false;
  std::string output;
  std::string requestTimeout = "30s";
  MovesOptions moves;
  std::string watchTimeout = "0";
  QuarantineOptions gpu;
  std::string rtNode;
  std::string shell;
  std::vector<std::string> completeArgs;
};

struct Commands {
  CLI::App* pools;
  CLI::App* moves;
  CLI::App* pending;
  CLI::App* gpuQuarantine;
  CLI::App* gpuRelease;
  CLI::App* vnis;
  CLI::App* rt;
  CLI::App* bridgeJobs;
  CLI::App* claims;
  CLI::App* completion;
  CLI::App* complete;
};

CLI::App* command(CLI::App& parent, const std::string& name, const std::string& what) {
  CLI::App* sub = parent.add_subcommand(name, what);
  sub->fallthrough();  // the shared flags may come after the command, as with kubectl
  sub->footer(
      "Shared flags (before or after the command): --kubeconfig, --context, -n/--namespace,\n"
      "-A/--all-namespaces, -o/--output table|wide|json|yaml, --request-timeout; see\n"
      "`kubectl kubecomp --help`.");
  return sub;
}

void addSharedFlags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.conn.kubeconfig, cli::kKubeconfigHelp);
  app.add_option("--context", f.conn.context,
                 "the kubeconfig context to use (default: its current-context)");
  app.add_option("-n,--namespace", f.ns, "the namespace (default: the context's namespace)");
  app.add_flag("-A,--all-namespaces", f.allNamespaces, "every namespace");
  app.add_option("-o,--output", f.output, "output format: table (default), wide, json or yaml");
  app.add_option("--request-timeout", f.requestTimeout,
                 "how long one API request may take (15s, 1m, ...)")
      ->capture_default_str();
}

Commands addCommands(CLI::App& app, Flags& f) {
  Commands c{};
  c.pools =
      command(app, "pools", "GPUs of every pool: node, pod, health, quarantine, move in flight");
  c.moves = command(app, "moves", "the GPU move journal: phases and how long they took");
  c.moves->add_option("--pool", f.moves.pool, "only this GPUPool");
  c.moves->add_flag("-w,--watch", f.moves.watch, "then print each phase change as it happens");
  c.moves
      ->add_option("--watch-timeout", f.watchTimeout,
                   "stop watching after this long (0: when interrupted)")
      ->capture_default_str();
  c.moves->add_option("--max-changes", f.moves.maxChanges,
                      "stop watching after this many phase changes (0: no limit)");
  c.pending =
      command(app, "pending", "unbound pods waiting for GPUs, RT cores, a VNI or a claim, and why");
  CLI::App* gpu = command(app, "gpu", "keep a GPU out of use, or release it");
  gpu->require_subcommand(1);
  for (bool q : {true, false}) {
    CLI::App* sub =
        command(*gpu, q ? "quarantine" : "release",
                q ? "quarantine a GPU: reconfig-mgr shows it Unhealthy and moves it no more"
                  : "release a quarantined GPU");
    sub->add_option("ID", f.gpu.gpu, "the pool GPU id (e.g. c0.06)")->required();
    sub->add_option("--pool", f.gpu.pool, "its GPUPool (default: the only pool that lists it)");
    sub->add_option("--reason", f.gpu.reason, "why, recorded with the quarantine and in an Event")
        ->required();
    (q ? c.gpuQuarantine : c.gpuRelease) = sub;
  }
  c.vnis = command(app, "vnis", "VNI objects and their owners");
  c.rt = command(app, "rt", "one node's RT cores, reservations and bound");
  c.rt->add_option("NODE", f.rtNode, "the node")->required();
  c.bridgeJobs = command(app, "bridgejobs", "BridgeJobs and their remote state");
  c.claims = command(app, "claims", "ResourceClaims allocated by the gpu.kubecomp.io DRA driver");
  c.completion = command(app, "completion", "print a shell completion script");
  c.completion->add_option("SHELL", f.shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  c.complete = app.add_subcommand("__complete", "");
  c.complete->group("");  // hidden: the completion protocol
  c.complete->allow_extras();
  c.complete->prefix_command();
  return c;
}

int usage(Runtime& rt, const std::string& message) {
  rt.err << "error: " << message << "\n";
  return cli::kExitUsage;
}

int dispatch(const Commands& c, Flags& f, CommandContext& ctx) {
  if (c.pools->parsed()) {
    return poolsCommand(ctx);
  }
  if (c.moves->parsed()) {
    return movesCommand(ctx, f.moves);
  }
  if (c.pending->parsed()) {
    return pendingCommand(ctx);
  }
  if (c.gpuQuarantine->parsed() || c.gpuRelease->parsed()) {
    f.gpu.quarantine = c.gpuQuarantine->parsed();
    return gpuCommand(ctx, f.gpu);
  }
  if (c.vnis->parsed()) {
    return vnisCommand(ctx);
  }
  if (c.rt->parsed()) {
    return rtCommand(ctx, f.rtNode);
  }
  if (c.bridgeJobs->parsed()) {
    return bridgeJobsCommand(ctx);
  }
  return claimsCommand(ctx);
}

}  // namespace

int run(int argc, const char* const* argv, Runtime& rt) {
  CLI::App app{
      "kubectl kubecomp: what the KubeComp suite is doing (GPU pools and moves, pods "
      "waiting, VNIs, RT cores, bridge jobs, DRA claims). Installed as kubectl-kubecomp "
      "on PATH, it runs as `kubectl kubecomp ...`.",
      "kubectl-kubecomp"};
  Flags f;
  addSharedFlags(app, f);
  cli::addVersionFlag(app, "kubectl-kubecomp");
  const Commands c = addCommands(app, f);
  app.require_subcommand(1);
  if (argc >= 2 && std::string_view(argv[1]) == "__complete") {
    std::vector<std::string> words(argv + 2, argv + argc);
    rt.out << completeWords(words);
    return 0;
  }
  if (auto exit = cli::parse(app, argc, argv, rt.out, rt.err)) {
    return *exit;
  }
  if (c.completion->parsed()) {
    rt.out << completionScript(f.shell);
    return 0;
  }
  auto format = parseOutputFormat(f.output);
  if (!format) {
    return usage(rt, format.error().message);
  }
  auto timeout = cli::parseDuration(f.requestTimeout);
  auto watchTimeout = cli::parseDuration(f.watchTimeout);
  if (!timeout || !watchTimeout) {
    return usage(rt, (!timeout ? timeout : watchTimeout).error().message);
  }
  if (!f.ns.empty() && !kube::isValidPathSegment(f.ns)) {
    return usage(rt, "invalid namespace \"" + f.ns + "\"");
  }
  if (!f.ns.empty() && f.allNamespaces) {
    return usage(rt, "--namespace and --all-namespaces exclude each other");
  }
  f.moves.watchTimeout = *watchTimeout;
  f.conn.requestTimeout = timeout->count() > 0 ? *timeout : std::chrono::milliseconds(30'000);
  auto cluster = rt.connect(f.conn, rt.env);
  if (!cluster) {
    rt.err << "error: " << cluster.error().message << "\n";
    return cli::kExitFailure;
  }
  CommandContext ctx{
      **cluster,
      rt.out,
      rt.err,
      rt.now,
      *format,
      f.allNamespaces ? std::string() : (f.ns.empty() ? (*cluster)->defaultNamespace() : f.ns),
      f.allNamespaces};
  return dispatch(c, f, ctx);
}

}  // namespace kc::kubectl
