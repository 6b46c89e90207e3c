// SPDX-License-Identifier: Apache-2.0
// gradcomp-plan's timeline picture: one simulated iteration (gradcomp::schedule::simulate) as
// an SVG with three lanes against time: compute (the forward pass, then each layer's backward),
// compression and communication (one bar per group). Groups alternate between two colours so
// that their boundaries show; every bar has a tooltip with its layer(s) and times.
#pragma once

#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/simulate.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>

namespace gradcomp_tools {

namespace detail {

//! `text` with the five XML special characters escaped.
inline std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

//! A tick step of 1, 2 or 5 times a power of ten giving about `ticks` ticks over `span`.
inline double tick_step(double span, int ticks) {
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) {
      return m * power;
    }
  }
  return 10.0 * power;
}

} // namespace detail

//! @brief The SVG picture of `t` (a simulation of `profile`), titled `title`. Times in ms.
inline std::string timeline_svg(const gradcomp::schedule::layer_profile& profile,
                                const gradcomp::schedule::timeline& t,
                                std::string_view title) {
  constexpr double width = 1200.0;
  constexpr double left = 110.0;
  constexpr double right = 20.0;
  constexpr double top = 50.0;
  constexpr double lane = 44.0;
  constexpr double gap = 14.0;
  constexpr double bar = lane - 8.0;
  const double t_end = t.t_iter_seconds > 0.0 ? t.t_iter_seconds : 1.0;
  const double scale = (width - left - right) / t_end;
  const double height = top + 3 * lane + 2 * gap + 50.0;
  const auto x = [&](double seconds) { return left + seconds * scale; };
  const char* colours[2][3] = {{"#4e79a7", "#f28e2b", "#59a14f"},
                               {"#a0cbe8", "#ffbe7d", "#8cd17d"}};

  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"22\" font-size=\"14\">" << detail::xml_escape(title)
      << "</text>\n";
  const char* lane_names[3] = {"compute", "compression", "communication"};
  for (int l = 0; l < 3; ++l) {
    const double y = top + l * (lane + gap);
    svg << "<text x=\"8\" y=\"" << y + lane / 2 + 4 << "\">" << lane_names[l] << "</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << width - left - right
        << "\" height=\"" << lane << "\" fill=\"#f4f4f4\"/>\n";
  }
  const auto box = [&](int lane_index, double start, double end, const char* fill,
                       const std::string& tip) {
    const double y = top + lane_index * (lane + gap) + (lane - bar) / 2;
    svg << "<rect x=\"" << x(start) << "\" y=\"" << y << "\" width=\""
        << std::max(0.0, (end - start) * scale) << "\" height=\"" << bar << "\" fill=\"" << fill
        << "\" stroke=\"white\" stroke-width=\"0.3\"><title>" << detail::xml_escape(tip)
        << "</title></rect>\n";
  };
  const auto ms = [](double seconds) {
    std::ostringstream s;
    s.precision(6);
    s << seconds * 1e3;
    return s.str();
  };
  box(0, 0.0, profile.forward_seconds, "#bab0ac",
      "forward 0 - " + ms(profile.forward_seconds) + " ms");
  for (std::size_t i = 0; i < t.layers.size(); ++i) {
    const gradcomp::schedule::layer_times& l = t.layers[i];
    box(0, l.backward_start_seconds, l.backward_end_seconds, colours[l.group % 2][0],
        profile.layers[i].name + ": backward " + ms(l.backward_start_seconds) + " - " +
            ms(l.backward_end_seconds) + " ms (group " + std::to_string(l.group + 1) + ")");
  }
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const gradcomp::schedule::group_times& group = t.groups[g];
    const std::size_t n = profile.size();
    const std::string names =
        profile.layers[gradcomp::schedule::forward_index(group.layers.begin, n)].name +
        (group.layers.size() > 1
             ? " .. " +
                   profile.layers[gradcomp::schedule::forward_index(group.layers.end - 1, n)].name
             : std::string());
    const std::string what = "group " + std::to_string(g + 1) + " (" +
                             std::to_string(group.layers.size()) + " layers: " + names + ", " +
                             std::to_string(group.message_bytes) + " bytes)";
    box(1, group.compress_start_seconds, group.compress_end_seconds, colours[g % 2][1],
        what + ": compression " + ms(group.compress_start_seconds) + " - " +
            ms(group.compress_end_seconds) + " ms");
    box(2, group.communicate_start_seconds, group.communicate_end_seconds, colours[g % 2][2],
        what + ": message " + ms(group.communicate_start_seconds) + " - " +
            ms(group.communicate_end_seconds) + " ms");
  }
  const double axis = top + 3 * lane + 2 * gap + 6;
  const double step = detail::tick_step(t_end, 10);
  for (double tick = 0.0; tick <= t_end * (1 + 1e-9); tick += step) {
    svg << "<line x1=\"" << x(tick) << "\" y1=\"" << axis << "\" x2=\"" << x(tick) << "\" y2=\""
        << axis + 5 << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << x(tick) << "\" y=\"" << axis + 18 << "\" text-anchor=\"middle\">"
        << ms(tick) << "</text>\n";
  }
  svg << "<text x=\"" << width - right << "\" y=\"" << axis + 36
      << "\" text-anchor=\"end\">time (ms); t_iter = " << ms(t.t_iter_seconds)
      << " ms</text>\n</svg>\n";
  return svg.str();
}

} // namespace gradcomp_tools
