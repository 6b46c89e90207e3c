// SPDX-License-Identifier: Apache-2.0
// Catch2's main for the command-line tool tests (gradcomp_compress_tests, gradcomp_plan_tests).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
