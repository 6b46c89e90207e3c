// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of the state_load fuzz target into the directory given as the only
// argument: the states of the target's object after 0 to 5 compressions (and with a changed
// density), each twice, as it is (first byte 0: loaded as a whole container) and as a bare
// payload (first byte 1: the target wraps it with a valid checksum). Run once by hand; the output
// is committed under test/fuzz/corpus/state_load.
#include <gradcomp/gradcomp.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_state_corpus DIR\n");
    return 2;
  }
  using compressor = gradcomp::size_switch<gradcomp::sampled_threshold, gradcomp::reused_threshold>;
  gradcomp::error_feedback<compressor> object(
      8,
      compressor(4, gradcomp::sampled_threshold({.density = 0.5, .seed = 3}),
                 gradcomp::reused_threshold({.density = 0.25, .interval = 3})),
      gradcomp::momentum_correction{0.5});
  gradcomp::sparse_message out;
  int written = 0;
  for (int step = 0; step <= 5; ++step) {
    if (step == 4) {
      object.compressor().set_density(0.5);
    }
    const std::vector<std::byte> bytes = gradcomp::save_state(object);
    for (const int mode : {0, 1}) {
      const std::string path = std::string(argv[1]) + "/state-" + std::to_string(step) +
                               (mode == 0 ? "-container" : "-payload");
      std::ofstream f(path, std::ios::binary);
      const char first = static_cast<char>(mode);
      f.write(&first, 1);
      // the payload sits between the container's head and its 8-byte checksum
      const std::size_t begin = mode == 0 ? 0 : gradcomp::detail::state_head_bytes;
      const std::size_t end = mode == 0 ? bytes.size() : bytes.size() - 8;
      f.write(reinterpret_cast<const char*>(bytes.data() + begin),
              static_cast<std::streamsize>(end - begin));
      ++written;
    }
    const std::vector<float> gradient = {1.0f * static_cast<float>(step), -2, 3, -4, 5, -6, 7, -8};
    object.compress(gradient, out);
  }
  std::printf("wrote %d seeds\n", written);
  return 0;
}
