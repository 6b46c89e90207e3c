// SPDX-License-Identifier: Apache-2.0
// gradcomp._core: the compiled half of the gradcomp.torch package (python/gradcomp/torch.py).
// It exposes gradcomp's host compressors with error feedback (compress the accumulated bucket,
// encode gradcomp's wire format) and the receiver's aggregation (decode every rank's message and
// average them), on NumPy views of CPU tensors (tensor.numpy() shares the memory: no copy). The
// GIL is released while a call computes. Errors: std::invalid_argument -> ValueError (pybind11's
// translation), gradcomp::wire_error and gradcomp::state_error -> ValueError as well.
// HookState(method="auto") decides with the library's own rule through choose_exchange(),
// dense_below_elements(), CriticalRegime, fit_ring_allreduce() and sum_of_squares()
// (gradcomp::schedule::choose_exchange and dense_below_elements,
// gradcomp::schedule::critical_regime, the fit of gradcomp::mpi::calibrate_ring_allreduce and
// gradcomp::sum_of_squares: the rule of gradcomp-train --method auto).
// build_info() reports how this extension was compiled (python -m gradcomp.info prints it).
#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/any_compressor.hpp>
#include <gradcomp/compressor/by_name.hpp>
#include <gradcomp/compressor/density_schedule.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/local_clipping.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/fit.hpp>
#include <gradcomp/cost/transport.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/schedule/critical_regime.hpp>
#include <gradcomp/schedule/exchange_choice.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>
#include <gradcomp/version.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <span>
#include <string>
#include <utility>
#include <vector>

// What build_info() reports. The extension compiles gradcomp's core headers only: it links
// neither MPI nor a BLAS nor CUDA, so these are 0 unless a build defines them otherwise.
#ifndef GRADCOMP_PYTHON_WITH_MPI
#define GRADCOMP_PYTHON_WITH_MPI 0
#endif
#ifndef GRADCOMP_PYTHON_WITH_BLAS
#define GRADCOMP_PYTHON_WITH_BLAS 0
#endif
#ifndef GRADCOMP_PYTHON_WITH_CUDA
#define GRADCOMP_PYTHON_WITH_CUDA 0
#endif
// The build that compiled the extension: "cmake" (python/CMakeLists.txt) or "setuptools"
// (setup.py), and its build type (CMake's configuration; setup.py's "Release").
#ifndef GRADCOMP_PYTHON_BUILD_SYSTEM
#define GRADCOMP_PYTHON_BUILD_SYSTEM "unknown"
#endif
#ifndef GRADCOMP_PYTHON_BUILD_TYPE
#define GRADCOMP_PYTHON_BUILD_TYPE "unknown"
#endif

namespace py = pybind11;

namespace {

using float_array = py::array_t<float, py::array::c_style>;
using byte_array = py::array_t<std::uint8_t, py::array::c_style>;
using int64_array = py::array_t<std::int64_t, py::array::c_style>;

//! A writable float span over a C-contiguous float32 NumPy array (refuses a read-only one).
std::span<float> writable(float_array& a, const char* what) {
  if (!a.writeable()) {
    throw std::invalid_argument(std::string(what) + " is read-only");
  }
  return {a.mutable_data(), static_cast<std::size_t>(a.size())};
}

std::span<const float> readable(const float_array& a) {
  return {a.data(), static_cast<std::size_t>(a.size())};
}

//! gradcomp._core.Compressor: one bucket's compressor (its own state: the reused threshold and
//! its interval position, the sampled threshold's generator).
class compressor {
public:
  compressor(const std::string& method,
             double density,
             std::uint64_t interval,
             std::uint64_t seed,
             unsigned threads,
             const std::string& nonfinite,
             std::uint32_t levels,
             std::optional<std::uint32_t> bucket_elements)
      : method_(method), dense_(gradcomp::is_dense_compressor_name(method)),
        compressor_(method,
                    {.density = density,
                     .interval = interval,
                     .seed = seed,
                     .levels = levels,
                     .bucket_elements = bucket_elements,
                     .threads = threads,
                     .nonfinite = gradcomp::nonfinite_policy_from_string(nonfinite)}) {}

  //! Error feedback + selection + encoding: acc = residual + grad (DGC's momentum correction
  //! first when momentum > 0: velocity = momentum x velocity + grad accumulated instead of grad,
  //! and zeroed where sent unless factor_masking is false), message = C(acc), residual = acc -
  //! message; returns the message in gradcomp's wire format and the call's statistics.
  py::tuple compress(float_array& residual,
                     const float_array& grad,
                     std::optional<float_array> velocity,
                     float momentum,
                     bool factor_masking) {
    const std::span<float> r = writable(residual, "residual");
    const std::span<const float> g = readable(grad);
    std::span<float> v;
    if (momentum > 0.0f) {
      if (!velocity) {
        throw std::invalid_argument("momentum " + std::to_string(momentum) +
                                    " needs a velocity array");
      }
      v = writable(*velocity, "velocity");
    }
    gradcomp::selection_stats st;
    double seconds = 0.0;
    {
      py::gil_scoped_release unlocked;
      const auto t0 = std::chrono::steady_clock::now();
      st = compressor_.compress_with_feedback(
          r, v, g, {.momentum = momentum, .factor_masking = factor_masking}, message_);
      gradcomp::encode(message_, gradcomp::index_encoding::delta_varint, wire_);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    byte_array out(static_cast<py::ssize_t>(wire_.size()));
    std::memcpy(out.mutable_data(), wire_.data(), wire_.size());
    return py::make_tuple(out, stats_dict(st, wire_.size(), seconds));
  }

  //! Dense methods only: the rounded values (fp16 / bf16 representable, as float32) into `out`,
  //! with the rounding error kept in the residual. Returns the statistics.
  py::dict compress_dense(float_array& residual, const float_array& grad, float_array& out) {
    if (!dense_) {
      throw std::invalid_argument("compress_dense: method '" + method_ +
                                  "' is not dense (fp32, fp16 or bf16)");
    }
    const std::span<float> r = writable(residual, "residual");
    const std::span<float> o = writable(out, "out");
    const std::span<const float> g = readable(grad);
    gradcomp::selection_stats st;
    double seconds = 0.0;
    {
      py::gil_scoped_release unlocked;
      const auto t0 = std::chrono::steady_clock::now();
      st = compressor_.compress_with_feedback(r, {}, g, {}, message_);
      gradcomp::decompress(message_, o);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return stats_dict(st, 0, seconds);
  }

  [[nodiscard]] py::bytes state() const {
    const std::vector<std::byte> b = gradcomp::save_state(compressor_);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }

  void load_state(const py::bytes& bytes) {
    const std::string_view s = bytes;
    try {
      gradcomp::load_state(compressor_, {reinterpret_cast<const std::byte*>(s.data()), s.size()});
    } catch (const gradcomp::state_error& e) {
      throw std::invalid_argument(e.what());
    }
  }

  [[nodiscard]] const std::string& method() const noexcept { return method_; }

  //! The fraction of values the next calls send (sparse methods: DGC's density warm-up lowers
  //! it between iterations; error feedback keeps everything unsent). Raises ValueError naming
  //! the value outside (0, 1], or the method when it has no density.
  void set_density(double density) {
    if (!compressor_.has_density()) {
      throw std::invalid_argument("set_density: method '" + method_ + "' has no density");
    }
    compressor_.set_density(density);
  }

private:
  static py::dict
  stats_dict(const gradcomp::selection_stats& st, std::size_t bytes, double seconds) {
    py::dict d;
    d["numel"] = st.numel;
    d["k_target"] = st.k_target;
    d["k_selected"] = st.k_selected;
    d["threshold"] = st.threshold;
    d["exact"] = st.exact;
    d["fallback"] = st.fallback;
    d["wire_bytes"] = bytes;
    d["compression_seconds"] = seconds;
    return d;
  }

  std::string method_;
  bool dense_ = false;
  gradcomp::any_compressor compressor_;
  gradcomp::sparse_message message_;
  std::vector<std::byte> wire_;
};

//! The receiver's side of the sparse allgather: every rank's message sits in row r of
//! `gathered` (ranks rows of equal length), `offset` bytes into the row and `sizes[r]` bytes
//! long; each is decoded (validated: a
//! malformed message raises ValueError naming the rank) and added into `out` (zeroed first) in
//! rank order, then `out` is divided by `divisor` (the number of ranks: the average). The same
//! bytes give the same bits on every rank. Returns the number of values received.
std::uint64_t decode_average(const byte_array& gathered,
                             const int64_array& sizes,
                             float_array& out,
                             float divisor,
                             std::int64_t offset) {
  const std::span<float> o = writable(out, "out");
  const auto ranks = static_cast<std::size_t>(sizes.size());
  if (ranks == 0 || gathered.size() % static_cast<py::ssize_t>(ranks) != 0) {
    throw std::invalid_argument("gathered has " + std::to_string(gathered.size()) +
                                " bytes, not a multiple of " + std::to_string(ranks) + " ranks");
  }
  if (!(divisor > 0.0f)) {
    throw std::invalid_argument("divisor " + std::to_string(divisor) + " is not positive");
  }
  const std::size_t row = static_cast<std::size_t>(gathered.size()) / ranks;
  if (offset < 0 || static_cast<std::uint64_t>(offset) > row) {
    throw std::invalid_argument("offset " + std::to_string(offset) + " is outside [0, " +
                                std::to_string(row) + "] (the bytes per rank)");
  }
  const std::size_t capacity = row - static_cast<std::size_t>(offset);
  const auto* base = reinterpret_cast<const std::byte*>(gathered.data()) + offset;
  const std::int64_t* size = sizes.data();
  for (std::size_t r = 0; r < ranks; ++r) {
    if (size[r] < 0 || static_cast<std::uint64_t>(size[r]) > capacity) {
      throw std::invalid_argument("rank " + std::to_string(r) + "'s message size " +
                                  std::to_string(size[r]) + " is outside [0, " +
                                  std::to_string(capacity) + "]");
    }
  }
  std::uint64_t received = 0;
  std::string failure;
  {
    py::gil_scoped_release unlocked;
    std::fill(o.begin(), o.end(), 0.0f);
    gradcomp::sparse_message m;
    for (std::size_t r = 0; r < ranks && failure.empty(); ++r) {
      try {
        gradcomp::decode({base + r * row, static_cast<std::size_t>(size[r])}, m);
        gradcomp::accumulate(m, o);
        received += m.nnz();
      } catch (const std::exception& e) {
        failure = "rank " + std::to_string(r) + "'s message: " + e.what();
      }
    }
    if (failure.empty()) {
      for (float& x : o) {
        x /= divisor;
      }
    }
  }
  if (!failure.empty()) {
    throw std::invalid_argument(failure);
  }
  return received;
}

// ---- method="auto": the library's rule -------------------------------------------------

//! "name value limit" as ValueError (gradcomp::detail::require's std::invalid_argument) unless
//! `ok`.
template <class T>
void require_arg(bool ok, const char* name, const T& value, const char* limit) {
  gradcomp::detail::require(ok, name, ' ', value, ' ', limit);
}

void require_finite_nonnegative(const char* name, double value) {
  require_arg(std::isfinite(value) && value >= 0.0, name, value, "is not a finite value >= 0");
}

void require_density(const char* name, double value) {
  require_arg(value > 0.0 && value <= 1.0, name, value, "is outside (0, 1]");
}

py::dict candidate_dict(const gradcomp::schedule::exchange_candidate& c) {
  py::dict d;
  d["method"] = std::string(gradcomp::schedule::name(c.method));
  d["density"] = c.density;
  d["bytes"] = c.bytes;
  d["compress_seconds"] = c.compress_seconds;
  d["communication_seconds"] = c.communication_seconds;
  d["exposed_seconds"] = c.exposed_seconds;
  return d;
}

//! The hooks' sparse all_gather (python/gradcomp/torch.py, _gather_messages): each rank's row is
//! an 8-byte size, then its encoded message, zero padded to the bucket's capacity, which the
//! previous call set to hook_row_capacity of its largest message.
constexpr std::uint64_t hook_row_size_bytes = 8;

//! The row capacity the hooks set for a bucket's next all_gather from the largest message of its
//! last one: 5/4 of it plus 64 bytes of headroom (so a message that grows by up to a quarter
//! still goes in one round). Bytes. O(1).
constexpr std::uint64_t hook_row_capacity(std::uint64_t largest_message_bytes) {
  return largest_message_bytes * 5 / 4 + 64;
}

//! The index encoding named `name` ("u32" or "delta_varint").
//! @throws std::invalid_argument naming it otherwise.
gradcomp::index_encoding sparse_indices(const std::string& name) {
  for (const auto e : {gradcomp::index_encoding::u32, gradcomp::index_encoding::delta_varint}) {
    if (name == gradcomp::to_string(e)) {
      return e;
    }
  }
  throw std::invalid_argument("indices '" + name + "' is not u32 or delta_varint");
}

//! gradcomp._core.choose_exchange: gradcomp::schedule::choose_exchange with the cost models of
//! gradcomp-train --method auto (apps/gradcomp-train/auto_method.hpp, price_groups): dense is
//! cost::message_cost(ring_allreduce, P, {alpha, beta}) of 4 n bytes, sparse the selection's
//! seconds (select_seconds_per_element x n) plus the allgather of message_format{d, {value_bytes,
//! indices}}.bytes(n) = k (value_bytes + expected_index_bytes(indices, d)) bytes (by default 8 k:
//! u32 indices, fp32 values); the allgather is cost::message_cost(sparse_allgather, P, {alpha,
//! beta}) (a 32-byte header round, then the messages), or with `hook_rows` the hooks' one
//! all_gather of padded rows, (P - 1) (alpha + beta (8 + hook_row_capacity(M))) for messages of
//! M bytes. fp16 is not a candidate (allow_fp16 false: the hooks' dense buckets travel as fp32,
//! as the allgather's dense switch does in gradcomp-train). Returns {"method", "density",
//! "chosen", "candidates"}, each candidate a dict of method, density, bytes, compress_seconds,
//! communication_seconds, exposed_seconds.
py::dict choose_exchange(std::int64_t elements,
                         double alpha_seconds,
                         double beta_seconds_per_byte,
                         int ranks,
                         double select_seconds_per_element,
                         double density,
                         double critical_density,
                         double min_saving,
                         bool critical,
                         double overlap_seconds,
                         unsigned value_bytes,
                         const std::string& indices,
                         bool hook_rows) {
  require_arg(elements >= 1, "elements", elements, "is below 1");
  require_finite_nonnegative("alpha_seconds", alpha_seconds);
  require_finite_nonnegative("beta_seconds_per_byte", beta_seconds_per_byte);
  require_arg(ranks >= 1, "ranks", ranks, "is below 1");
  require_finite_nonnegative("select_seconds_per_element", select_seconds_per_element);
  require_density("density", density);
  require_density("critical_density", critical_density);
  require_arg(min_saving >= 0.0 && min_saving < 1.0, "min_saving", min_saving, "is outside [0, 1)");
  require_finite_nonnegative("overlap_seconds", overlap_seconds);
  require_arg(value_bytes == 1 || value_bytes == 2 || value_bytes == 4, "value_bytes", value_bytes,
              "is not 1, 2 or 4");
  const gradcomp::index_encoding encoding = sparse_indices(indices);
  namespace gs = gradcomp::schedule;
  using kind = gradcomp::cost::transport_kind;
  const gradcomp::cost::network net{alpha_seconds, beta_seconds_per_byte, 0.0};
  gs::exchange_costs costs;
  costs.allreduce_seconds = gradcomp::cost::message_cost(kind::ring_allreduce, ranks, net);
  if (hook_rows) {
    costs.allgather_seconds = [=](std::uint64_t message_bytes) {
      const auto row = static_cast<double>(hook_row_size_bytes + hook_row_capacity(message_bytes));
      return (ranks - 1) * (alpha_seconds + beta_seconds_per_byte * row);
    };
  } else {
    costs.allgather_seconds = gradcomp::cost::message_cost(kind::sparse_allgather, ranks, net);
  }
  costs.select_seconds = {0.0, select_seconds_per_element};
  const gs::exchange_choice_settings settings{
      .density = density,
      .critical_density = critical_density,
      .allow_fp16 = false,
      .min_saving = min_saving,
      .sparse_pairs = {.value_bytes = value_bytes, .indices = encoding}};
  gs::exchange_decision d;
  {
    py::gil_scoped_release unlocked;
    d = gs::choose_exchange(static_cast<std::uint64_t>(elements), costs, settings, critical,
                            overlap_seconds);
  }
  py::list all;
  for (const gs::exchange_candidate& c : d.candidates) {
    all.append(candidate_dict(c));
  }
  py::dict out;
  out["method"] = std::string(gs::name(d.chosen.method));
  out["density"] = d.chosen.density;
  out["chosen"] = candidate_dict(d.chosen);
  out["candidates"] = all;
  return out;
}

//! gradcomp._core.fit_ring_allreduce: alpha and beta from timed allreduces of `bytes` (median
//! seconds per size), as gradcomp::mpi::calibrate_ring_allreduce computes them (that header
//! needs MPI, which the extension does not link; both call the same two functions):
//! cost::fit_line, then cost::ring_allreduce_network (S4's ring formula solved for alpha and
//! beta; 0 and 0 for one rank).
py::dict fit_ring_allreduce(const std::vector<double>& bytes,
                            const std::vector<double>& seconds,
                            int ranks) {
  require_arg(ranks >= 1, "ranks", ranks, "is below 1");
  require_arg(bytes.size() == seconds.size(), "bytes: count", bytes.size(),
              "differs from the count of seconds");
  require_arg(bytes.size() >= 2, "bytes: count", bytes.size(), "is below 2 (a line needs two)");
  for (const double b : bytes) {
    require_arg(std::isfinite(b) && b > 0.0, "bytes", b, "is not a finite value > 0");
  }
  for (const double t : seconds) {
    require_finite_nonnegative("seconds", t);
  }
  const gradcomp::cost::line_fit f = gradcomp::cost::fit_line(bytes, seconds);
  const gradcomp::cost::network net = gradcomp::cost::ring_allreduce_network(f, ranks);
  py::dict d;
  d["alpha_seconds"] = net.alpha_seconds;
  d["beta_seconds_per_byte"] = net.beta_seconds_per_byte;
  d["intercept"] = f.intercept;
  d["slope"] = f.slope;
  d["r_squared"] = f.r_squared;
  d["max_relative_error"] = f.max_relative_error;
  return d;
}

//! gradcomp._core.CriticalRegime's state() / load_state(): critical_regime::state_type as a
//! dict of its fields.
py::dict regime_state_dict(const gradcomp::schedule::critical_regime& r) {
  const gradcomp::schedule::critical_regime::state_type s = r.state();
  py::dict d;
  d["eta"] = s.eta;
  d["has_previous"] = s.has_previous;
  d["previous"] = s.previous;
  d["last_change"] = s.last_change;
  d["critical"] = s.critical;
  d["dropped_intervals"] = s.dropped_intervals;
  return d;
}

//! The detector a state() dict describes (the library checks the values).
//! @throws std::invalid_argument naming a missing key or a bad value.
gradcomp::schedule::critical_regime regime_from_dict(const py::dict& d) {
  for (const char* key :
       {"eta", "has_previous", "previous", "last_change", "critical", "dropped_intervals"}) {
    if (!d.contains(key)) {
      throw std::invalid_argument(std::string("CriticalRegime state: '") + key + "' is missing");
    }
  }
  gradcomp::schedule::critical_regime::state_type s;
  s.eta = d["eta"].cast<double>();
  s.has_previous = d["has_previous"].cast<bool>();
  s.previous = d["previous"].cast<double>();
  s.last_change = d["last_change"].cast<double>();
  s.critical = d["critical"].cast<bool>();
  s.dropped_intervals = d["dropped_intervals"].cast<int>();
  return gradcomp::schedule::critical_regime(s);
}

//! gradcomp._core.build_info(): how this extension was compiled (see its docstring below).
py::dict build_info() {
  py::dict d;
#if defined(__clang__)
  d["compiler"] = "Clang";
  d["compiler_version"] = std::string(__clang_version__);
#elif defined(__GNUC__)
  d["compiler"] = "GCC";
  d["compiler_version"] = std::string(__VERSION__);
#elif defined(_MSC_VER)
  d["compiler"] = "MSVC";
  d["compiler_version"] = std::to_string(_MSC_FULL_VER);
#else
  d["compiler"] = "unknown";
  d["compiler_version"] = "unknown";
#endif
  d["cplusplus"] = static_cast<long>(__cplusplus);
  d["build_system"] = GRADCOMP_PYTHON_BUILD_SYSTEM;
  d["build_type"] = GRADCOMP_PYTHON_BUILD_TYPE;
#if defined(__OPTIMIZE__)
  d["optimized"] = true; // GCC / Clang: compiled with -O1 or higher
#else
  d["optimized"] = false;
#endif
#if defined(NDEBUG)
  d["assertions"] = false;
#else
  d["assertions"] = true;
#endif
#if defined(_OPENMP)
  d["openmp"] = true;
#else
  d["openmp"] = false;
#endif
  d["mpi"] = GRADCOMP_PYTHON_WITH_MPI != 0;
  d["blas"] = GRADCOMP_PYTHON_WITH_BLAS != 0;
  d["cuda"] = GRADCOMP_PYTHON_WITH_CUDA != 0;
  d["pybind11_version"] = std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                          std::to_string(PYBIND11_VERSION_MINOR) + "." +
                          std::to_string(PYBIND11_VERSION_PATCH);
  d["python_headers"] = PY_VERSION;
  d["gradcomp_version"] = std::string(gradcomp::version_string);
  return d;
}

} // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gradcomp's compressors and wire format for the gradcomp.torch DDP hooks";
  m.attr("version") = std::string(gradcomp::version_string);
  // nonfinite_policy::raise: what() names the element, the value and the count
  py::register_exception<gradcomp::nonfinite_error>(m, "NonfiniteError", PyExc_FloatingPointError);
  py::list sparse;
  for (const std::string_view n : gradcomp::sparse_compressor_names) {
    sparse.append(std::string(n));
  }
  m.attr("sparse_methods") = sparse;
  py::list quantizers;
  for (const std::string_view n : gradcomp::quantizer_names) {
    quantizers.append(std::string(n));
  }
  m.attr("quantizer_methods") = quantizers;
  m.attr("dense_methods") = py::make_tuple("fp32", "fp16", "bf16");

  py::class_<compressor>(m, "Compressor")
      .def(py::init<const std::string&, double, std::uint64_t, std::uint64_t, unsigned,
                    const std::string&, std::uint32_t, std::optional<std::uint32_t>>(),
           py::arg("method"), py::arg("density"), py::arg("interval") = 10, py::arg("seed") = 1,
           py::arg("threads") = 1, py::arg("nonfinite") = "propagate", py::arg("levels") = 15,
           py::arg("bucket_elements") = py::none())
      .def("compress", &compressor::compress, py::arg("residual").noconvert(),
           py::arg("grad").noconvert(), py::arg("velocity").noconvert() = py::none(),
           py::arg("momentum") = 0.0f, py::arg("factor_masking") = true)
      .def("compress_dense", &compressor::compress_dense, py::arg("residual").noconvert(),
           py::arg("grad").noconvert(), py::arg("out").noconvert())
      .def("state", &compressor::state)
      .def("load_state", &compressor::load_state, py::arg("state"))
      .def("set_density", &compressor::set_density, py::arg("density"))
      .def_property_readonly("method", &compressor::method);

  m.def(
      "density_warmup",
      [](double initial_density, double final_density, double warmup_epochs, bool stepped,
         double epoch) {
        return gradcomp::density_warmup{.initial_density = initial_density,
                                        .final_density = final_density,
                                        .warmup_epochs = warmup_epochs,
                                        .stepped = stepped}
            .at_epoch(epoch);
      },
      py::arg("initial_density"), py::arg("final_density"), py::arg("warmup_epochs"),
      py::arg("stepped"), py::arg("epoch"),
      "gradcomp::density_warmup{...}.at_epoch(epoch): DGC's density at a fractional epoch");
  m.def("decode_average", &decode_average, py::arg("gathered").noconvert(),
        py::arg("sizes").noconvert(), py::arg("out").noconvert(), py::arg("divisor"),
        py::arg("offset") = 0);
  m.attr("hook_row_size_bytes") = hook_row_size_bytes;
  m.def("hook_row_capacity", &hook_row_capacity, py::arg("largest_message_bytes"),
        "The row capacity (bytes) the hooks' sparse all_gather uses after a call whose largest\n"
        "encoded message had `largest_message_bytes`: 5/4 of it plus 64 bytes.");
  m.def("choose_exchange", &choose_exchange, py::arg("elements"), py::arg("alpha_seconds"),
        py::arg("beta_seconds_per_byte"), py::arg("ranks"), py::arg("select_seconds_per_element"),
        py::arg("density"), py::arg("critical_density") = 1.0, py::arg("min_saving") = 0.1,
        py::arg("critical") = false, py::arg("overlap_seconds") = 0.0, py::arg("value_bytes") = 4u,
        py::arg("indices") = "u32", py::arg("hook_rows") = false,
        "gradcomp::schedule::choose_exchange on the cost models of gradcomp-train --method auto:\n"
        "what a bucket of `elements` values is sent as, dense (fp32 through the ring\n"
        "allreduce: cost::message_cost(ring_allreduce, ranks, {alpha, beta}) of 4 n bytes) or\n"
        "sparse at `density` (`critical_density` when `critical`; left out at density 1): the\n"
        "selection's select_seconds_per_element x n plus the allgather of k pairs of\n"
        "`value_bytes` (1, 2 or 4) and an index `indices` ('u32': 4 bytes; 'delta_varint':\n"
        "gradcomp::expected_index_bytes, 1.0 at density 0.05), k = k_for_density(n, d): by\n"
        "default message_cost(sparse_allgather) (a 32-byte header round, then the messages),\n"
        "with `hook_rows` the hooks' one all_gather of rows of hook_row_size_bytes +\n"
        "hook_row_capacity(M) bytes, (P - 1) (alpha + beta row). fp16 is not a candidate. A\n"
        "lossier candidate wins when its exposed seconds (compression + the communication\n"
        "`overlap_seconds` cannot hide) are below the choice's and at most (1 - min_saving)\n"
        "times them. Units: seconds, seconds per byte, seconds per element. Returns a dict:\n"
        "method ('dense' or 'sparse'), density, chosen and candidates (dicts of method, density,\n"
        "bytes (the message's, without padding), compress_seconds, communication_seconds,\n"
        "exposed_seconds; least lossy first). Raises ValueError naming the argument and its\n"
        "limit.");
  m.def(
      "dense_below_elements",
      [](const std::vector<std::size_t>& numel, double share) {
        return gradcomp::schedule::dense_below_elements(numel, share);
      },
      py::arg("numel"), py::arg("share"),
      "gradcomp::schedule::dense_below_elements: the element count below which a tensor (here a\n"
      "bucket) is sent whole, so that those under it are the smallest that together hold at\n"
      "most `share` of all the elements of `numel` (equal sizes together); 0 when none is.\n"
      "Raises ValueError naming share if it is outside [0, 1).");
  m.def("fit_ring_allreduce", &fit_ring_allreduce, py::arg("bytes"), py::arg("seconds"),
        py::arg("ranks"),
        "alpha and beta of a ring allreduce from median seconds per message size, as\n"
        "gradcomp::mpi::calibrate_ring_allreduce fits them: the least-squares line t = a + b M,\n"
        "alpha = max(0, a) / (2 (P-1)), beta = max(0, b) P / (2 (P-1)) (0 for one rank). Returns\n"
        "a dict: alpha_seconds, beta_seconds_per_byte, intercept, slope, r_squared,\n"
        "max_relative_error. Raises ValueError on fewer than 2 points, differing lengths, a\n"
        "size not > 0, a time not finite and >= 0, all sizes equal, or ranks < 1.");
  m.def(
      "sum_of_squares",
      [](const float_array& values) {
        const std::span<const float> v = readable(values);
        py::gil_scoped_release unlocked;
        return gradcomp::sum_of_squares(v);
      },
      py::arg("values").noconvert(),
      "gradcomp::sum_of_squares: the sum of squares of a float32 array, accumulated in double\n"
      "element by element in order (the same bits for the same values on every rank).");
  using regime = gradcomp::schedule::critical_regime;
  py::class_<regime>(
      m, "CriticalRegime",
      "gradcomp::schedule::critical_regime: Accordion's detector of critical regimes (Agarwal\n"
      "et al., MLSys 2021). observe(norm) ends an interval whose accumulated gradient had that\n"
      "L2 norm and returns whether it was critical: the first interval, a relative change\n"
      "|n_i - n_(i-1)| / n_(i-1) of at least eta, or an interval announced by\n"
      "learning_rate_dropped(intervals). critical is True before the first observe().\n"
      "state() / load_state(d) checkpoint it (a dict: eta, has_previous, previous, last_change,\n"
      "critical, dropped_intervals; the library's critical_regime::state_type). Bad values\n"
      "raise ValueError naming them.")
      .def(py::init<double>(), py::arg("eta") = 0.5)
      .def("observe", &regime::observe, py::arg("gradient_norm"))
      .def("learning_rate_dropped", &regime::learning_rate_dropped, py::arg("intervals") = 1)
      .def_property_readonly("critical", &regime::critical)
      .def_property_readonly("last_change", &regime::last_change)
      .def_property_readonly("eta", &regime::eta)
      .def("state", &regime_state_dict)
      .def(
          "load_state", [](regime& r, const py::dict& d) { r = regime_from_dict(d); },
          py::arg("state"));
  m.def("build_info", &build_info,
        "How this extension was compiled, as a dict of str / int / bool (raises nothing):\n"
        "compiler ('GCC', 'Clang', 'MSVC' or 'unknown') and compiler_version (the compiler's own\n"
        "version string); cplusplus (the value of __cplusplus, e.g. 202002 for C++20);\n"
        "build_system ('cmake', 'setuptools' or 'unknown') and build_type (CMake's\n"
        "configuration, setup.py's 'Release'); optimized (compiled with -O1 or higher);\n"
        "assertions (NDEBUG not defined); openmp (_OPENMP defined); mpi, blas, cuda (whether\n"
        "the extension was built with gradcomp's MPI, BLAS or CUDA parts: False, it compiles the\n"
        "core headers only); pybind11_version; python_headers (the Python headers' version it\n"
        "was compiled against); gradcomp_version (the headers' version_string).");
}
