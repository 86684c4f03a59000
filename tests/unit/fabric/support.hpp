#pragma once
// Helpers shared by the fabric tests.

#include "tests/support/temp_dir.hpp"

namespace kc::fabric::test {

using TempDir = kc::testing::TempDir;

}  // namespace kc::fabric::test
