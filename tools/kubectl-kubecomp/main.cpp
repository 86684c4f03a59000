// kubectl-kubecomp: the kubectl plugin of the KubeComp suite (docs/kubectl-plugin.md).

#include <iostream>

#include "tools/kubectl-kubecomp/cli.hpp"

int main(int argc, char** argv) {
  kc::kubectl::Runtime rt{std::cout, std::cerr, kc::kube::processEnv(), kc::kubectl::connect,
                          [] { return std::chrono::system_clock::now(); }};
  return kc::kubectl::run(argc, argv, rt);
}
