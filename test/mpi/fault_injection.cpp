// SPDX-License-Identifier: Apache-2.0
// Fault injection of the MPI tests: see fault_injection.hpp.
#include "fault_injection.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gradcomp::test {

bool corrupt_sparse_sends = false;

namespace {
std::vector<std::vector<std::byte>> corrupted_messages; // kept until forget_corrupted_messages()

const void* corrupted(const void* buf, int count) {
  const auto* bytes = static_cast<const std::byte*>(buf);
  auto& copy = corrupted_messages.emplace_back(bytes, bytes + count);
  const std::uint32_t nan = 0x7fc00000u;
  std::memcpy(copy.data() + copy.size() - 4, &nan, 4);
  return copy.data();
}
} // namespace

void forget_corrupted_messages() {
  corrupted_messages.clear();
}

} // namespace gradcomp::test

extern "C" int MPI_Isend(const void* buf,
                         int count,
                         MPI_Datatype datatype,
                         int dest,
                         int tag,
                         MPI_Comm comm,
                         MPI_Request* request) {
  using namespace gradcomp::test;
  if (corrupt_sparse_sends && datatype == MPI_BYTE && tag == corrupting_tag && count >= 36) {
    buf = corrupted(buf, count);
  }
  return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

extern "C" int MPI_Iallgatherv(const void* sendbuf,
                               int sendcount,
                               MPI_Datatype sendtype,
                               void* recvbuf,
                               const int recvcounts[],
                               const int displs[],
                               MPI_Datatype recvtype,
                               MPI_Comm comm,
                               MPI_Request* request) {
  using namespace gradcomp::test;
  if (corrupt_sparse_sends && sendtype == MPI_BYTE && sendcount >= 36) {
    sendbuf = corrupted(sendbuf, sendcount);
  }
  return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                          request);
}
