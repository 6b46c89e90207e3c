// SPDX-License-Identifier: Apache-2.0
// Catch2's runner (v2 or v3: test/common/catch.hpp).
#define CATCH_CONFIG_RUNNER
#include "common/catch.hpp"

int main(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}
