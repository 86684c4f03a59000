#pragma once
// The value of the rt.kubecomp.io/shim-reservation container annotation
// ("<runtime us>/<period us>/<cpus>"): written at CreateContainer, read back by the rebuild
// after a restart.

#include <optional>
#include <string>

#include "libcore/alloc/rt_pod.hpp"

namespace kc::rtshim {

std::string formatReservation(const alloc::RtReservation& r);
// nullopt when the text is not three numbers or not a valid reservation.
std::optional<alloc::RtReservation> parseReservation(const std::string& s);

}  // namespace kc::rtshim
