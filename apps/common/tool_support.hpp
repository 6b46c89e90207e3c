// SPDX-License-Identifier: Apache-2.0
// What the command-line tools (gradcomp-compress, gradcomp-plan) share: their error types and
// exit codes, string concatenation, the single stderr error line, strict number parsing, and
// main()'s mapping of exceptions to exit codes. Header-only and free of CLI11, so that the
// npy_input fuzz target can include npy_input.hpp (which uses cat) without it.
#pragma once

#include <charconv>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace gradcomp_tools {

//! printf-style formatting into a std::string (GCC 12 has no std::format); any length.
inline std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text(length > 0 ? static_cast<std::size_t>(length) : 0, '\0');
  std::vsnprintf(text.data(), text.size() + 1, fmt, again);
  va_end(again);
  return text;
}

inline constexpr int exit_bad_input = 2; //!< bad command line or input: nothing was written.
inline constexpr int exit_failure = 1;   //!< the outputs could not be written (or out of memory).

//! A bad command line or input: reported on stderr, exit code 2, nothing written.
class usage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! The outputs could not be written: reported on stderr, exit code 1.
class output_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! Concatenates the streamable arguments into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  out.precision(9);
  (out << ... << args);
  return out.str();
}

//! Writes `message` to stderr as `program`'s single error line (line breaks become "; ").
inline void report_error(std::string_view program, std::string_view message) {
  std::string line(message);
  std::size_t pos = 0;
  while ((pos = line.find_first_of("\r\n", pos)) != std::string::npos) {
    line.replace(pos, 1, "; ");
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == ';')) {
    line.pop_back();
  }
  std::cerr << program << ": error: " << line << '\n';
}

//! Parses all of `text` as a decimal number of type T (an optional leading '+' is allowed).
//! @throws usage_error naming `option` if the text is not exactly one number of type T.
template <class T>
T parse_number(std::string_view option, std::string_view text, std::string_view expected) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits.front() == '+' && digits[1] != '-') {
    digits.remove_prefix(1);
  }
  T value{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    throw usage_error(
        cat(option, ": value '", text, "' is out of range (expected ", expected, ")"));
  }
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
    throw usage_error(cat(option, ": value '", text, "' is not ", expected));
  }
  return value;
}

//! @brief A tool's main(): parses the command line with `app` (a CLI::App; ParseError is
//! CLI::ParseError), then returns `body()`'s exit status. --help prints the usage on stdout and
//! exits 0; any error is reported as one stderr line with exit code 2 for a bad command line or
//! input (ParseError, usage_error, std::invalid_argument from the library's argument checks)
//! and 1 otherwise (output_error, out of memory, anything else).
template <class ParseError, class App, class Body>
int tool_main(std::string_view program, App& app, int argc, char** argv, Body&& body) {
  try {
    app.parse(argc, argv);
  } catch (const ParseError& e) {
    if (e.get_exit_code() == 0) {
      return app.exit(e); // --help: the usage on stdout, exit 0
    }
    report_error(program, e.what());
    return exit_bad_input;
  }
  try {
    return body();
  } catch (const usage_error& e) {
    report_error(program, e.what());
    return exit_bad_input;
  } catch (const std::invalid_argument& e) { // the library's argument checks
    report_error(program, e.what());
    return exit_bad_input;
  } catch (const output_error& e) {
    report_error(program, e.what());
    return exit_failure;
  } catch (const std::bad_alloc&) {
    report_error(program, "out of memory");
    return exit_failure;
  } catch (const std::exception& e) {
    report_error(program, e.what());
    return exit_failure;
  }
}

} // namespace gradcomp_tools
