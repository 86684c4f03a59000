#pragma once
// The two kinds of error the Slurm codec's units return (slurm_codec.hpp): input the bridge
// was given ("invalid") and replies slurmrestd sent ("protocol"). Private to the codec.

#include <string>
#include <utility>

#include "libcore/base/result.hpp"

namespace kc::bridge::slurm::detail {

inline Error invalid(std::string message) {
  return makeError(errc::kInvalid, std::move(message));
}
inline Error protocol(std::string message) {
  return makeError(errc::kProtocol, "slurmrestd reply: " + std::move(message));
}

}  // namespace kc::bridge::slurm::detail
