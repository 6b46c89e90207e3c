// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Reading and writing layer profiles as CSV (`name,numel,backward_seconds`, one row per
//! layer in forward order), the input format of gradcomp-plan. The reader validates untrusted
//! text and refuses anything else with gradcomp::schedule::profile_csv_error.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <iterator>
#include <ostream>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace gradcomp::schedule {

//! @brief The text is not a profile CSV the reader accepts. what() is one line:
//! "profile '<source>' line <n>: <reason>" (or without the line for whole-file problems).
class profile_csv_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! The header line the reader expects and the writer writes.
inline constexpr std::string_view profile_csv_header = "name,numel,backward_seconds";

namespace detail {

//! `text` without leading and trailing spaces and tabs.
[[nodiscard]] inline std::string_view trim_blanks(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

//! The fields of a line split at every comma, each trimmed.
[[nodiscard]] inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trim_blanks(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) {
      return fields;
    }
    start = comma + 1;
  }
}

//! Why `name` cannot be a layer name in a profile CSV, or "" if it can: 1 to 200 printable
//! ASCII characters (space to '~') other than ',' and '"', not starting with '#' or a blank
//! and not ending with a blank (a row would not read back as the same name otherwise).
[[nodiscard]] inline std::string name_problem(std::string_view name) {
  if (name.empty()) {
    return "the layer name is empty";
  }
  if (name.size() > 200) {
    return gradcomp::detail::concat("the layer name is ", name.size(),
                                    " characters long (at most 200)");
  }
  if (name.front() == '#') {
    return "the layer name starts with '#' (a comment)";
  }
  if (name.front() == ' ' || name.back() == ' ') {
    return "the layer name starts or ends with a space";
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == ',' || c == '"') {
      return gradcomp::detail::concat("the layer name contains the byte 0x",
                                      "0123456789abcdef"[u >> 4], "0123456789abcdef"[u & 15],
                                      " (allowed: printable ASCII except ',' and '\"')");
    }
  }
  return "";
}

//! `text` cut to at most 40 characters, for an error message.
[[nodiscard]] inline std::string quoted_field(std::string_view text) {
  std::string s(text.substr(0, 40));
  for (char& c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) {
      c = '?';
    }
  }
  return "'" + s + (text.size() > 40 ? "...'" : "'");
}

} // namespace detail

//! @brief Parses a profile CSV held in `text`; `source` names it in error messages.
//!
//! Format (UTF-8/ASCII text, '\n' or "\r\n" line ends):
//! * blank lines and lines whose first non-blank character is '#' are ignored (comments);
//! * the first other line is the header, exactly `name,numel,backward_seconds` (blanks
//!   around the fields allowed);
//! * every further line is one layer in forward order: a name (see below), an integer numel
//!   in [1, 2^40] (digits only), and backward seconds, a finite decimal number >= 0 as
//!   std::from_chars reads it ("0.0012", "1.2e-3"; no sign, no "inf"/"nan"), at most 1e6;
//!   blanks around the fields are ignored;
//! * names: 1 to 200 printable ASCII characters other than ',' and '"', not starting with
//!   '#', unique within the profile;
//! * at least one layer.
//! O(size of the text + L log L). Deterministic.
//! @throws profile_csv_error with a one-line reason otherwise (missing or extra columns, a
//! negative or malformed number, an empty profile, ...).
[[nodiscard]] inline std::vector<layer> parse_profile_csv(std::string_view text,
                                                          std::string_view source) {
  const auto fail = [&](std::size_t line, const std::string& reason) {
    if (line == 0) {
      return profile_csv_error(gradcomp::detail::concat("profile '", source, "': ", reason));
    }
    return profile_csv_error(
        gradcomp::detail::concat("profile '", source, "' line ", line, ": ", reason));
  };
  std::vector<layer> layers;
  std::set<std::string, std::less<>> names;
  bool have_header = false;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t stop = text.find('\n', start);
    if (stop == std::string_view::npos) {
      stop = text.size();
    }
    std::string_view line = text.substr(start, stop - start);
    start = stop + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    const std::string_view content = detail::trim_blanks(line);
    if (content.empty() || content.front() == '#') {
      continue;
    }
    const std::vector<std::string_view> fields = detail::split_fields(content);
    if (!have_header) {
      static constexpr std::string_view expected[] = {"name", "numel", "backward_seconds"};
      for (std::size_t c = 0; c < 3; ++c) {
        if (c >= fields.size()) {
          throw fail(line_number,
                     gradcomp::detail::concat("missing column '", expected[c], "' in the header (",
                                              "expected '", profile_csv_header, "')"));
        }
        if (fields[c] != expected[c]) {
          throw fail(line_number, gradcomp::detail::concat(
                                      "header column ", c + 1, " is ",
                                      detail::quoted_field(fields[c]), ", expected '", expected[c],
                                      "' (the header must be '", profile_csv_header, "')"));
        }
      }
      if (fields.size() > 3) {
        throw fail(line_number,
                   gradcomp::detail::concat("the header has ", fields.size(),
                                            " columns, expected '", profile_csv_header, "'"));
      }
      have_header = true;
      continue;
    }
    if (fields.size() != 3) {
      throw fail(line_number, gradcomp::detail::concat(
                                  fields.size() < 3 ? "missing columns: " : "too many columns: ",
                                  fields.size(), " fields, expected 3 (", profile_csv_header, ")"));
    }
    layer l;
    if (const std::string problem = detail::name_problem(fields[0]); !problem.empty()) {
      throw fail(line_number, problem);
    }
    l.name = std::string(fields[0]);
    if (names.count(fields[0]) > 0) {
      throw fail(line_number,
                 gradcomp::detail::concat("layer name ", detail::quoted_field(fields[0]),
                                          " appears twice (names must be unique)"));
    }

    const std::string_view numel = fields[1];
    if (!numel.empty() && numel.front() == '-') {
      throw fail(line_number,
                 gradcomp::detail::concat("numel ", detail::quoted_field(numel), " is negative"));
    }
    const auto [numel_end, numel_ec] =
        std::from_chars(numel.data(), numel.data() + numel.size(), l.numel);
    if (numel_ec == std::errc::result_out_of_range) {
      throw fail(line_number, gradcomp::detail::concat("numel ", detail::quoted_field(numel),
                                                       " is out of range (at most 2^40)"));
    }
    if (numel.empty() || numel_ec != std::errc{} || numel_end != numel.data() + numel.size()) {
      throw fail(line_number, gradcomp::detail::concat("numel ", detail::quoted_field(numel),
                                                       " is not an integer (digits only)"));
    }
    if (l.numel < 1 || l.numel > max_layer_elements) {
      throw fail(line_number, gradcomp::detail::concat("numel ", l.numel, " is outside [1, 2^40]"));
    }

    const std::string_view seconds = fields[2];
    if (!seconds.empty() && seconds.front() == '-') {
      throw fail(line_number,
                 gradcomp::detail::concat("backward_seconds ", detail::quoted_field(seconds),
                                          " is negative"));
    }
    const auto [seconds_end, seconds_ec] =
        std::from_chars(seconds.data(), seconds.data() + seconds.size(), l.backward_seconds);
    if (seconds.empty() || seconds_ec != std::errc{} ||
        seconds_end != seconds.data() + seconds.size() || !std::isfinite(l.backward_seconds)) {
      throw fail(line_number,
                 gradcomp::detail::concat("backward_seconds ", detail::quoted_field(seconds),
                                          " is not a finite decimal number"));
    }
    if (l.backward_seconds > max_layer_seconds) {
      throw fail(line_number,
                 gradcomp::detail::concat("backward_seconds ", detail::quoted_field(seconds),
                                          " is above the limit of 1e6 s"));
    }
    names.insert(l.name);
    layers.push_back(std::move(l));
  }
  if (!have_header) {
    throw fail(
        0, gradcomp::detail::concat("empty profile: no header line '", profile_csv_header, "'"));
  }
  if (layers.empty()) {
    throw fail(0, "empty profile: the header is not followed by any layer");
  }
  return layers;
}

//! @brief Reads a whole profile CSV from `in` (see parse_profile_csv()).
//! @throws profile_csv_error as parse_profile_csv(), or if the stream fails while reading.
[[nodiscard]] inline std::vector<layer> read_profile_csv(std::istream& in,
                                                         std::string_view source) {
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) {
    throw profile_csv_error(gradcomp::detail::concat("profile '", source, "': read error"));
  }
  return parse_profile_csv(text, source);
}

//! @brief The profile CSV of `layers`: the header, then one row per layer with numel in
//! decimal and backward_seconds in the shortest form that reads back to the same double
//! (std::to_chars). parse_profile_csv() of the result gives `layers` back exactly.
//! O(total length).
//! @throws std::invalid_argument if a layer could not be read back (its name, numel or time
//! breaks the rules of parse_profile_csv(), or two names are equal), or there is no layer.
[[nodiscard]] inline std::string to_profile_csv(std::span<const layer> layers) {
  gradcomp::detail::require(!layers.empty(), "to_profile_csv: no layers");
  std::string text(profile_csv_header);
  text += '\n';
  std::set<std::string_view> names;
  for (const layer& l : layers) {
    const std::string problem = detail::name_problem(l.name);
    gradcomp::detail::require(problem.empty(), "to_profile_csv: ", problem);
    gradcomp::detail::require(names.insert(l.name).second, "to_profile_csv: layer name '", l.name,
                              "' appears twice");
    gradcomp::detail::require(l.numel >= 1 && l.numel <= max_layer_elements,
                              "to_profile_csv: numel ", l.numel, " is outside [1, 2^40]");
    gradcomp::detail::require(
        !std::signbit(l.backward_seconds) && l.backward_seconds <= max_layer_seconds,
        "to_profile_csv: backward_seconds ", l.backward_seconds, " s is outside [+0, 1e6]");
    char buffer[64];
    text += l.name;
    text += ',';
    text += std::to_string(l.numel);
    text += ',';
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, l.backward_seconds);
    text.append(buffer, end);
    text += '\n';
  }
  return text;
}

} // namespace gradcomp::schedule
