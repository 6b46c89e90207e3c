// SPDX-License-Identifier: Apache-2.0
// gradcomp-compress: runs one gradcomp compressor over successive iterations of one layer's
// gradient, stored as 1-D float32 .npy files, and writes the selected (index, value) pairs (for
// PowerSGD: its low-rank approximation) as .npy files plus one JSON line of statistics per
// iteration. Usage: docs/gradcomp-compress.md.
#include <gradcomp/gradcomp.hpp>
#if GRADCOMP_COMPRESS_WITH_BLAS
#include <gradcomp/blas/cblas_gemm.hpp>
#endif

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../common/tool_support.hpp"
#include "npy_input.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view program_name = "gradcomp-compress";
using gradcomp_tools::cat; // concatenates the streamable arguments into one string
using gradcomp_tools::output_error;
using gradcomp_tools::parse_number;
using gradcomp_tools::usage_error;

// ---- the methods ---------------------------------------------------------------------------

enum class method {
  exact_topk,
  sampled_topk,
  gaussian_threshold,
  lognormal_threshold,
  reused_threshold,
  random_k,
  signsgd,
  terngrad,
  qsgd,
  powersgd,
  fp16,
  bf16,
  none
};

struct method_name {
  std::string_view name;
  method id;
  bool needs_density; //!< false for the dense and quantizing methods, which send every value.
};

constexpr std::array<method_name, 13> method_names{{
    {"exact_topk", method::exact_topk, true},
    {"sampled_topk", method::sampled_topk, true},
    {"gaussian_threshold", method::gaussian_threshold, true},
    {"lognormal_threshold", method::lognormal_threshold, true},
    {"reused_threshold", method::reused_threshold, true},
    {"random_k", method::random_k, true},
    {"signsgd", method::signsgd, false},
    {"terngrad", method::terngrad, false},
    {"qsgd", method::qsgd, false},
    {"powersgd", method::powersgd, false},
    {"fp16", method::fp16, false},
    {"bf16", method::bf16, false},
    {"none", method::none, false},
}};

//! The method names separated by ", " (for help and error messages).
std::string method_list() {
  std::string list;
  for (const method_name& m : method_names) {
    list += list.empty() ? "" : ", ";
    list += m.name;
  }
  return list;
}

//! Looks a method up by name. @throws usage_error for an unknown name.
const method_name& find_method(std::string_view name) {
  for (const method_name& m : method_names) {
    if (m.name == name) {
      return m;
    }
  }
  throw usage_error(
      cat("--method: unknown method '", name, "' (expected one of ", method_list(), ")"));
}

// ---- input: 1-D float32 .npy files ---------------------------------------------------------

//! One input gradient and the path it came from.
struct gradient_file {
  std::string path;
  std::vector<float> values;
};

//! @brief Loads a 1-D float32 .npy file (see gradcomp_tools::read_npy_float32_1d for what is
//! accepted) after checking that `path` names a readable regular file.
//! @throws usage_error with a one-line reason for anything but such a file, or for NaN values.
gradient_file load_gradient(const std::string& path) {
  if (path.empty()) {
    throw usage_error("input path is empty");
  }
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw usage_error(cat("cannot read input '", path,
                          "': " + (ec ? ec.message() : std::string("no such file"))));
  }
  if (fs::is_directory(status)) {
    throw usage_error(cat("input '", path, "' is a directory, not a .npy file"));
  }
  if (!fs::is_regular_file(status)) {
    throw usage_error(cat("input '", path, "' is not a regular file"));
  }
  const std::uintmax_t file_bytes = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) {
    throw usage_error(cat("cannot open input '", path, "' for reading"));
  }
  try {
    return {path, gradcomp_tools::read_npy_float32_1d(in, file_bytes, path)};
  } catch (const gradcomp_tools::npy_input_error& e) {
    throw usage_error(e.what());
  }
}

// ---- compression ---------------------------------------------------------------------------

//! The validated command line.
struct settings {
  method_name method;
  std::optional<double> density;
  std::uint64_t interval = 10;
  std::uint64_t seed = 0;
  std::uint32_t levels = 15;
  bool error_feedback = false;
  std::string prefix;
  std::size_t rank = 2; //!< powersgd: the approximation rank (--rank).
  std::size_t rows = 0; //!< powersgd: the matrix view's rows (--shape); 0: not given.
  std::size_t cols = 0; //!< powersgd: the matrix view's columns.
  //! signsgd, terngrad, qsgd: values per scale (--quantization-bucket); empty: the default.
  std::optional<std::uint32_t> bucket;
};

//! What one iteration produced: the selected pairs (all pairs for a dense message) and stats.
struct iteration_result {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  gradcomp::selection_stats stats;
  double seconds = 0.0;
  std::size_t wire_bytes = 0; //!< the message's encoded size (u32 indices).
};

//! Runs `compress(input, message)` on every input in order, timing each call.
template <class Compress>
std::vector<iteration_result> run_iterations(const std::vector<gradient_file>& inputs,
                                             Compress&& compress) {
  std::vector<iteration_result> results;
  results.reserve(inputs.size());
  gradcomp::sparse_message message; // reused, as in training: steady state allocates nothing
  for (const gradient_file& input : inputs) {
    iteration_result r;
    const auto start = std::chrono::steady_clock::now();
    r.stats = compress(input.values, message);
    const auto stop = std::chrono::steady_clock::now();
    r.seconds = std::chrono::duration<double>(stop - start).count();
    if (message.dense) {
      r.indices.resize(message.values.size());
      std::iota(r.indices.begin(), r.indices.end(), std::uint32_t{0});
    } else {
      r.indices = message.indices;
    }
    r.values = message.values;
    r.wire_bytes = gradcomp::encoded_size_bytes(message, gradcomp::index_encoding::u32);
    results.push_back(std::move(r));
  }
  return results;
}

//! Compresses every input with one compressor object (so its state carries over), wrapped in
//! gradcomp::error_feedback when asked.
template <gradcomp::compressor C>
std::vector<iteration_result>
run_compressor(C compressor, bool error_feedback, const std::vector<gradient_file>& inputs) {
  if (error_feedback) {
    const std::size_t n = inputs.empty() ? 0 : inputs.front().values.size();
    gradcomp::error_feedback<C> layer(n, std::move(compressor));
    return run_iterations(inputs, [&](const std::vector<float>& x, gradcomp::sparse_message& m) {
      return layer.compress(x, m);
    });
  }
  return run_iterations(inputs, [&](const std::vector<float>& x, gradcomp::sparse_message& m) {
    return compressor.compress(x, m);
  });
}

//! @brief PowerSGD (gradcomp::powersgd_layer, Vogels et al. 2019) on one process: each input,
//! viewed as the rows x cols matrix of --shape, is approximated at rank r with the layer's own
//! error feedback (its residual) and warm start; the two allreduces of a multi-worker run
//! average over one worker here, so P and Q pass as computed. Writes the approximation P Q^T
//! (every value: what every worker applies) and, as wire_bytes, the 4 (rows + cols) r bytes of
//! the two factors. @throws usage_error when the build has no BLAS or the layer does not
//! compress at this rank (min_compression_rate 2).
std::vector<iteration_result> run_powersgd(const settings& s,
                                           const std::vector<gradient_file>& inputs) {
#if GRADCOMP_COMPRESS_WITH_BLAS
  const gradcomp::powersgd_options o{.rank = s.rank, .seed = s.seed};
  if (!gradcomp::powersgd_compresses(s.rows, s.cols, o)) {
    throw usage_error(cat("--method powersgd: a ", s.rows, " x ", s.cols, " layer at rank ",
                          std::min({s.rank, s.rows, s.cols}),
                          " does not compress (its factors need at least half its values)"));
  }
  gradcomp::powersgd_layer<gradcomp::blas::cblas_gemm> layer(s.rows, s.cols, o, 0);
  std::vector<float> p(layer.p_elements()), q(layer.q_elements());
  std::vector<iteration_result> results;
  results.reserve(inputs.size());
  for (const gradient_file& input : inputs) {
    iteration_result r;
    r.values.resize(input.values.size());
    const auto start = std::chrono::steady_clock::now();
    layer.compute_p(input.values, p); // one worker: P is its own mean
    layer.compute_q(p, q);
    layer.finish(p, q, r.values);
    const auto stop = std::chrono::steady_clock::now();
    r.seconds = std::chrono::duration<double>(stop - start).count();
    r.indices.resize(r.values.size());
    std::iota(r.indices.begin(), r.indices.end(), std::uint32_t{0});
    r.stats.numel = r.values.size();
    r.stats.k_target = r.values.size();
    r.stats.k_selected = r.values.size();
    r.wire_bytes = 4 * (p.size() + q.size());
    results.push_back(std::move(r));
  }
  return results;
#else
  (void)inputs;
  throw usage_error(cat("--method powersgd needs a BLAS with cblas.h (gradcomp::blas), which this "
                        "build of ",
                        program_name, " lacks"));
#endif
}

//! Builds the compressor the settings ask for and runs it over the inputs.
std::vector<iteration_result> compress_all(const settings& s,
                                           const std::vector<gradient_file>& inputs) {
  const double d = s.density.value_or(1.0);
  const bool ef = s.error_feedback;
  switch (s.method.id) {
  case method::exact_topk:
    return run_compressor(gradcomp::exact_top_k({.density = d}), ef, inputs);
  case method::sampled_topk:
    return run_compressor(gradcomp::sampled_threshold({.density = d, .seed = s.seed}), ef, inputs);
  case method::gaussian_threshold:
    return run_compressor(gradcomp::gaussian_threshold({.density = d}), ef, inputs);
  case method::lognormal_threshold:
    return run_compressor(gradcomp::lognormal_threshold({.density = d}), ef, inputs);
  case method::reused_threshold:
    return run_compressor(gradcomp::reused_threshold({.density = d, .interval = s.interval}), ef,
                          inputs);
  case method::random_k:
    return run_compressor(gradcomp::random_k({.density = d, .seed = s.seed}), ef, inputs);
  case method::signsgd:
  case method::terngrad:
  case method::qsgd:
    return gradcomp::with_quantizer(
        s.method.name, {.seed = s.seed, .levels = s.levels, .bucket_elements = s.bucket},
        [&](auto q) { return run_compressor(std::move(q), ef, inputs); });
  case method::powersgd:
    return run_powersgd(s, inputs);
  case method::fp16:
    return run_compressor(gradcomp::dense(gradcomp::value_type::fp16), ef, inputs);
  case method::bf16:
    return run_compressor(gradcomp::dense(gradcomp::value_type::bf16), ef, inputs);
  case method::none:
    return run_compressor(gradcomp::dense(gradcomp::value_type::fp32), ef, inputs);
  }
  throw std::logic_error("unhandled method");
}

// ---- output --------------------------------------------------------------------------------

//! One file to write: its path and its complete contents.
struct output_file {
  std::string path;
  std::string bytes;
};

//! The .npy files of every iteration, serialized in memory with xt::dump_npy.
std::vector<output_file> serialize(const std::string& prefix,
                                   const std::vector<iteration_result>& results) {
  std::vector<output_file> files;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string stem = cat(prefix, ".", i);
    files.push_back({stem + ".indices.npy", xt::dump_npy(xt::adapt(results[i].indices))});
    files.push_back({stem + ".values.npy", xt::dump_npy(xt::adapt(results[i].values))});
  }
  return files;
}

//! Checks, before any work, that the outputs can be created: a non-empty prefix, an existing
//! directory, and no output path that is a directory. @throws usage_error otherwise.
void check_output_prefix(const std::string& prefix, std::size_t iterations) {
  if (prefix.empty()) {
    throw usage_error("--out: the output prefix is empty");
  }
  const fs::path parent = fs::path(prefix).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    throw usage_error(cat("--out: output directory '", parent.string(),
                          "' does not exist or is not a directory"));
  }
  for (std::size_t i = 0; i < iterations; ++i) {
    for (const char* kind : {"indices", "values"}) {
      const std::string path = cat(prefix, ".", i, ".", kind, ".npy");
      if (fs::is_directory(path, ec)) {
        throw usage_error(cat("--out: output path '", path, "' is a directory"));
      }
    }
  }
}

//! Writes every file; on the first failure removes the files already written and throws.
void write_all(const std::vector<output_file>& files) {
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::ofstream out(files[i].path, std::ios::binary | std::ios::trunc);
    if (out) {
      out.write(files[i].bytes.data(), static_cast<std::streamsize>(files[i].bytes.size()));
      out.close();
    }
    if (!out) {
      std::error_code ignored;
      for (std::size_t j = 0; j <= i; ++j) {
        fs::remove(files[j].path, ignored);
      }
      throw output_error(cat("cannot write '", files[i].path, "'; no output was kept"));
    }
  }
}

//! The JSON statistics line of iteration `i`.
nlohmann::ordered_json stats_json(std::size_t i, const settings& s, const iteration_result& r) {
  nlohmann::ordered_json j;
  j["iteration"] = i;
  j["method"] = s.method.name;
  j["numel"] = r.stats.numel;
  j["k_target"] = r.stats.k_target;
  j["k_selected"] = r.stats.k_selected;
  j["threshold"] = r.stats.threshold;
  j["fallback"] = r.stats.fallback;
  j["seconds"] = r.seconds;
  j["wire_bytes"] = r.wire_bytes;
  return j;
}

// ---- command line --------------------------------------------------------------------------

//! The raw option strings, validated by make_settings().
struct raw_options {
  std::string method;
  std::string density;
  std::string interval;
  std::string seed;
  std::string levels;
  std::string bucket;
  std::string rank;
  std::string shape;
  bool error_feedback = false;
  std::vector<std::string> inputs;
  std::string prefix;
};

//! Declares the command line on `app`, storing into `raw`.
void declare_options(CLI::App& app, raw_options& raw) {
  app.add_option("--method", raw.method, "Compressor: " + method_list())
      ->required()
      ->type_name("M");
  app.add_option("--density", raw.density,
                 "Fraction of elements to send, in (0, 1]; k = ceil(D x n). Required except "
                 "for the dense methods fp16, bf16 and none, which send every value")
      ->type_name("D");
  app.add_option("--interval", raw.interval,
                 "reused_threshold: exact top-k every S calls (S >= 1, default 10)")
      ->type_name("S");
  app.add_flag("--error-feedback", raw.error_feedback,
               "Keep the unsent part of each iteration and add it to the next one");
  app.add_option("--seed", raw.seed,
                 "sampled_topk, random_k, terngrad, qsgd: seed of the sample offsets / the "
                 "choice / the stochastic rounding (default 0)")
      ->type_name("N");
  app.add_option("--levels", raw.levels,
                 "qsgd: quantization levels per sign, S in [1, 32768] (default 15: 5 bits per "
                 "value)")
      ->type_name("S");
  app.add_option("--quantization-bucket", raw.bucket,
                 "signsgd, terngrad, qsgd: values per scale, B in [0, 2^32) (0: one scale per "
                 "input; default: qsgd 512, signsgd and terngrad 0)")
      ->type_name("B");
  app.add_option("--rank", raw.rank,
                 "powersgd: the approximation rank r >= 1 (default 2; capped at min(rows, "
                 "cols))")
      ->type_name("R");
  app.add_option("--shape", raw.shape,
                 "powersgd: the matrix view ROWSxCOLS of each input (rows x cols = its length), "
                 "required for powersgd")
      ->type_name("ROWSxCOLS");
  app.add_option("--out", raw.prefix,
                 "Output prefix: writes PREFIX.<i>.indices.npy and PREFIX.<i>.values.npy")
      ->required()
      ->type_name("PREFIX");
  app.add_option("INPUT", raw.inputs,
                 "1-D float32 .npy gradients of one layer, one per iteration, in order")
      ->required()
      ->type_name("INPUT.npy");
  app.footer("Prints one JSON object per iteration on stdout. Exit status: 0 on success, 2 for "
             "a bad command line or input (nothing is written), 1 if the outputs could not be "
             "written.");
}

//! The integer >= 1 that `option` was given as `text`. @throws usage_error naming it otherwise.
std::size_t parse_positive(const char* option, const std::string& text) {
  const auto value = parse_number<std::int64_t>(option, text, "an integer >= 1");
  if (value < 1) {
    throw usage_error(cat(option, ": ", value, " is below the minimum 1"));
  }
  return static_cast<std::size_t>(value);
}

//! Validates the raw options. @throws usage_error naming the first bad one.
settings make_settings(const raw_options& raw, const CLI::App& app) {
  settings s{find_method(raw.method),
             std::nullopt,
             10,
             0,
             15,
             raw.error_feedback,
             raw.prefix,
             2,
             0,
             0,
             std::nullopt};
  if (app.count("--rank") > 0) {
    s.rank = parse_positive("--rank", raw.rank);
  }
  if (app.count("--shape") > 0) {
    const std::size_t x = raw.shape.find('x');
    if (x == std::string::npos) {
      throw usage_error(cat("--shape: '", raw.shape, "' is not ROWSxCOLS (e.g. 512x3136)"));
    }
    s.rows = parse_positive("--shape", raw.shape.substr(0, x));
    s.cols = parse_positive("--shape", raw.shape.substr(x + 1));
  } else if (s.method.id == method::powersgd) {
    throw usage_error("--shape ROWSxCOLS is required for --method powersgd");
  }
  if (app.count("--density") > 0) {
    const double d = parse_number<double>("--density", raw.density, "a number in (0, 1]");
    if (!(d > 0.0 && d <= 1.0)) {
      throw usage_error(cat("--density: ", raw.density, " is outside (0, 1]"));
    }
    s.density = d;
  } else if (s.method.needs_density) {
    throw usage_error(cat("--density is required for --method ", s.method.name));
  }
  if (app.count("--interval") > 0) {
    s.interval = parse_positive("--interval", raw.interval);
  }
  if (app.count("--seed") > 0) {
    s.seed = parse_number<std::uint64_t>("--seed", raw.seed, "an unsigned 64-bit integer");
  }
  if (app.count("--levels") > 0) {
    const auto levels = parse_number<std::int64_t>("--levels", raw.levels, "an integer >= 1");
    if (levels < 1 || levels > gradcomp::max_quantization_levels) {
      throw usage_error(
          cat("--levels: ", levels, " is outside [1, ", gradcomp::max_quantization_levels, "]"));
    }
    s.levels = static_cast<std::uint32_t>(levels);
  }
  if (app.count("--quantization-bucket") > 0) {
    const auto bucket =
        parse_number<std::int64_t>("--quantization-bucket", raw.bucket, "an integer >= 0");
    if (bucket < 0 || bucket > std::int64_t{UINT32_MAX}) {
      throw usage_error(cat("--quantization-bucket: ", bucket, " is outside [0, 4294967295]"));
    }
    s.bucket = static_cast<std::uint32_t>(bucket);
  }
  return s;
}

//! The whole program after command-line parsing; returns the exit status.
int run(const settings& s, const std::vector<std::string>& paths) {
  std::vector<gradient_file> inputs;
  inputs.reserve(paths.size());
  for (const std::string& path : paths) {
    inputs.push_back(load_gradient(path));
    const gradient_file& first = inputs.front();
    const gradient_file& last = inputs.back();
    if (last.values.size() != first.values.size()) {
      throw usage_error(cat("input '", last.path, "' has ", last.values.size(), " elements but '",
                            first.path, "' has ", first.values.size(),
                            "; all inputs must be iterations of one layer"));
    }
  }
  if (s.method.id == method::powersgd && !inputs.empty() &&
      inputs.front().values.size() != s.rows * s.cols) {
    throw usage_error(cat("--shape ", s.rows, "x", s.cols, " has ", s.rows * s.cols,
                          " elements but input '", inputs.front().path, "' has ",
                          inputs.front().values.size()));
  }
  check_output_prefix(s.prefix, inputs.size());

  const std::vector<iteration_result> results = compress_all(s, inputs);
  const std::vector<output_file> files = serialize(s.prefix, results);
  write_all(files);
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::cout << stats_json(i, s, results[i]).dump() << '\n';
  }
  std::cout.flush();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app("Compresses successive iterations of one layer's gradient (1-D float32 .npy "
               "files) with a gradcomp compressor.",
               std::string(program_name));
  raw_options raw;
  declare_options(app, raw);
  return gradcomp_tools::tool_main<CLI::ParseError>(program_name, app, argc, argv, [&] {
    try {
      return run(make_settings(raw, app), raw.inputs);
    } catch (const gradcomp::wire_error& e) { // a bad input: exit code 2 like usage_error
      throw usage_error(e.what());
    }
  });
}
