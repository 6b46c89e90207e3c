// SPDX-License-Identifier: Apache-2.0
// gradcomp-plan: reads a layer profile (CSV: name,numel,backward_seconds, rows in forward
// order) and predicts the iteration time of every merge strategy of gradcomp::schedule under
// the alpha-beta model given on the command line, printing each strategy's groups (layer
// names in backward order) and t_iter, as text or as one JSON object; optionally draws the
// timeline of one strategy as an SVG. Usage: docs/planner.md.
#include <gradcomp/schedule.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../common/tool_support.hpp"
#include "timeline_svg.hpp"

namespace {

namespace fs = std::filesystem;
namespace gs = gradcomp::schedule;

constexpr std::string_view program_name = "gradcomp-plan";
using gradcomp_tools::cat; // concatenates the streamable arguments into one string
using gradcomp_tools::output_error;
using gradcomp_tools::parse_number;
using gradcomp_tools::usage_error;

// ---- strict number parsing -----------------------------------------------------------------

//! A finite number >= 0 (at most `limit`). @throws usage_error otherwise.
double parse_nonnegative(std::string_view option, std::string_view text, double limit = 1e300) {
  const double v = parse_number<double>(option, text, "a number >= 0");
  if (!std::isfinite(v)) {
    throw usage_error(cat(option, ": value '", text, "' is not a finite number"));
  }
  if (v < 0.0 || std::signbit(v)) {
    throw usage_error(cat(option, ": ", text, " is negative"));
  }
  if (v > limit) {
    throw usage_error(cat(option, ": ", text, " is above the limit ", limit));
  }
  return v;
}

// ---- the command line ----------------------------------------------------------------------

struct raw_options {
  std::string profile;
  std::string forward_seconds;
  std::string alpha;
  std::string beta;
  std::string density;
  std::string compress_cost;
  std::string after_backward;
  bool on_compute_stream = false;
  std::string bucket_bytes;
  bool json = false;
  std::string svg;
  std::string svg_strategy;
};

struct settings {
  std::string profile_path;
  double forward_seconds = 0.0;
  double alpha = 0.0;
  double beta = 0.0;
  std::optional<double> density;
  std::optional<gs::affine_cost> compression;
  std::optional<gs::affine_cost> after_backward;
  gs::compression_placement placement = gs::compression_placement::off_compute_stream;
  std::uint64_t bucket_bytes = gs::ddp_bucket_bytes;
  bool json = false;
  std::string svg_path;
  gs::strategy svg_strategy = gs::strategy::optimal;
};

std::string strategy_list() {
  std::string list;
  for (const gs::strategy s : gs::all_strategies) {
    list += list.empty() ? "" : ", ";
    list += gs::name(s);
  }
  return list;
}

void declare_options(CLI::App& app, raw_options& raw) {
  app.add_option("--profile", raw.profile,
                 "Layer profile CSV: header name,numel,backward_seconds, one row per layer in "
                 "forward order ('#' lines are comments)")
      ->required()
      ->type_name("FILE");
  app.add_option("--forward-seconds", raw.forward_seconds,
                 "Forward time t_f in seconds: backward starts at t_f")
      ->required()
      ->type_name("F");
  app.add_option("--alpha", raw.alpha, "Seconds per message (startup) of the transport")
      ->required()
      ->type_name("A");
  app.add_option("--beta", raw.beta, "Seconds per byte of the transport")
      ->required()
      ->type_name("B");
  app.add_option("--density", raw.density,
                 "Sparse messages: 8 * ceil(D * numel) bytes per group, D in (0, 1] (default: "
                 "dense fp32, 4 * numel bytes)")
      ->type_name("D");
  app.add_option("--compress-cost", raw.compress_cost,
                 "Compression of a group takes a + b * numel seconds (default: no compression)")
      ->type_name("a,b");
  app.add_option("--after-backward", raw.after_backward,
                 "Messages after the end of backward take a + b * bytes seconds (cores free of "
                 "backward's load); one that straddles it the rest of its fraction at that rate "
                 "(default: alpha + beta * bytes throughout)")
      ->type_name("a,b");
  app.add_flag("--compression-on-compute-stream", raw.on_compute_stream,
               "Compression runs on the compute stream (S1: the next layer's backward waits for "
               "it); default: one compression at a time on its own stream");
  app.add_option("--bucket-bytes", raw.bucket_bytes,
                 "size_threshold's bucket cap in fp32 gradient bytes (default 26214400 = 25 MiB)")
      ->type_name("N");
  app.add_flag("--json", raw.json,
               "Print one JSON object {\"strategies\": {NAME: {\"groups\": [[names...], ...], "
               "\"t_iter\": seconds}}} instead of text");
  app.add_option("--timeline-svg", raw.svg,
                 "Also write the simulated timeline of one strategy as an SVG picture")
      ->type_name("FILE");
  app.add_option("--timeline-strategy", raw.svg_strategy,
                 "Strategy drawn by --timeline-svg (default optimal): " + strategy_list())
      ->type_name("NAME");
  app.footer("Strategies: " + strategy_list() +
             ". Exit status: 0 on success, 2 for a bad command line or profile (one line on "
             "stderr), 1 if the SVG could not be written.");
}

//! Two numbers "a,b", each finite and >= 0 (seconds, then `per_unit`). @throws usage_error.
gs::affine_cost parse_affine(std::string_view option, std::string_view text, const char* per_unit) {
  const std::size_t comma = text.find(',');
  if (comma == std::string_view::npos) {
    throw usage_error(
        cat(option, ": '", text, "' is not two numbers a,b (seconds, ", per_unit, ")"));
  }
  return gs::affine_cost{parse_nonnegative(option, text.substr(0, comma)),
                         parse_nonnegative(option, text.substr(comma + 1))};
}

settings make_settings(const raw_options& raw, const CLI::App& app) {
  settings s;
  s.profile_path = raw.profile;
  s.forward_seconds =
      parse_nonnegative("--forward-seconds", raw.forward_seconds, gs::max_layer_seconds);
  s.alpha = parse_nonnegative("--alpha", raw.alpha);
  s.beta = parse_nonnegative("--beta", raw.beta);
  if (app.count("--density") > 0) {
    const double d = parse_number<double>("--density", raw.density, "a number in (0, 1]");
    if (!(d > 0.0 && d <= 1.0)) {
      throw usage_error(cat("--density: ", raw.density, " is outside (0, 1]"));
    }
    s.density = d;
  }
  if (app.count("--compress-cost") > 0) {
    s.compression = parse_affine("--compress-cost", raw.compress_cost, "seconds per element");
  }
  if (app.count("--after-backward") > 0) {
    s.after_backward = parse_affine("--after-backward", raw.after_backward, "seconds per byte");
  }
  if (raw.on_compute_stream) {
    s.placement = gs::compression_placement::on_compute_stream;
  }
  if (app.count("--bucket-bytes") > 0) {
    const auto bytes =
        parse_number<std::int64_t>("--bucket-bytes", raw.bucket_bytes, "an integer >= 1");
    if (bytes < 1) {
      throw usage_error(cat("--bucket-bytes: ", bytes, " is below the minimum 1"));
    }
    s.bucket_bytes = static_cast<std::uint64_t>(bytes);
  }
  s.json = raw.json;
  s.svg_path = raw.svg;
  if (app.count("--timeline-svg") > 0 && raw.svg.empty()) {
    throw usage_error("--timeline-svg: the file name is empty");
  }
  if (app.count("--timeline-strategy") > 0) {
    if (raw.svg.empty()) {
      throw usage_error("--timeline-strategy needs --timeline-svg");
    }
    const std::optional<gs::strategy> which = gs::strategy_from_name(raw.svg_strategy);
    if (!which) {
      throw usage_error(cat("--timeline-strategy: unknown strategy '", raw.svg_strategy,
                            "' (expected one of ", strategy_list(), ")"));
    }
    s.svg_strategy = *which;
  }
  return s;
}

// ---- input ---------------------------------------------------------------------------------

gs::layer_profile load_profile(const settings& s) {
  const std::string& path = s.profile_path;
  if (path.empty()) {
    throw usage_error("--profile: the file name is empty");
  }
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw usage_error(cat("cannot read profile '", path,
                          "': " + (ec ? ec.message() : std::string("no such file"))));
  }
  if (fs::is_directory(status)) {
    throw usage_error(cat("profile '", path, "' is a directory, not a CSV file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw usage_error(cat("cannot open profile '", path, "' for reading"));
  }
  try {
    return {gs::read_profile_csv(in, path), s.forward_seconds};
  } catch (const gs::profile_csv_error& e) {
    throw usage_error(e.what());
  }
}

// ---- output --------------------------------------------------------------------------------

struct strategy_result {
  gs::strategy which;
  gs::grouping groups;
  double t_iter_seconds = 0.0;
};

//! The names of the layers of `g`, group by group, in backward order.
std::vector<std::vector<std::string>> group_names(const gs::layer_profile& profile,
                                                  const gs::grouping& g) {
  std::vector<std::vector<std::string>> names;
  names.reserve(g.size());
  for (const gs::layer_group& group : g) {
    std::vector<std::string>& list = names.emplace_back();
    for (std::size_t p = group.begin; p < group.end; ++p) {
      list.push_back(profile.layers[gs::forward_index(p, profile.size())].name);
    }
  }
  return names;
}

std::string describe_model(const settings& s, const gs::layer_profile& profile) {
  std::uint64_t numel = 0;
  double backward = 0.0;
  for (const gs::layer& l : profile.layers) {
    numel += l.numel;
    backward += l.backward_seconds;
  }
  std::ostringstream d;
  d.precision(6);
  d << "profile " << s.profile_path << ": " << profile.size() << " layers, " << numel
    << " elements, backward " << backward << " s, forward " << s.forward_seconds << " s\n"
    << "model: message = " << s.alpha << " s + " << s.beta << " s/B x bytes, "
    << (s.after_backward ? cat("after backward ", s.after_backward->fixed_seconds, " s + ",
                               s.after_backward->seconds_per_unit, " s/B x bytes, ")
                         : std::string())
    << (s.density ? cat("sparse (index, value) pairs at density ", *s.density,
                        ": 8 x ceil(D x numel) bytes")
                  : std::string("dense fp32: 4 x numel bytes"))
    << "; compression "
    << (s.compression ? cat(s.compression->fixed_seconds, " s + ", s.compression->seconds_per_unit,
                            " s x numel, ",
                            s.placement == gs::compression_placement::on_compute_stream
                                ? "on the compute stream"
                                : "on its own stream")
                      : std::string("none"))
    << "; size_threshold bucket " << s.bucket_bytes << " bytes\n";
  return d.str();
}

void print_text(const settings& s,
                const gs::layer_profile& profile,
                const std::vector<strategy_result>& results) {
  std::cout << describe_model(s, profile);
  const double best = results.back().t_iter_seconds; // optimal comes last
  for (const strategy_result& r : results) {
    std::cout << '\n'
              << gs::name(r.which) << ": t_iter " << std::setprecision(9) << r.t_iter_seconds
              << " s, " << r.groups.size() << (r.groups.size() == 1 ? " group" : " groups")
              << " (backward order)\n";
    const auto names = group_names(profile, r.groups);
    for (std::size_t g = 0; g < names.size(); ++g) {
      std::cout << "  " << g + 1 << ':';
      for (const std::string& n : names[g]) {
        std::cout << ' ' << n;
      }
      std::cout << '\n';
    }
  }
  std::cout << "\nsummary (t_iter in seconds; vs optimal)\n";
  for (const strategy_result& r : results) {
    std::cout << "  " << std::left << std::setw(15) << gs::name(r.which) << std::right
              << std::setw(14) << std::setprecision(6) << r.t_iter_seconds << "  " << std::fixed
              << std::setprecision(2) << std::setw(7)
              << (best > 0 ? (r.t_iter_seconds / best - 1.0) * 100.0 : 0.0) << " %  "
              << std::defaultfloat << r.groups.size()
              << (r.groups.size() == 1 ? " group\n" : " groups\n");
  }
}

void print_json(const gs::layer_profile& profile, const std::vector<strategy_result>& results) {
  nlohmann::ordered_json strategies = nlohmann::ordered_json::object();
  for (const strategy_result& r : results) {
    nlohmann::ordered_json entry;
    entry["groups"] = group_names(profile, r.groups);
    entry["t_iter"] = r.t_iter_seconds;
    strategies[std::string(gs::name(r.which))] = std::move(entry);
  }
  nlohmann::ordered_json out;
  out["strategies"] = std::move(strategies);
  std::cout << out.dump() << '\n';
}

void write_svg(const settings& s,
               const gs::layer_profile& profile,
               const gs::cost_model& model,
               const strategy_result& r) {
  const gs::timeline t = gs::simulate(profile, model, r.groups);
  const std::string title =
      cat(fs::path(s.profile_path).filename().string(), ": ", gs::name(r.which), ", ",
          r.groups.size(), " groups, t_iter ", t.t_iter_seconds * 1e3, " ms (alpha ", s.alpha * 1e6,
          " us, beta ", s.beta, " s/B", s.density ? cat(", density ", *s.density) : std::string(),
          s.compression ? cat(", compression ", s.compression->fixed_seconds * 1e6, " us + ",
                              s.compression->seconds_per_unit, " s/element ",
                              s.placement == gs::compression_placement::on_compute_stream
                                  ? "on the compute stream"
                                  : "off the compute stream")
                        : std::string(),
          ")");
  const std::string svg = gradcomp_tools::timeline_svg(profile, t, title);
  std::ofstream out(s.svg_path, std::ios::binary | std::ios::trunc);
  if (out) {
    out.write(svg.data(), static_cast<std::streamsize>(svg.size()));
    out.close();
  }
  if (!out) {
    std::error_code ignored;
    fs::remove(s.svg_path, ignored);
    throw output_error(cat("cannot write the timeline '", s.svg_path, "'"));
  }
}

int run(const settings& s) {
  const gs::layer_profile profile = load_profile(s);
  gs::cost_model model =
      gs::cost_model::affine(s.alpha, s.beta, s.compression, s.density, s.placement);
  if (s.after_backward) {
    model.communication_seconds_after_backward = *s.after_backward;
  }
  std::vector<strategy_result> results;
  for (const gs::strategy which : gs::all_strategies) {
    strategy_result r{which, gs::plan(which, profile, model, {.bucket_bytes = s.bucket_bytes})};
    r.t_iter_seconds = gs::t_iter_seconds(profile, model, r.groups);
    results.push_back(std::move(r));
  }
  if (!s.svg_path.empty()) {
    if (fs::is_directory(s.svg_path)) {
      throw usage_error(cat("--timeline-svg: '", s.svg_path, "' is a directory"));
    }
    for (const strategy_result& r : results) {
      if (r.which == s.svg_strategy) {
        write_svg(s, profile, model, r);
      }
    }
  }
  if (s.json) {
    print_json(profile, results);
  } else {
    print_text(s, profile, results);
  }
  std::cout.flush();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app("Predicts the iteration time of every gradient merge strategy of gradcomp for a "
               "layer profile (S1 eqs. 2-7) and prints each strategy's groups.",
               std::string(program_name));
  raw_options raw;
  declare_options(app, raw);
  return gradcomp_tools::tool_main<CLI::ParseError>(program_name, app, argc, argv,
                                                    [&] { return run(make_settings(raw, app)); });
}
