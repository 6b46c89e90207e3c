// SPDX-License-Identifier: Apache-2.0
// Tests of the gradcomp-compress tool: generates .npy inputs with xt::dump_npy (and hand-edited
// variants for the bad-input cases), runs the real binary and checks its output files, its JSON
// lines, its exit status and its stderr.
#include <gradcomp/gradcomp.hpp>

#include <nlohmann/json.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "npy_builder.hpp"
#include "tool_runner.hpp"

#ifndef GRADCOMP_COMPRESS_EXE
#error "GRADCOMP_COMPRESS_EXE must be the path of the gradcomp-compress binary"
#endif

namespace {

namespace fs = std::filesystem;

const std::string error_prefix = "gradcomp-compress: error: ";

using gradcomp_tool_tests::make_npy;
using gradcomp_tool_tests::npy_of;
using gradcomp_tool_tests::raw_bytes;
using gradcomp_tool_tests::read_bytes;
using gradcomp_tool_tests::run_result;
using gradcomp_tool_tests::write_bytes;

// ---- files and processes -------------------------------------------------------------------

//! A fresh directory for one test: inputs in in/, the tool's outputs in out/, the captured
//! stdout and stderr next to them. Removed with its contents at the end of the test.
class scratch : public gradcomp_tool_tests::scratch_dir {
public:
  scratch() : scratch_dir("gradcomp-compress-scratch") {
    fs::create_directories(root() / "in");
    fs::create_directories(root() / "out");
  }

  //! Path of input file `name`.
  [[nodiscard]] std::string input(const std::string& name) const {
    return (root() / "in" / name).string();
  }
  //! The --out prefix `name` inside out/.
  [[nodiscard]] std::string prefix(const std::string& name = "result") const {
    return (root() / "out" / name).string();
  }
  //! Path of output `kind` ("indices" or "values") of iteration `i` for prefix `name`.
  [[nodiscard]] std::string
  output(std::size_t i, const std::string& kind, const std::string& name = "result") const {
    return prefix(name) + "." + std::to_string(i) + "." + kind + ".npy";
  }
  //! Names of everything in out/, sorted.
  [[nodiscard]] std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(root() / "out")) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  //! Runs the tool with `args` (stdin from /dev/null) and captures its output.
  [[nodiscard]] run_result run(const std::vector<std::string>& args) const {
    return run_tool(GRADCOMP_COMPRESS_EXE, args);
  }
};

// ---- .npy inputs ---------------------------------------------------------------------------

//! Writes `v` as a 1-D float32 .npy input called `name`; returns its path.
std::string write_input(const scratch& s, const std::string& name, const std::vector<float>& v) {
  const std::string path = s.input(name);
  write_bytes(path, npy_of(v));
  return path;
}

//! `n` values drawn from N(0, scale^2) (seeded: the same on every run).
std::vector<float> normal_values(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) {
    x = normal(rng);
  }
  return v;
}

//! The version 1.0 .npy file `npy` with its header dictionary replaced by `dict`, padded to the
//! same header length (so the data stays where it was).
std::string with_dict(const std::string& npy, const std::string& dict) {
  const std::size_t header_length =
      static_cast<unsigned char>(npy[8]) | std::size_t{static_cast<unsigned char>(npy[9])} << 8;
  return make_npy(1, dict, header_length, npy.substr(10 + header_length));
}

//! `s` with its first occurrence of `from` replaced by `to` (which must occur).
std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const std::size_t pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

// ---- outputs -------------------------------------------------------------------------------

//! One iteration's outputs: the two .npy files and the JSON line.
struct iteration_output {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  nlohmann::ordered_json stats;
};

//! Loads output file `path`: it must be a 1-D .npy array of exactly element type T.
template <class T>
std::vector<T> load_output(const std::string& path) {
  INFO("output " << path);
  REQUIRE(fs::is_regular_file(path));
  std::vector<T> v;
  std::size_t dimension = 0;
  try {
    auto a = xt::load_npy<T>(path); // throws unless the file's dtype is exactly T's
    dimension = a.dimension();
    v.assign(a.begin(), a.end());
  } catch (const std::exception& e) {
    FAIL("cannot load " << path << ": " << e.what());
  }
  REQUIRE(dimension == 1);
  return v;
}

//! Parses one stdout line: exactly the documented keys, in order, with their JSON types.
nlohmann::ordered_json parse_stats(const std::string& line) {
  INFO("JSON line: " << line);
  nlohmann::ordered_json j;
  REQUIRE_NOTHROW(j = nlohmann::ordered_json::parse(line));
  REQUIRE(j.is_object());
  std::vector<std::string> keys;
  for (const auto& item : j.items()) {
    keys.push_back(item.key());
  }
  REQUIRE(keys == std::vector<std::string>{"iteration", "method", "numel", "k_target", "k_selected",
                                           "threshold", "fallback", "seconds", "wire_bytes"});
  for (const char* key : {"iteration", "numel", "k_target", "k_selected"}) {
    REQUIRE(j[key].is_number_unsigned());
  }
  REQUIRE(j["method"].is_string());
  REQUIRE(j["threshold"].is_number());
  REQUIRE(j["fallback"].is_boolean());
  REQUIRE(j["seconds"].is_number());
  REQUIRE(j["seconds"].get<double>() >= 0.0);
  REQUIRE(j["wire_bytes"].is_number_unsigned());
  REQUIRE(j["wire_bytes"].get<std::size_t>() >= 32);
  return j;
}

//! Checks a successful run of `iterations` iterations of `method` on inputs of `numel` elements
//! (exit 0, nothing on stderr, one JSON line and two files per iteration) and loads its outputs.
std::vector<iteration_output> read_outputs(const scratch& s,
                                           const run_result& r,
                                           std::size_t iterations,
                                           const std::string& method,
                                           std::size_t numel,
                                           const std::string& name = "result") {
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.err.empty());
  std::vector<std::string> lines;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    lines.push_back(line);
  }
  REQUIRE(!r.out.empty());
  REQUIRE(r.out.back() == '\n');
  REQUIRE(lines.size() == iterations);
  std::vector<iteration_output> outputs(iterations);
  for (std::size_t i = 0; i < iterations; ++i) {
    iteration_output& o = outputs[i];
    o.stats = parse_stats(lines[i]);
    o.indices = load_output<std::uint32_t>(s.output(i, "indices", name));
    o.values = load_output<float>(s.output(i, "values", name));
    INFO("iteration " << i << ": " << lines[i]);
    REQUIRE(o.stats["iteration"] == i);
    REQUIRE(o.stats["method"] == method);
    REQUIRE(o.stats["numel"] == numel);
    REQUIRE(o.indices.size() == o.values.size());
    REQUIRE(o.stats["k_selected"] == o.indices.size());
  }
  return outputs;
}

//! "" if the message is a selection from `x`: strictly ascending indices below x.size(), each
//! value bit-identical to x at its index; otherwise the first violation.
std::string selection_violation(const std::vector<float>& x, const iteration_output& o) {
  for (std::size_t j = 0; j < o.indices.size(); ++j) {
    const std::uint32_t i = o.indices[j];
    if (i >= x.size()) {
      return "index " + std::to_string(i) + " out of range";
    }
    if (j > 0 && o.indices[j - 1] >= i) {
      return "indices not ascending at position " + std::to_string(j);
    }
    if (std::bit_cast<std::uint32_t>(o.values[j]) != std::bit_cast<std::uint32_t>(x[i])) {
      return "value at index " + std::to_string(i) + " is " + std::to_string(o.values[j]) +
             ", expected " + std::to_string(x[i]);
    }
  }
  return "";
}

//! "" if the reported threshold separates the selection from the rest of `x`: every sent
//! magnitude >= threshold >= every unsent magnitude; otherwise the first violation.
std::string threshold_violation(const std::vector<float>& x, const iteration_output& o) {
  const auto threshold = o.stats["threshold"].get<float>();
  std::vector<bool> sent(x.size(), false);
  for (const std::uint32_t i : o.indices) {
    sent[i] = true;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = std::abs(x[i]);
    if (sent[i] ? a < threshold : a > threshold) {
      return "element " + std::to_string(i) + " (magnitude " + std::to_string(a) + ", " +
             (sent[i] ? "sent" : "not sent") + ") is on the wrong side of threshold " +
             std::to_string(threshold);
    }
  }
  return "";
}

//! The smallest magnitude among the sent values (infinity if none).
float min_sent_magnitude(const iteration_output& o) {
  float m = std::numeric_limits<float>::infinity();
  for (const float v : o.values) {
    m = std::min(m, std::abs(v));
  }
  return m;
}

//! Checks that the tool rejected its input: exit status 2, exactly one line on stderr, starting
//! with the tool's error prefix and containing `expected`, nothing on stdout, nothing in out/.
void require_rejected(const scratch& s,
                      const std::vector<std::string>& args,
                      const std::string& expected) {
  std::string command_line;
  for (const std::string& a : args) {
    command_line += " [" + a + "]";
  }
  INFO("arguments:" << command_line);
  const run_result r = s.run(args);
  INFO("stderr: " << r.err);
  INFO("stdout: " << r.out);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK((!r.err.empty() && r.err.back() == '\n'));
  CHECK(r.err.rfind(error_prefix, 0) == 0);
  CHECK(r.err.size() > error_prefix.size() + 1);
  CHECK(r.err.find(expected) != std::string::npos);
  CHECK(s.outputs().empty());
}

//! The density that leads to k = ceil(d n).
std::size_t ceil_k(double density, std::size_t n) {
  return static_cast<std::size_t>(std::ceil(density * static_cast<double>(n)));
}

const std::vector<std::string> selecting_methods{"exact_topk", "sampled_topk", "gaussian_threshold",
                                                 "lognormal_threshold", "reused_threshold"};

} // namespace

// ---- valid runs ----------------------------------------------------------------------------

TEST_CASE("exact_topk sends the ceil(d n) largest magnitudes of each input") {
  const scratch s;
  constexpr std::size_t n = 37;
  std::vector<std::vector<float>> x;
  std::vector<std::string> paths;
  for (unsigned i = 0; i < 3; ++i) {
    x.push_back(normal_values(n, 10 + i));
    paths.push_back(write_input(s, "grad" + std::to_string(i) + ".npy", x.back()));
  }
  // 0.1 x 37 = 3.7 -> 4 and 0.07 x 37 = 2.59 -> 3 round up; 1.0 sends everything.
  for (const auto& [density, density_text, k] :
       {std::tuple{0.25, "0.25", std::size_t{10}}, std::tuple{0.1, "0.1", std::size_t{4}},
        std::tuple{0.07, "0.07", std::size_t{3}}, std::tuple{1.0, "1", n}}) {
    INFO("density " << density_text);
    REQUIRE(k == ceil_k(density, n));
    const std::string name = std::string("d") + density_text;
    std::vector<std::string> args{"--method", "exact_topk", "--density", density_text};
    args.insert(args.end(), paths.begin(), paths.end());
    args.insert(args.end(), {"--out", s.prefix(name)});
    const auto outputs = read_outputs(s, s.run(args), 3, "exact_topk", n, name);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("iteration " << i);
      const iteration_output& o = outputs[i];
      CHECK(o.stats["k_target"] == k);
      CHECK(o.stats["k_selected"] == k);
      CHECK(o.stats["fallback"] == false);
      CHECK(selection_violation(x[i], o) == "");
      CHECK(threshold_violation(x[i], o) == "");
      CHECK(o.stats["threshold"].get<float>() == min_sent_magnitude(o));
    }
  }
  CHECK(s.outputs().size() == 4 * 3 * 2);
}

TEST_CASE("every selecting method sends input values above its threshold") {
  const scratch s;
  constexpr std::size_t n = 5000; // above 2 x 1024 samples, so sampled_topk really samples
  constexpr std::size_t iterations = 4;
  constexpr std::size_t k = 50;
  std::vector<std::vector<float>> x;
  std::vector<std::string> paths;
  for (unsigned i = 0; i < iterations; ++i) {
    x.push_back(normal_values(n, 20 + i, 1.0f + 0.05f * static_cast<float>(i)));
    paths.push_back(write_input(s, "grad" + std::to_string(i) + ".npy", x.back()));
  }
  for (const std::string& method : selecting_methods) {
    INFO("method " << method);
    std::vector<std::string> args{"--method", method, "--density", "0.01"};
    args.insert(args.end(), paths.begin(), paths.end());
    args.insert(args.end(), {"--out", s.prefix(method)});
    const auto outputs = read_outputs(s, s.run(args), iterations, method, n, method);
    for (std::size_t i = 0; i < iterations; ++i) {
      INFO("iteration " << i << ": " << outputs[i].stats.dump());
      const iteration_output& o = outputs[i];
      CHECK(o.stats["k_target"] == k);
      // The guard (factor 2) keeps every estimate within [k/2, 2k], else exact top-k runs.
      CHECK(o.indices.size() >= k / 2);
      CHECK(o.indices.size() <= 2 * k);
      CHECK(selection_violation(x[i], o) == "");
      CHECK(threshold_violation(x[i], o) == "");
    }
    // Exact top-k and the exact first call of reused_threshold send exactly k.
    if (method == "exact_topk" || method == "reused_threshold") {
      CHECK(outputs[0].indices.size() == k);
    }
  }
}

TEST_CASE("reused_threshold with --interval 3 is exact on iterations 0 3 and 6") {
  const scratch s;
  constexpr std::size_t n = 2000;
  constexpr std::size_t iterations = 7;
  constexpr std::size_t k = 100;
  std::vector<std::string> paths;
  for (unsigned i = 0; i < iterations; ++i) {
    const auto x = normal_values(n, 30 + i, 1.0f + 0.04f * static_cast<float>(i));
    paths.push_back(write_input(s, "grad" + std::to_string(i) + ".npy", x));
  }
  for (const bool error_feedback : {false, true}) {
    INFO("error feedback: " << error_feedback);
    const std::string name = error_feedback ? "ef" : "plain";
    std::vector<std::string> args{"--method", "reused_threshold", "--density",
                                  "0.05",     "--interval",       "3"};
    if (error_feedback) {
      args.emplace_back("--error-feedback");
    }
    args.insert(args.end(), paths.begin(), paths.end());
    args.insert(args.end(), {"--out", s.prefix(name)});
    const auto outputs = read_outputs(s, s.run(args), iterations, "reused_threshold", n, name);
    std::size_t inexact_reuses = 0;
    for (std::size_t i = 0; i < iterations; ++i) {
      INFO("iteration " << i << ": " << outputs[i].stats.dump());
      CHECK(outputs[i].stats["k_target"] == k);
      if (i % 3 == 0) {
        CHECK(outputs[i].stats["k_selected"] == k);
        CHECK(outputs[i].stats["fallback"] == false);
      } else if (outputs[i].stats["k_selected"] != k) {
        ++inexact_reuses;
      }
    }
    // The iterations between reuse a threshold, so their counts drift from k: the interval is
    // neither ignored (default 10) nor 1.
    CHECK(inexact_reuses > 0);
  }
}

TEST_CASE("error feedback sends the accumulated gradient and keeps the rest") {
  const scratch s;
  constexpr std::size_t n = 3000;
  constexpr std::size_t iterations = 4;
  std::vector<std::vector<float>> x;
  std::vector<std::string> paths;
  for (unsigned i = 0; i < iterations; ++i) {
    x.push_back(normal_values(n, 40 + i));
    paths.push_back(write_input(s, "grad" + std::to_string(i) + ".npy", x.back()));
  }
  for (const std::string& method : selecting_methods) {
    INFO("method " << method);
    std::vector<std::string> args{"--method", method, "--density", "0.02", "--error-feedback"};
    args.insert(args.end(), paths.begin(), paths.end());
    args.insert(args.end(), {"--out", s.prefix(method)});
    const auto outputs = read_outputs(s, s.run(args), iterations, method, n, method);
    // Replay: acc = residual + grad is what is selected from; sent elements leave 0 behind.
    std::vector<float> residual(n, 0.0f);
    bool residual_was_sent = false;
    for (std::size_t i = 0; i < iterations; ++i) {
      INFO("iteration " << i << ": " << outputs[i].stats.dump());
      std::vector<float> acc(n);
      for (std::size_t j = 0; j < n; ++j) {
        acc[j] = residual[j] + x[i][j];
      }
      CHECK(selection_violation(acc, outputs[i]) == "");
      CHECK(threshold_violation(acc, outputs[i]) == "");
      for (const std::uint32_t j : outputs[i].indices) {
        residual_was_sent = residual_was_sent || residual[j] != 0.0f;
        acc[j] = 0.0f;
      }
      residual = acc;
    }
    CHECK(residual_was_sent); // the residual really reached the later messages
  }
}

TEST_CASE("dense methods write every index and the rounded values") {
  const scratch s;
  std::vector<float> x = normal_values(64, 50);
  x.insert(x.end(), {1.0e6f, -1.0e6f, 70000.0f, 1.0e-8f, 0.1f, -0.0f, 65504.0f});
  const std::size_t n = x.size();
  std::vector<float> y = normal_values(n, 51, 100.0f);
  const std::string p0 = write_input(s, "grad0.npy", x);
  const std::string p1 = write_input(s, "grad1.npy", y);
  for (const auto& [method, type] : {std::pair{"fp16", gradcomp::value_type::fp16},
                                     std::pair{"bf16", gradcomp::value_type::bf16},
                                     std::pair{"none", gradcomp::value_type::fp32}}) {
    // --density may be left out for a dense method; when given it is validated and ignored.
    for (const bool with_density : {false, true}) {
      INFO("method " << method << (with_density ? " with --density 0.3" : ""));
      const std::string name = std::string(method) + (with_density ? "-d" : "");
      std::vector<std::string> args{"--method", method, p0, p1, "--out", s.prefix(name)};
      if (with_density) {
        args.insert(args.end(), {"--density", "0.3"});
      }
      const auto outputs = read_outputs(s, s.run(args), 2, method, n, name);
      for (std::size_t i = 0; i < 2; ++i) {
        const std::vector<float>& input = i == 0 ? x : y;
        const iteration_output& o = outputs[i];
        CHECK(o.stats["k_target"] == n);
        CHECK(o.stats["threshold"].get<double>() == 0.0);
        CHECK(o.stats["fallback"] == false);
        REQUIRE(o.indices.size() == n);
        std::vector<float> expected(n);
        for (std::size_t j = 0; j < n; ++j) {
          CHECK(o.indices[j] == j);
          expected[j] = gradcomp::round_to(type, input[j]);
        }
        CHECK(selection_violation(expected, o) == "");
      }
      if (type == gradcomp::value_type::fp16) {
        CHECK(outputs[0].values[64] == 65504.0f); // fp16 saturates instead of overflowing
        CHECK(outputs[0].values[65] == -65504.0f);
      }
      if (type == gradcomp::value_type::fp32) {
        CHECK(selection_violation(x, outputs[0]) == ""); // bit-identical copy
      } else {
        CHECK(outputs[0].values[68] != 0.1f); // 0.1 is not representable in 16 bits
      }
    }
  }
}

TEST_CASE("quantizing methods send every element on their grid, a few bits each") {
  const scratch s;
  const std::size_t n = 1000;
  const std::vector<float> x = normal_values(n, 60);
  const std::string p0 = write_input(s, "grad0.npy", x);
  double sum_abs = 0.0;
  double sum_squares = 0.0;
  for (const float v : x) {
    sum_abs += std::abs(static_cast<double>(v));
    sum_squares += static_cast<double>(v) * v;
  }
  // signsgd: +-mean |x|, 1 bit per value
  auto o = read_outputs(s, s.run({"--method", "signsgd", p0, "--out", s.prefix("sign")}), 1,
                        "signsgd", n, "sign");
  const auto mean_abs = static_cast<float>(sum_abs / n);
  for (std::size_t j = 0; j < n; ++j) {
    REQUIRE(o[0].values[j] == (x[j] >= 0.0f ? mean_abs : -mean_abs));
  }
  CHECK(o[0].stats["wire_bytes"] == 32 + 9 + (n + 7) / 8);
  CHECK(o[0].stats["k_selected"] == n);
  // qsgd --levels 7, one scale: multiples of ||x|| / 7, 4 bits per value; the seed decides the
  // rounding
  const auto norm = static_cast<float>(std::sqrt(sum_squares));
  std::vector<std::vector<float>> runs;
  for (const char* seed : {"1", "1", "2"}) {
    const std::string name = std::string("q") + std::to_string(runs.size());
    o = read_outputs(s,
                     s.run({"--method", "qsgd", "--levels", "7", "--quantization-bucket", "0",
                            "--seed", seed, p0, "--out", s.prefix(name)}),
                     1, "qsgd", n, name);
    for (const float v : o[0].values) {
      const double j = std::nearbyint(static_cast<double>(v) / norm * 7.0);
      REQUIRE(std::abs(j) <= 7.0);
      REQUIRE(v == gradcomp::quantized_value(norm, static_cast<std::int32_t>(j), 7));
    }
    CHECK(o[0].stats["wire_bytes"] == 32 + 9 + (4 * n + 7) / 8);
    runs.push_back(o[0].values);
  }
  CHECK(runs[0] == runs[1]);
  CHECK(runs[0] != runs[2]);
  // the default buckets of 512: values 0..511 multiples of their own norm / 7, 512..999 of
  // theirs; the segment table (4 + 2 x 6 bytes) on the wire
  o = read_outputs(s, s.run({"--method", "qsgd", "--levels", "7", p0, "--out", s.prefix("qb")}), 1,
                   "qsgd", n, "qb");
  for (const auto& [first, last] : {std::pair<std::size_t, std::size_t>{0, 512}, {512, n}}) {
    double bucket_squares = 0.0;
    for (std::size_t j = first; j < last; ++j) {
      bucket_squares += static_cast<double>(x[j]) * x[j];
    }
    const auto bucket_norm = static_cast<float>(std::sqrt(bucket_squares));
    for (std::size_t j = first; j < last; ++j) {
      const float v = o[0].values[j];
      const double code = std::nearbyint(static_cast<double>(v) / bucket_norm * 7.0);
      REQUIRE(v == gradcomp::quantized_value(bucket_norm, static_cast<std::int32_t>(code), 7));
    }
  }
  CHECK(o[0].stats["wire_bytes"] == 32 + 9 + 4 + 2 * 6 + (4 * n + 7) / 8);
  // terngrad: {-max, 0, max}, 2 bits per value
  o = read_outputs(s, s.run({"--method", "terngrad", p0, "--out", s.prefix("tern")}), 1, "terngrad",
                   n, "tern");
  float max_abs = 0.0f;
  for (const float v : x) {
    max_abs = std::max(max_abs, std::abs(v));
  }
  for (const float v : o[0].values) {
    REQUIRE((v == 0.0f || v == max_abs || v == -max_abs));
  }
  CHECK(o[0].stats["wire_bytes"] == 32 + 9 + (2 * n + 7) / 8);
  // bad levels
  for (const char* bad : {"0", "40000", "x"}) {
    const run_result r = s.run({"--method", "qsgd", "--levels", bad, p0, "--out", s.prefix("b")});
    CHECK(r.status == 2);
    CHECK(r.err.find("--levels") != std::string::npos);
  }
  for (const char* bad : {"-1", "4294967296", "x"}) {
    const run_result r =
        s.run({"--method", "qsgd", "--quantization-bucket", bad, p0, "--out", s.prefix("b")});
    CHECK(r.status == 2);
    CHECK(r.err.find("--quantization-bucket: ") != std::string::npos);
    CHECK(r.err.find(bad) != std::string::npos);
  }
}

#if GRADCOMP_COMPRESS_WITH_BLAS
TEST_CASE("powersgd writes its rank-r approximation and sends the rest later") {
  const scratch s;
  const std::size_t rows = 40, cols = 30, n = rows * cols;
  const std::vector<float> a = normal_values(rows, 70), b = normal_values(cols, 71);
  const std::vector<float> c = normal_values(rows, 72), d = normal_values(cols, 73);
  std::vector<float> rank1(n), rank2(n);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      rank1[i * cols + j] = a[i] * b[j];
      rank2[i * cols + j] = a[i] * b[j] + 0.5f * c[i] * d[j];
    }
  }
  const std::string p1 = write_input(s, "rank1.npy", rank1);
  const std::string p2 = write_input(s, "rank2.npy", rank2);
  const std::string zero = write_input(s, "zero.npy", std::vector<float>(n, 0.0f));
  const auto close = [](float got, float want) {
    return std::abs(got - want) <= 1e-4f * (1.0f + std::abs(want));
  };
  // a rank-1 matrix at rank 1: the approximation is the matrix; the wire carries P and Q
  auto o = read_outputs(s,
                        s.run({"--method", "powersgd", "--rank", "1", "--shape", "40x30", p1,
                               "--out", s.prefix("r1")}),
                        1, "powersgd", n, "r1");
  for (std::size_t j = 0; j < n; ++j) {
    REQUIRE(close(o[0].values[j], rank1[j]));
  }
  CHECK(o[0].stats["wire_bytes"] == 4 * (rows + cols) * 1);
  CHECK(o[0].stats["k_selected"] == n);
  // a rank-2 matrix at rank 1: the first iteration sends one direction, the residual (rank 1)
  // goes out in the next; after zeros the outputs add up to the matrix (error feedback)
  o = read_outputs(s,
                   s.run({"--method", "powersgd", "--rank", "1", "--shape", "40x30", p2, zero, zero,
                          "--out", s.prefix("r2")}),
                   3, "powersgd", n, "r2");
  double first_error = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    first_error = std::max(first_error, static_cast<double>(std::abs(o[0].values[j] - rank2[j])));
    REQUIRE(close(o[0].values[j] + o[1].values[j] + o[2].values[j], rank2[j]));
  }
  CHECK(first_error > 0.01); // rank 1 cannot send a rank-2 matrix at once
  // the same seed gives the same output
  const auto again = read_outputs(s,
                                  s.run({"--method", "powersgd", "--rank", "1", "--shape", "40x30",
                                         p2, zero, zero, "--out", s.prefix("r3")}),
                                  3, "powersgd", n, "r3");
  CHECK(again[0].values == o[0].values);
  // bad shapes and ranks name the value
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad{
      {{"--method", "powersgd", p1}, "--shape ROWSxCOLS is required"},
      {{"--method", "powersgd", "--shape", "40x31", p1}, "--shape 40x31 has 1240 elements"},
      {{"--method", "powersgd", "--shape", "40-30", p1}, "'40-30' is not ROWSxCOLS"},
      {{"--method", "powersgd", "--shape", "0x30", p1}, "--shape: 0 is below the minimum 1"},
      {{"--method", "powersgd", "--shape", "40x30", "--rank", "0", p1}, "--rank: 0 is below"},
      {{"--method", "powersgd", "--shape", "40x30", "--rank", "20", p1},
       "a 40 x 30 layer at rank 20 does not compress"}};
  for (const auto& [args, message] : bad) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--out", s.prefix("bad")});
    const run_result r = s.run(full);
    CHECK(r.status == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
#endif

TEST_CASE("dense fp16 with error feedback keeps the rounding error") {
  const scratch s;
  constexpr std::size_t n = 200;
  std::vector<std::vector<float>> x;
  std::vector<std::string> paths;
  for (unsigned i = 0; i < 3; ++i) {
    x.push_back(normal_values(n, 60 + i));
    paths.push_back(write_input(s, "grad" + std::to_string(i) + ".npy", x.back()));
  }
  std::vector<std::string> args{"--method", "fp16", "--error-feedback"};
  args.insert(args.end(), paths.begin(), paths.end());
  args.insert(args.end(), {"--out", s.prefix()});
  const auto outputs = read_outputs(s, s.run(args), 3, "fp16", n);
  std::vector<float> residual(n, 0.0f);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("iteration " << i);
    std::vector<float> sent(n);
    for (std::size_t j = 0; j < n; ++j) {
      const float acc = residual[j] + x[i][j];
      sent[j] = gradcomp::round_to(gradcomp::value_type::fp16, acc);
      residual[j] = acc - sent[j];
    }
    CHECK(selection_violation(sent, outputs[i]) == "");
  }
  CHECK(std::any_of(residual.begin(), residual.end(), [](float r) { return r != 0.0f; }));
}

TEST_CASE("empty 1-D inputs are valid and select nothing") {
  const scratch s;
  const std::string p0 = write_input(s, "empty0.npy", {});
  const std::string p1 = write_input(s, "empty1.npy", {});
  for (const std::string method : {"exact_topk", "sampled_topk", "gaussian_threshold",
                                   "lognormal_threshold", "reused_threshold", "fp16", "none"}) {
    for (const bool error_feedback : {false, true}) {
      INFO("method " << method << (error_feedback ? " with error feedback" : ""));
      const std::string name = method + (error_feedback ? "-ef" : "");
      std::vector<std::string> args{"--method", method, "--density", "0.5",
                                    p0,         p1,     "--out",     s.prefix(name)};
      if (error_feedback) {
        args.emplace_back("--error-feedback");
      }
      const auto outputs = read_outputs(s, s.run(args), 2, method, 0, name);
      for (const iteration_output& o : outputs) {
        CHECK(o.stats["k_target"] == 0);
        CHECK(o.indices.empty());
        CHECK(o.values.empty());
      }
    }
  }
}

TEST_CASE("sampled_topk gives the same output for the same seed and uses the seed") {
  const scratch s;
  const auto x = normal_values(8000, 70);
  const std::string p0 = write_input(s, "grad0.npy", x);
  const std::string p1 = write_input(s, "grad1.npy", normal_values(8000, 71));
  //! Runs sampled_topk with the seed arguments `seed` into prefix `name`.
  const auto run_with = [&](std::vector<std::string> seed, const std::string& name) {
    std::vector<std::string> args{"--method", "sampled_topk", "--density",   "0.003", p0,
                                  p1,         "--out",        s.prefix(name)};
    args.insert(args.end(), seed.begin(), seed.end());
    return read_outputs(s, s.run(args), 2, "sampled_topk", x.size(), name);
  };
  const auto a = run_with({"--seed", "12345"}, "a");
  const auto b = run_with({"--seed", "12345"}, "b");
  const auto other = run_with({"--seed", "1"}, "other");
  const auto zero = run_with({"--seed", "0"}, "zero");
  const auto unseeded = run_with({}, "default");
  bool seed_matters = false;
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("iteration " << i);
    CHECK(a[i].indices == b[i].indices);
    CHECK(a[i].values == b[i].values);
    CHECK(a[i].stats["threshold"] == b[i].stats["threshold"]);
    CHECK(unseeded[i].indices == zero[i].indices); // the default seed is 0
    // The seed picks the sample, hence the threshold (for these inputs it differs).
    seed_matters = seed_matters || a[i].stats["threshold"] != other[i].stats["threshold"];
  }
  CHECK(seed_matters);
}

TEST_CASE("other valid .npy layouts give the same output as xtensor's") {
  const scratch s;
  const auto x = normal_values(40, 80);
  const std::string reference = write_input(s, "reference.npy", x);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (40,), }";
  std::vector<std::pair<std::string, std::string>> variants{
      // a 1-D array is stored the same way in Fortran order
      {"fortran", replace_once(npy_of(x), "False", "True ")},
      // a header length of 182 (0xb6): its low byte has the high bit set
      {"long-header", make_npy(1, dict, 182, raw_bytes(x))},
      // format version 2.0 (4-byte header length)
      {"version-2", make_npy(2, dict, 128 - 12, raw_bytes(x))},
      // NumPy-style spacing variants of the dictionary
      {"spacing",
       make_npy(1, "{'descr':'<f4','fortran_order':False,'shape':(40,)}", 118, raw_bytes(x))}};
  const auto expected = read_outputs(
      s, s.run({"--method", "exact_topk", "--density", "0.2", reference, "--out", s.prefix()}), 1,
      "exact_topk", x.size());
  REQUIRE(selection_violation(x, expected[0]) == "");
  for (const auto& [name, bytes] : variants) {
    INFO("variant " << name);
    const std::string path = s.input(name + ".npy");
    write_bytes(path, bytes);
    const auto got = read_outputs(
        s, s.run({"--method", "exact_topk", "--density", "0.2", path, "--out", s.prefix(name)}), 1,
        "exact_topk", x.size(), name);
    CHECK(got[0].indices == expected[0].indices);
    CHECK(got[0].values == expected[0].values);
  }
}

TEST_CASE("the help option prints the usage on stdout and exits 0") {
  const scratch s;
  const run_result r = s.run({"--help"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  for (const char* word : {"--method", "--density", "--interval", "--error-feedback", "--seed",
                           "--out", "exact_topk", "lognormal_threshold", "fp16"}) {
    CHECK(r.out.find(word) != std::string::npos);
  }
  CHECK(s.outputs().empty());
}

// ---- bad inputs: exit 2, one line on stderr, nothing written -------------------------------

TEST_CASE("bad input: a dtype other than float32") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 90));
  const std::string f32 = npy_of(normal_values(4, 91));
  xt::xarray<bool> flags = {true, false, true, true};
  const std::vector<std::pair<std::string, std::string>> cases{
      {"float64", npy_of(std::vector<double>{1, 2, 3, 4})},
      {"int32", npy_of(std::vector<std::int32_t>{1, 2, 3, 4})},
      {"uint32", npy_of(std::vector<std::uint32_t>{1, 2, 3, 4})},
      {"int64", npy_of(std::vector<std::int64_t>{1, 2, 3, 4})},
      {"bool", xt::dump_npy(flags)},
      {"big-endian float32", replace_once(f32, "<f4", ">f4")},
      {"float16", replace_once(f32, "<f4", "<f2")},
      {"complex64", replace_once(f32, "<f4", "<c8")},
      {"bytes", with_dict(f32, "{'descr': '|S4', 'fortran_order': False, 'shape': (4,), }")}};
  for (const auto& [name, bytes] : cases) {
    INFO("input dtype " << name);
    const std::string path = s.input(name + ".npy");
    write_bytes(path, bytes);
    require_rejected(
        s, {"--method", "exact_topk", "--density", "0.5", good, path, "--out", s.prefix()},
        "dtype");
  }
}

TEST_CASE("bad input: not a 1-D array") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 100));
  const std::string f32 = npy_of(normal_values(4, 101));
  xt::xarray<float> matrix = {{1.0f, 2.0f}, {3.0f, 4.0f}};
  const std::vector<std::pair<std::string, std::string>> cases{
      {"2-D", xt::dump_npy(matrix)},
      {"0-D", with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }")},
      {"3-D", with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 4), }")},
      {"2-D Fortran order",
       with_dict(f32, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }")}};
  for (const auto& [name, bytes] : cases) {
    INFO("input " << name);
    const std::string path = s.input("input.npy");
    write_bytes(path, bytes);
    require_rejected(
        s, {"--method", "exact_topk", "--density", "0.5", good, path, "--out", s.prefix()}, "1-D");
  }
}

TEST_CASE("bad input: not a valid .npy file") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 110));
  const std::string f32 = npy_of(normal_values(4, 111));
  std::string version3 = f32;
  version3[6] = '\x03';
  std::string version11 = f32;
  version11[7] = '\x01';
  std::string bad_magic = f32;
  bad_magic[1] = 'X';
  std::string huge_v1_header = f32;
  huge_v1_header[8] = '\xff';
  huge_v1_header[9] = '\xff';
  std::string no_newline = f32;
  REQUIRE(no_newline[10 + 117] == '\n');
  no_newline[10 + 117] = ' ';
  const std::string raw = raw_bytes(normal_values(4, 112));
  const std::vector<std::tuple<std::string, std::string, std::string>> cases{
      {"text", "this is not a .npy file\n", "not a .npy file"},
      {"empty", "", "not a .npy file"},
      {"short magic", f32.substr(0, 4), "not a .npy file"},
      {"bad magic", bad_magic, "not a .npy file"},
      {"version 3.0", version3, "version"},
      {"version 1.1", version11, "version"},
      {"cut in header length", f32.substr(0, 9), "truncated"},
      {"cut in header", f32.substr(0, 40), "truncated"},
      {"header length 65535", huge_v1_header, "header"},
      {"version 2 header length 2^32-1",
       make_npy(2, "{}", 116, raw).replace(8, 4, "\xff\xff\xff\xff"), "header"},
      {"header without newline", no_newline, "header"},
      {"misspelt key", replace_once(f32, "'shape'", "'shapx'"), "header"},
      {"keys out of order",
       with_dict(f32, "{'fortran_order': False, 'descr': '<f4', 'shape': (4,), }"), "header"},
      {"non-numeric shape",
       with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (abc,), }"), "header"},
      {"negative shape",
       with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }"), "header"},
      {"bad fortran_order", with_dict(f32, "{'descr': '<f4', 'fortran_order': 0, 'shape': (4,), }"),
       "header"},
      {"structured dtype",
       with_dict(f32, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }"),
       "header"},
      {"empty dictionary", with_dict(f32, "{}"), "header"},
      {"blank header", with_dict(f32, ""), "header"},
      {"data cut short", f32.substr(0, f32.size() - 1), "truncated"},
      {"shape larger than the data",
       with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }"),
       "truncated"},
      {"shape beyond 32-bit indices",
       with_dict(f32, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999,), }"),
       "elements"},
      {"shape beyond 64 bits",
       with_dict(f32,
                 "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }"),
       "elements"},
      {"trailing bytes", f32 + "junk", "unexpected bytes"}};
  for (const auto& [name, bytes, expected] : cases) {
    INFO("input: " << name);
    const std::string path = s.input("input.npy");
    write_bytes(path, bytes);
    require_rejected(
        s, {"--method", "exact_topk", "--density", "0.5", good, path, "--out", s.prefix()},
        expected);
  }
}

TEST_CASE("bad input: an unreadable path") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 120));
  const std::vector<std::pair<std::string, std::string>> cases{
      {s.input("missing.npy"), "cannot read"},
      {s.input(""), "directory"}, // the in/ directory itself
      {"", "empty"}};
  for (const auto& [path, expected] : cases) {
    require_rejected(
        s, {"--method", "exact_topk", "--density", "0.5", good, path, "--out", s.prefix()},
        expected);
  }
}

TEST_CASE("bad input: NaN in a gradient") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 130));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> cases{{1.0f, 2.0f, 3.0f, nan},
                                              {-nan, 2.0f, 3.0f, 4.0f},
                                              {1.0f, std::numeric_limits<float>::signaling_NaN(),
                                               std::numeric_limits<float>::infinity(), 4.0f}};
  for (const std::string method : {"exact_topk", "none"}) {
    for (const auto& values : cases) {
      const std::string path = write_input(s, "nan.npy", values);
      require_rejected(s, {"--method", method, "--density", "0.5", good, path, "--out", s.prefix()},
                       "NaN");
    }
  }
}

TEST_CASE("bad input: inputs of different lengths") {
  const scratch s;
  const std::string a = write_input(s, "a.npy", normal_values(10, 140));
  const std::string b = write_input(s, "b.npy", normal_values(10, 141));
  const std::string c = write_input(s, "c.npy", normal_values(11, 142));
  const std::string e = write_input(s, "e.npy", {});
  for (const std::string method : {"exact_topk", "fp16"}) {
    require_rejected(s, {"--method", method, "--density", "0.5", a, b, c, "--out", s.prefix()},
                     "elements");
    require_rejected(
        s, {"--method", method, "--density", "0.5", "--error-feedback", e, a, "--out", s.prefix()},
        "elements");
  }
}

TEST_CASE("bad input: density out of range or not a number") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 150));
  for (const std::string density :
       {"0", "-0", "1.5", "-0.1", "1.0000001", "nan", "inf", "abc", "", "0.5x", "1e999", "0,5"}) {
    for (const std::string method : {"exact_topk", "reused_threshold", "fp16"}) {
      INFO("--density [" << density << "] with " << method);
      require_rejected(s, {"--method", method, "--density", density, good, "--out", s.prefix()},
                       "--density");
    }
  }
  for (const std::string& method : selecting_methods) {
    INFO("no --density with " << method);
    require_rejected(s, {"--method", method, good, "--out", s.prefix()}, "--density");
  }
  require_rejected(s, {"--method", "exact_topk", good, "--out", s.prefix(), "--density"},
                   "--density");
  require_rejected(
      s,
      {"--method", "exact_topk", "--density", "0.1", "--density", "0.2", good, "--out", s.prefix()},
      "--density");
}

TEST_CASE("bad input: interval below 1 or not an integer") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 160));
  for (const std::string interval : {"0", "-1", "abc", "1.5", "", "+-3", "99999999999999999999"}) {
    INFO("--interval [" << interval << "]");
    require_rejected(s,
                     {"--method", "reused_threshold", "--density", "0.5", "--interval", interval,
                      good, "--out", s.prefix()},
                     "--interval");
  }
}

TEST_CASE("bad input: unknown options and unparsable values") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 170));
  const std::string out = s.prefix();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--method", "exact_topk", "--density", "0.5", "--bogus", good, "--out", out}, "--bogus"},
      {{"--method", "exact_topk", "--density", "0.5", "-x", good, "--out", out}, "-x"},
      {{"--method", "topk", "--density", "0.5", good, "--out", out}, "unknown method"},
      {{"--method", "", "--density", "0.5", good, "--out", out}, "unknown method"},
      {{"--density", "0.5", good, "--out", out}, "--method"},
      {{"--method", "exact_topk", "--density", "0.5", good}, "--out"},
      {{"--method", "exact_topk", "--density", "0.5", good, "--out", ""}, "--out"},
      {{"--method", "exact_topk", "--density", "0.5", good, "--out",
        s.prefix("missing-dir/result")},
       "does not exist"},
      {{"--method", "exact_topk", "--density", "0.5", "--out", out}, "INPUT"},
      {{"--method", "sampled_topk", "--density", "0.5", "--seed", "-1", good, "--out", out},
       "--seed"},
      {{"--method", "sampled_topk", "--density", "0.5", "--seed", "abc", good, "--out", out},
       "--seed"},
      {{"--method", "sampled_topk", "--density", "0.5", "--seed", "18446744073709551616", good,
        "--out", out},
       "--seed"},
      {{"--method", "exact_topk", "--density", "0.5", "--error-feedback=maybe", good, "--out", out},
       "--error-feedback"}};
  for (const auto& [args, expected] : cases) {
    require_rejected(s, args, expected);
  }
}

TEST_CASE("bad input: an output path that is a directory") {
  const scratch s;
  const std::string good = write_input(s, "good.npy", normal_values(4, 180));
  fs::create_directory(s.output(1, "values"));
  const run_result r =
      s.run({"--method", "exact_topk", "--density", "0.5", good, good, "--out", s.prefix()});
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.rfind(error_prefix + "--out: ", 0) == 0);
  CHECK(s.outputs() == std::vector<std::string>{"result.1.values.npy"}); // only the directory
  CHECK(fs::is_empty(s.output(1, "values")));
}
