// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the layer profile CSV reader (gradcomp/schedule/profile_csv.hpp), the input
// of gradcomp-plan (libFuzzer entry point; also replayed over the committed corpus by
// replay_main.cpp in every test run). Property: the reader either throws
// gradcomp::schedule::profile_csv_error naming the input, or returns a non-empty profile that
// passes gradcomp::schedule::validate, that the writer accepts, and whose written form reads
// back to the same profile (names, element counts and backward seconds bit for bit) and is
// written again identically. Anything else (another exception, a crash, a sanitizer report) is
// a finding.
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/profile_csv.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

const std::string input_name = "fuzz-input";

//! The reader's result for `text`, or false in `accepted` when it throws profile_csv_error
//! (whose message must name the input).
std::vector<gradcomp::schedule::layer> read_input(std::string_view text, bool& accepted) {
  try {
    std::vector<gradcomp::schedule::layer> layers =
        gradcomp::schedule::parse_profile_csv(text, input_name);
    accepted = true;
    return layers;
  } catch (const gradcomp::schedule::profile_csv_error& e) {
    if (std::string(e.what()).rfind("profile '" + input_name + "'", 0) != 0) {
      std::abort(); // a rejection that does not say which input it is about
    }
    accepted = false;
    return {};
  }
}

//! True when the two profiles are identical, times compared bit for bit.
bool same_layers(const std::vector<gradcomp::schedule::layer>& a,
                 const std::vector<gradcomp::schedule::layer>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].numel != b[i].numel ||
        std::memcmp(&a[i].backward_seconds, &b[i].backward_seconds, sizeof(double)) != 0) {
      return false;
    }
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bool accepted = false;
  const std::vector<gradcomp::schedule::layer> layers = read_input(text, accepted);
  if (!accepted) {
    return 0; // the documented rejection
  }
  if (layers.empty()) {
    std::abort(); // an empty profile is documented as rejected
  }
  // accepted profiles are valid for the scheduler (throws, and so fails the run, otherwise)
  gradcomp::schedule::validate(gradcomp::schedule::layer_profile{layers, 0.0});

  // written again, the profile must read back exactly, and write the same text again
  const std::string written = gradcomp::schedule::to_profile_csv(layers); // throws if refused
  bool reaccepted = false;
  const std::vector<gradcomp::schedule::layer> reread = read_input(written, reaccepted);
  if (!reaccepted || !same_layers(reread, layers)) {
    std::abort(); // the writer's text is refused or reads back differently
  }
  if (gradcomp::schedule::to_profile_csv(reread) != written) {
    std::abort(); // the written form is not a fixed point
  }
  return 0;
}
