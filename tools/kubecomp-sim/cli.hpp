#pragma once
// The kubecomp-sim command line (flags documented in --help and docs/simulator.md).

namespace kc::sim {

// Parses flags, builds the cluster and the trace, simulates, writes outputs. Returns the
// process exit code: 0 success, 1 bad input (message on stderr), 2 bad flags.
int runCli(int argc, char** argv);

}  // namespace kc::sim
