// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Fault injection of the MPI tests through MPI's profiling interface (fault_injection.cpp):
//! this executable's MPI_Isend and MPI_Iallgatherv replace the library's for every caller and
//! forward to PMPI. While `corrupt_sparse_sends` is set on a rank, a byte message (MPI_BYTE, at
//! least 36 bytes: a wire header and one value) it sends with tag `corrupting_tag`, or gathers
//! with MPI_Iallgatherv, leaves with its last fp32 value replaced by a NaN: corrupted after the
//! sender's own checks, as a fault on the wire would be.
#pragma once

namespace gradcomp::test {

//! Set on a rank to corrupt its byte messages (see the file).
extern bool corrupt_sparse_sends;
//! The point-to-point tag whose byte messages are corrupted.
inline constexpr int corrupting_tag = 31000;
//! Frees the corrupted copies (kept until then, as MPI may still read them).
void forget_corrupted_messages();

} // namespace gradcomp::test
