// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the sparse-message wire decoder (libFuzzer entry point; also replayed over the
// committed corpus by replay_main.cpp in every test run). Property: decode either throws
// gradcomp::wire_error, or returns a message that satisfies every invariant and re-encodes to
// exactly the input bytes.
#include <gradcomp/sparse/wire.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  gradcomp::sparse_message message;
  try {
    gradcomp::decode(bytes, message);
  } catch (const gradcomp::wire_error&) {
    return 0; // the documented rejection
  }
  message.validate(); // throws (and so fails the run) if the decoder let a bad message through
  const auto encoding = static_cast<gradcomp::index_encoding>(data[7]);
  const std::vector<std::byte> again = gradcomp::encode(message, encoding);
  if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) {
    std::abort(); // decoded, but does not re-encode to the same bytes
  }
  return 0;
}
