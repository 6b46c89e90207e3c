// SPDX-License-Identifier: Apache-2.0
// A fake header for the layering check's negative test (scripts/check-layering.py --root
// test/layering/bad): tensor/ is a low layer, mpi/ a high one, so this include is against the
// order and the check must reject it.
#pragma once

#include <gradcomp/mpi/y.hpp>
