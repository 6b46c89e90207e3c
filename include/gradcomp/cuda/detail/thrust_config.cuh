// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Thrust configuration for gradcomp's CUDA backend. Compiled by nvcc, Thrust's device
//! system is CUDA; compiled by a host-only compiler (the CI tests of the backend's host path),
//! it defaults to Thrust's sequential CPP system so that no CUDA runtime header is needed.
#pragma once

#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#endif
