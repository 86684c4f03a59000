#pragma once
// What a daemon's --kubeconfig flag means, in one place: the cluster config it names (or the
// default one) and the API client built on it, with errors that say which of the two failed.
//
//   auto client = kc::kube::setUpClient(kubeconfig, options);
//   if (!client) { spdlog::critical("{}", client.error().message); return 2; }

#include <memory>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/config.hpp"

namespace kc::kube {

// `kubeconfig` is the --kubeconfig flag. Empty: loadDefaultConfig(env) (in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG / ~/.kube/config); else that one file,
// whatever the environment. Then KubeClient::create(config, options).
// Errors keep the failed step's code, with the message "<configStep>: <why>" or
// "API client: <why>".
kc::Result<std::unique_ptr<KubeClient>> setUpClient(const std::string& kubeconfig,
                                                    KubeClientOptions options = {},
                                                    const EnvLookup& env = processEnv(),
                                                    std::string_view configStep = "cluster config");

}  // namespace kc::kube
