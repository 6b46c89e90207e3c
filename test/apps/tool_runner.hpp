// SPDX-License-Identifier: Apache-2.0
// What the tests of the command-line tools share: a scratch directory per test that runs a
// tool's binary through /bin/sh with stdin from /dev/null and captures its stdout, stderr and
// exit status, plus whole-file reads and writes.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "../common/catch.hpp"

namespace gradcomp_tool_tests {

//! Quotes `s` for /bin/sh (single quotes; an embedded quote becomes '\'').
inline std::string shell_quote(const std::string& s) {
  std::string quoted = "'";
  for (const char c : s) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

//! The whole content of a file ("" if it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

//! Creates or replaces a file with `bytes`.
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  REQUIRE(out.good());
}

//! What one run of a tool did.
struct run_result {
  int status = -1; //!< exit status, or -1 if the process did not exit normally.
  std::string out; //!< everything it wrote on stdout.
  std::string err; //!< everything it wrote on stderr.
};

//! A fresh directory for one test, <working directory>/<name>/<pid>-<n>, removed with its
//! contents at the end of the test; runs a tool with stdout and stderr captured to files in it.
class scratch_dir {
public:
  explicit scratch_dir(const std::string& name) {
    static int counter = 0;
    root_ = std::filesystem::current_path() / name /
            (std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }

  //! Runs the binary `exe` with `args` (stdin from /dev/null) and captures its output.
  [[nodiscard]] run_result run_tool(const std::string& exe,
                                    const std::vector<std::string>& args) const {
    std::string command = shell_quote(exe);
    for (const std::string& a : args) {
      command += ' ' + shell_quote(a);
    }
    const std::filesystem::path out = root_ / "stdout.txt";
    const std::filesystem::path err = root_ / "stderr.txt";
    command += " < /dev/null > " + shell_quote(out.string()) + " 2> " + shell_quote(err.string());
    const int raw = std::system(command.c_str());
    run_result r;
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_bytes(out);
    r.err = read_bytes(err);
    return r;
  }

private:
  std::filesystem::path root_;
};

} // namespace gradcomp_tool_tests
