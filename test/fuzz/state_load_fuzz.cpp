// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the checkpoint loader (gradcomp::load_state, gradcomp/checkpoint/
// state_stream.hpp) on an error_feedback whose compressor keeps state of both kinds
// (size_switch of sampled_threshold, with its RNG, and reused_threshold, with its interval
// position), with momentum correction. The first input byte picks the mode: even, the rest of
// the input is loaded as it is (the container's checks); odd, the rest is the payload, wrapped in
// a container with a valid checksum (so the fuzzer reaches the field readers). Property: the
// load either throws gradcomp::state_error and leaves the object's state unchanged, or succeeds
// and the object then saves a state that loads into a fresh object and saves identically, and
// compresses a gradient without error. Anything else is a finding. Also replayed over the
// committed corpus (replay_main.cpp) in every test run.
#include <gradcomp/gradcomp.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

namespace {

using compressor = gradcomp::size_switch<gradcomp::sampled_threshold, gradcomp::reused_threshold>;
using feedback = gradcomp::error_feedback<compressor>;

//! The object every input is loaded into, as the seed corpus was written
//! (make_state_corpus.cpp builds the same).
feedback make_object() {
  return feedback(8,
                  compressor(4, gradcomp::sampled_threshold({.density = 0.5, .seed = 3}),
                             gradcomp::reused_threshold({.density = 0.25, .interval = 3})),
                  gradcomp::momentum_correction{0.5});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const auto rest = std::as_bytes(std::span<const std::uint8_t>(data + 1, size - 1));
  const std::vector<std::byte> input = (data[0] & 1u) != 0
                                           ? gradcomp::detail::state_container(rest)
                                           : std::vector<std::byte>(rest.begin(), rest.end());
  feedback object = make_object();
  const std::vector<std::byte> before = gradcomp::save_state(object);
  try {
    gradcomp::load_state(object, input);
  } catch (const gradcomp::state_error&) {
    if (gradcomp::save_state(object) != before) {
      std::abort(); // a failed load changed the object
    }
    return 0;
  }
  const std::vector<std::byte> saved = gradcomp::save_state(object);
  feedback again = make_object();
  gradcomp::load_state(again, saved); // must not throw: the object's own state
  if (gradcomp::save_state(again) != saved) {
    std::abort();
  }
  const std::vector<float> gradient = {1, -2, 3, -4, 5, -6, 7, -8};
  gradcomp::sparse_message out;
  object.compress(gradient, out);
  return 0;
}
