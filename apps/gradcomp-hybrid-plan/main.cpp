// SPDX-License-Identifier: Apache-2.0
// gradcomp-hybrid-plan: for fully connected layers (VGG-16's FC1-FC3 by default), prints per
// rank count P and local batch M whether data or model parallelism (S2) moves less data (S2's
// volume rule) and which is faster under the alpha-beta model given on the command line
// (gradcomp::hybrid::choose), as a text table or JSON. Usage: docs/hybrid.md.
#include <gradcomp/hybrid/plan.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "../common/tool_support.hpp"

namespace {

namespace gh = gradcomp::hybrid;
constexpr std::string_view program_name = "gradcomp-hybrid-plan";
using gradcomp_tools::cat;
using gradcomp_tools::format;
using gradcomp_tools::parse_number;
using gradcomp_tools::usage_error;

struct raw_options {
  double alpha = 0.0;
  double beta = 0.0;
  double gamma = 0.0;
  std::vector<int> ranks{2, 4, 8};
  std::vector<std::size_t> batches{1, 2, 4, 8, 16, 32, 64, 128};
  std::vector<std::string> layers;
  std::string exchange = "all_to_all";
  double bytes_per_value = 4.0;
  double mp_fixed_seconds = -1.0;
  bool fused = false;
  bool json = false;
};

// "name:K:N" -> fc_layer. @throws usage_error naming the text.
gh::fc_layer parse_layer(const std::string& text) {
  const std::size_t a = text.find(':');
  const std::size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos || a == 0) {
    throw usage_error(cat("--layer: '", text, "' is not NAME:K:N"));
  }
  const auto k =
      parse_number<std::size_t>("--layer", text.substr(a + 1, b - a - 1), "an integer K >= 1");
  const auto n = parse_number<std::size_t>("--layer", text.substr(b + 1), "an integer N >= 1");
  if (k == 0 || n == 0) {
    throw usage_error(cat("--layer: '", text, "' has K or N = 0"));
  }
  return {text.substr(0, a), k, n};
}

int run(const raw_options& raw) {
  gradcomp::cost::fc_cost_options o;
  o.bytes_per_value = raw.bytes_per_value;
  o.fused = raw.fused;
  o.model_parallel_fixed_seconds = raw.mp_fixed_seconds;
  o.exchange = raw.exchange == "s2_allgather" ? gradcomp::fc_exchange::s2_allgather
                                              : gradcomp::fc_exchange::all_to_all;
  const gradcomp::cost::network net{raw.alpha, raw.beta, raw.gamma};
  std::vector<gh::fc_layer> layers;
  for (const std::string& text : raw.layers) {
    layers.push_back(parse_layer(text));
  }
  if (layers.empty()) {
    layers = gh::vgg16_fc_layers();
  }
  nlohmann::json rows = nlohmann::json::array();
  if (!raw.json) {
    std::cout << format("%-6s %5s %5s %9s %9s %8s %12s %12s %8s\n", "layer", "P", "M", "DP_Mval",
                        "MP_Mval", "volume", "DP_ms", "MP_ms", "cost");
  }
  for (const gh::fc_layer& layer : layers) {
    for (const int p : raw.ranks) {
      for (const std::size_t m : raw.batches) {
        const gh::fc_choice c = gh::choose(layer, m, p, net, o);
        if (raw.json) {
          rows.push_back({{"layer", layer.name},
                          {"inputs_k", layer.inputs_k},
                          {"outputs_n", layer.outputs_n},
                          {"ranks", p},
                          {"batch", m},
                          {"data_values", c.data_values},
                          {"model_values", c.model_values},
                          {"by_volume", gh::name(c.by_volume)},
                          {"data_seconds", c.data_seconds},
                          {"model_seconds", c.model_seconds},
                          {"by_cost", gh::name(c.by_cost)}});
        } else {
          std::cout << format("%-6s %5d %5zu %9.3f %9.3f %8s %12.3f %12.3f %8s\n",
                              layer.name.c_str(), p, m, c.data_values / 1e6, c.model_values / 1e6,
                              std::string(gh::name(c.by_volume)).c_str(), 1e3 * c.data_seconds,
                              1e3 * c.model_seconds, std::string(gh::name(c.by_cost)).c_str());
        }
      }
    }
  }
  if (raw.json) {
    std::cout << nlohmann::json{{"alpha_seconds", raw.alpha},
                                {"beta_seconds_per_byte", raw.beta},
                                {"gamma_seconds_per_byte", raw.gamma},
                                {"exchange", raw.exchange},
                                {"fused", raw.fused},
                                {"bytes_per_value", raw.bytes_per_value},
                                {"rows", rows}}
                     .dump(1)
              << '\n';
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app("Data or model parallelism per fully connected layer (S2): S2's volume rule and "
               "the alpha-beta cost of both sides, for each rank count and local batch.",
               std::string(program_name));
  raw_options raw;
  app.add_option("--alpha", raw.alpha, "Seconds per message (calibrated: docs/hybrid.md)")
      ->required()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--beta", raw.beta, "Seconds per byte")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--gamma", raw.gamma, "Seconds per byte of reduction (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ranks", raw.ranks, "Rank counts P (default 2 4 8)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--batches", raw.batches, "Local batches M (default 1 2 4 ... 128)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("--layer", raw.layers,
                 "A layer NAME:K:N (repeatable; default VGG-16's fc1:25088:4096 fc2:4096:4096 "
                 "fc3:4096:1000)");
  app.add_option("--exchange", raw.exchange, "Model-parallel exchange")
      ->check(CLI::IsMember({"all_to_all", "s2_allgather"}))
      ->capture_default_str();
  app.add_option("--bytes-per-value", raw.bytes_per_value, "Wire bytes per value (4 fp32, 2 fp16)")
      ->check(CLI::Range(1.0, 8.0))
      ->capture_default_str();
  app.add_option("--mp-fixed-seconds", raw.mp_fixed_seconds,
                 "Model parallel: a measured fixed cost per forward + backward pass "
                 "(mpi::calibrate_model_parallel_fixed_seconds) instead of the alpha terms")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--fused", raw.fused,
               "Data parallel: the layer's gradient is fused with others (no latency term)");
  app.add_flag("--json", raw.json, "Print one JSON object instead of the table");
  return gradcomp_tools::tool_main<CLI::ParseError>(program_name, app, argc, argv,
                                                    [&] { return run(raw); });
}
