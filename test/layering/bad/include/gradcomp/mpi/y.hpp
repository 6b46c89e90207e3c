// SPDX-License-Identifier: Apache-2.0
// A fake header for the layering check's negative test: the target of tensor/x.hpp's include.
#pragma once
