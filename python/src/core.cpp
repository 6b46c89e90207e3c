// SPDX-License-Identifier: Apache-2.0
// gradcomp._core: the compiled half of the gradcomp.torch package (python/gradcomp/torch.py).
// It exposes gradcomp's host compressors with error feedback (compress the accumulated bucket,
// encode gradcomp's wire format) and the receiver's aggregation (decode every rank's message and
// average them), on NumPy views of CPU tensors (tensor.numpy() shares the memory: no copy). The
// GIL is released while a call computes. Errors: std::invalid_argument -> ValueError (pybind11's
// translation), gradcomp::wire_error and gradcomp::state_error -> ValueError as well.
// build_info() reports how this extension was compiled (python -m gradcomp.info prints it).
#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/any_compressor.hpp>
#include <gradcomp/compressor/by_name.hpp>
#include <gradcomp/compressor/density_schedule.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>
#include <gradcomp/version.hpp>

#include <chrono>
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
