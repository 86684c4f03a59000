#pragma once
// A Backend that forwards every call to one the test keeps (and inspects afterwards): what the
// runner tests hand the runner's backend factory.

#include <optional>
#include <string>

#include "services/bridge-pod/backend.hpp"

namespace kc::bridge::pod::testing {

class BackendProxy final : public Backend {
 public:
  explicit BackendProxy(Backend& b) : b_(b) {}
  const char* name() const override { return b_.name(); }
  std::uint64_t stagingLimit() const override { return b_.stagingLimit(); }
  kc::Status prepare() override { return b_.prepare(); }
  kc::Result<std::optional<std::string>> findTagged(const JobContext& c) override {
    return b_.findTagged(c);
  }
  kc::Result<std::string> submit(const JobContext& c) override { return b_.submit(c); }
  kc::Result<Query> query(const std::string& id) override { return b_.query(id); }
  kc::Result<bool> cancel(const std::string& id) override { return b_.cancel(id); }
  kc::Result<std::string> fetchOutput(const JobContext& c, const std::string& id,
                                      const std::string& f) override {
    return b_.fetchOutput(c, id, f);
  }
  std::optional<CredentialAlert> credentialAlert() override { return b_.credentialAlert(); }

 private:
  Backend& b_;
};

}  // namespace kc::bridge::pod::testing
