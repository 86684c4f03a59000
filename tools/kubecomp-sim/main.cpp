// kubecomp-sim: trace-driven simulator of a composable GPU cluster. See docs/simulator.md.
#include "tools/kubecomp-sim/cli.hpp"

int main(int argc, char** argv) {
  return kc::sim::runCli(argc, argv);
}
