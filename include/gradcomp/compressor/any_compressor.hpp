// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::any_compressor: a host compressor chosen at run time (type erasure), made by
//! name from one gradcomp::named_compressor_settings ("exact_topk", "qsgd", "fp16", ...) or from
//! any compressor object; the compressor counterpart of gradcomp::any_transport.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/by_name.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace gradcomp {

//! @brief The names of the dense host compressors (gradcomp::dense: every value sent): "dense"
//! sends named_compressor_settings::values; "fp32", "fp16" and "bf16" send that type whatever
//! `values` says (fp32: uncompressed; fp16 / bf16: cast, the rounding error kept by error
//! feedback).
inline constexpr std::array<std::string_view, 4> dense_compressor_names = {"dense", "fp32", "fp16",
                                                                           "bf16"};

//! @brief Whether `name` is one of dense_compressor_names. O(1).
[[nodiscard]] constexpr bool is_dense_compressor_name(std::string_view name) noexcept {
  return detail::is_one_of(dense_compressor_names, name);
}

//! @brief Every name any_compressor's named constructor accepts, in the order the tools list
//! them: dense_compressor_names, sparse_compressor_names, quantizer_names.
inline constexpr std::array<std::string_view, 13> compressor_names = [] {
  std::array<std::string_view, 13> all{};
  std::size_t i = 0;
  for (const std::string_view n : dense_compressor_names) {
    all[i++] = n;
  }
  for (const std::string_view n : sparse_compressor_names) {
    all[i++] = n;
  }
  for (const std::string_view n : quantizer_names) {
    all[i++] = n;
  }
  return all;
}();

//! @brief Whether `name` is one of compressor_names (a host compressor any_compressor can make).
//! O(1).
[[nodiscard]] constexpr bool is_compressor_name(std::string_view name) noexcept {
  return detail::is_one_of(compressor_names, name);
}

//! @brief Checks every field of `s`, whichever compressor it is used with (so that a settings
//! struct is valid or not independently of the name): density in (0, 1], interval >= 1, levels
//! in [1, 2^15], threads in [1, 1024], values fp32, fp16 or bf16 (not quantized: the quantizers
//! make that type themselves). bucket_elements, seed and nonfinite take any value. O(1).
//! @throws std::invalid_argument naming the field, its value and the limit it broke.
inline void check_named_compressor_settings(const named_compressor_settings& s) {
  detail::require(s.density > 0.0 && s.density <= 1.0, "compressor settings: density ", s.density,
                  " is outside (0, 1]");
  detail::require(s.interval >= 1, "compressor settings: interval ", s.interval,
                  " is below the minimum 1");
  detail::require(s.levels >= 1 && s.levels <= max_quantization_levels,
                  "compressor settings: levels ", s.levels, " is outside [1, ",
                  max_quantization_levels, "]");
  detail::require(s.threads >= 1 && s.threads <= 1024, "compressor settings: threads ", s.threads,
                  " is outside [1, 1024]");
  detail::require(s.values != value_type::quantized,
                  "compressor settings: values quantized is made by the quantizers (signsgd, "
                  "terngrad, qsgd); values must be fp32, fp16 or bf16");
}

//! @brief A host compressor chosen at run time: holds any gradcomp::compressor by value (its
//! state, e.g. a reused threshold or a sampling RNG, included) and forwards every call to it
//! through one virtual call. With it one type serves every method a program picks by name:
//! `pipeline<any_compressor, T, G>`, `error_feedback<any_compressor>`, or the error-feedback
//! step compress_with_feedback() on the caller's own residual (the Python hooks).
//!
//! It models gradcomp::compressor, momentum_compressor, density_compressor and
//! has_binary_state (so every `if constexpr` / `requires` of the pipeline and of error_feedback
//! takes the capable branch); which of these the held compressor really has is a run-time
//! property (has_momentum(), has_density(), has_state()), and using one it lacks throws
//! std::logic_error naming the compressor instead of being a no-op.
//!
//! **Determinism**: messages, residuals, velocities, statistics and saved states are bit for
//! bit those of the held compressor called directly (the tensors reach it as std::span views of
//! the same memory; nothing is copied or reordered). The saved state is the held compressor's
//! own (no wrapper of its own), so a checkpoint of `pipeline<any_compressor, ...>` and one of
//! `pipeline<concrete, ...>` are interchangeable.
//! **Complexity**: the held compressor's, plus one indirect call per operation; one heap
//! allocation at construction and per copy.
//! **Copies**: copyable (each copy clones the held compressor, its state included; every
//! compressor of the library is copyable, and the object constructor requires it). A moved-from
//! any_compressor must not be used: its calls throw std::logic_error.
//! Not thread-safe, as the compressors (one object per layer and thread).
class any_compressor {
public:
  //! Opts in to gradcomp::compressor.
  using compressor_concept = compressor_tag;

  //! @brief The host compressor called `name` (one of compressor_names) built from `s`:
  //! dense_compressor_names make gradcomp::dense (threads, nonfinite; "dense" with s.values),
  //! sparse_compressor_names what with_sparse_compressor() makes, quantizer_names what
  //! with_quantizer() makes. Every field of `s` is checked first, whichever the compressor
  //! uses (check_named_compressor_settings). O(1) plus one allocation.
  //! @throws std::invalid_argument naming `name` and every accepted name if it is unknown, or
  //! naming the field, value and limit of a bad setting (nothing is built then).
  explicit any_compressor(std::string_view name, const named_compressor_settings& s = {})
      : name_(name) {
    check_named_compressor_settings(s);
    const auto erase = [this](auto c) { adopt(std::move(c)); };
    if (is_dense_compressor_name(name)) {
      const value_type v = name == "dense" ? s.values : *value_type_from_string(name);
      erase(dense({.values = v, .threads = s.threads, .nonfinite = s.nonfinite}));
    } else if (is_quantizer_name(name)) {
      with_quantizer(name, s, erase);
    } else if (is_sparse_compressor_name(name)) {
      with_sparse_compressor(name, s, erase);
    } else {
      throw detail::unknown_name("compressor", name, compressor_names);
    }
  }

  //! @brief Holds `c` (moved in): any copyable gradcomp::compressor, a library one, a
  //! size_switch or a user's. name() is then C::state_name where C declares one, else empty.
  //! O(1) plus one allocation; throws what moving C throws, std::bad_alloc.
  template <class C>
  requires(!std::same_as<C, any_compressor> && compressor<C> &&
           std::copy_constructible<C>) explicit any_compressor(C c) {
    if constexpr (requires { C::state_name; }) {
      name_ = std::string(C::state_name);
    }
    adopt(std::move(c));
  }

  //! Clones `other`'s compressor (its state included). O(its size); one allocation.
  any_compressor(const any_compressor& other)
      : impl_(other.get().clone()), name_(other.name_), caps_(other.caps_) {}
  //! Clones `other`'s compressor into this one (strong guarantee).
  any_compressor& operator=(const any_compressor& other) {
    if (this != &other) {
      any_compressor copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  any_compressor(any_compressor&&) noexcept = default;            //!< Leaves `other` empty.
  any_compressor& operator=(any_compressor&&) noexcept = default; //!< Leaves `other` empty.
  ~any_compressor() = default;

  //! @brief The held compressor's compress(x, out) (gradcomp::compressor): x is n floats in
  //! host memory, read only; `out` is overwritten. Cost, result and exceptions: the held one's.
  template <host_float_tensor Tensor>
  selection_stats compress(const Tensor& x, sparse_message& out) {
    return get().compress(host_span(x), out);
  }

  //! @brief The held compressor's compress_accumulate (error feedback fused into the
  //! selection: acc = residual + grad, out = C(acc), residual = acc - out).
  //! @pre residual and grad have the same length (the held compressor checks it:
  //! std::invalid_argument naming both, for the library's).
  template <host_float_tensor Residual, host_float_tensor Grad>
  selection_stats compress_accumulate(Residual& residual, const Grad& grad, sparse_message& out) {
    return get().compress_accumulate(writable(residual), host_span(grad), out);
  }

  //! @brief The held compressor's compress_accumulate_momentum (DGC's momentum correction;
  //! gradcomp::momentum_compressor), with momentum factor masking by default; with
  //! `factor_masking` false the velocity is kept (gradcomp::kept_velocity_compressor: fused where
  //! the held compressor models it, else the velocity update as its own pass; the same bits).
  //! @throws std::logic_error naming the compressor if it has no momentum form (has_momentum()
  //! false; every compressor of the library has one); std::invalid_argument naming the lengths
  //! or the momentum (outside [0, 1)); the held compressor's exceptions.
  template <host_float_tensor Residual, host_float_tensor Velocity, host_float_tensor Grad>
  selection_stats compress_accumulate_momentum(Residual& residual,
                                               Velocity& velocity,
                                               const Grad& grad,
                                               float momentum,
                                               sparse_message& out,
                                               bool factor_masking = true) {
    require_capability(caps_.momentum, "compress_accumulate_momentum()",
                       "has no momentum correction (gradcomp::momentum_compressor)");
    return get().compress_accumulate_momentum(writable(residual), writable(velocity),
                                              host_span(grad), momentum, factor_masking, out);
  }

  //! @brief One error-feedback step on the caller's state, exactly as gradcomp::error_feedback
  //! and the pipeline take it: with mc.momentum == 0, compress_accumulate(residual, grad, out)
  //! (`velocity` is not touched and may be empty); with mc.momentum > 0, DGC's momentum
  //! correction: velocity = m velocity + grad, residual += velocity, out = C(residual),
  //! residual -= out, and with mc.factor_masking the velocity of every sent element is zeroed
  //! (compress_accumulate_momentum), without it the velocity is kept. `residual` (and `velocity`)
  //! are n floats owned by the caller and kept between calls; conservation is exact as in
  //! error_feedback (sent + new residual == old residual + grad, or + velocity). Cost: the held
  //! compressor's plus O(n) for the velocity; one virtual call. Bit for bit
  //! error_feedback<C>::compress with the same state.
  //! @throws std::invalid_argument naming the lengths if residual, grad (and velocity, with
  //! momentum) differ, naming the momentum if it is outside [0, 1) or is > 0 and the held
  //! compressor has no momentum form (nothing changes then); the held compressor's exceptions.
  selection_stats compress_with_feedback(std::span<float> residual,
                                         std::span<float> velocity,
                                         std::span<const float> grad,
                                         const momentum_correction& mc,
                                         sparse_message& out) {
    interface& c = get();
    detail::require(residual.size() == grad.size(), "compress_with_feedback: residual has ",
                    residual.size(), " elements, gradient has ", grad.size());
    check_momentum(mc.momentum);
    const auto momentum = static_cast<float>(mc.momentum);
    if (momentum > 0.0f) {
      detail::require(velocity.size() == grad.size(), "compress_with_feedback: velocity has ",
                      velocity.size(), " elements, gradient has ", grad.size(), " (momentum ",
                      mc.momentum, ")");
      detail::require(caps_.momentum, "momentum correction ", mc.momentum,
                      " needs a compressor that models gradcomp::momentum_compressor; '", name_,
                      "' does not");
    }
    return c.compress_with_feedback(residual, velocity, grad, momentum, mc.factor_masking, out);
  }

  //! Whether the held compressor models gradcomp::momentum_compressor. O(1).
  [[nodiscard]] bool has_momentum() const noexcept { return caps_.momentum; }
  //! Whether the held compressor has a density (gradcomp::density_compressor: the sparse
  //! ones, not dense nor the quantizers). O(1).
  [[nodiscard]] bool has_density() const noexcept { return caps_.density; }
  //! Whether the held compressor has a checkpoint state (gradcomp::has_binary_state; every
  //! compressor of the library). O(1).
  [[nodiscard]] bool has_state() const noexcept { return caps_.state; }

  //! @brief The density the next call selects at (gradcomp::density_compressor). O(1).
  //! @throws std::logic_error naming the compressor if has_density() is false.
  [[nodiscard]] double density() const {
    require_capability(caps_.density, "density()", no_density_text);
    return get().density();
  }
  //! @brief Sets the density of the following calls (the held compressor's set_density: takes
  //! effect from the next call; state depending on it refreshed). O(1).
  //! @throws std::logic_error naming the compressor if has_density() is false (a dense method or
  //! a quantizer); std::invalid_argument naming `d` if it is outside (0, 1]. Nothing changes
  //! then.
  void set_density(double d) {
    require_capability(caps_.density, "set_density()", no_density_text);
    get().set_density(d);
  }

  //! @brief Writes the held compressor's checkpoint state, byte for byte what it writes itself
  //! (compressor_base::save_state). O(its state).
  //! @throws std::logic_error naming the compressor if has_state() is false.
  void save_state(state_writer& w) const {
    require_capability(caps_.state, "save_state()", "has no checkpoint state");
    get().save_state(w);
  }
  //! @brief Restores a state save_state() (or the same compressor type directly) wrote; all or
  //! nothing, as the held compressor's load_state.
  //! @throws state_error naming what differs (another compressor, another option) or is
  //! truncated, this object unchanged; std::logic_error naming the compressor if has_state()
  //! is false.
  void load_state(state_reader& r) {
    require_capability(caps_.state, "load_state()", "has no checkpoint state");
    get().load_state(r);
  }

  //! @brief The type the held compressor's messages carry (value_type::quantized for the
  //! quantizers), where it says (a `values_type()` member: every compressor of the library);
  //! std::nullopt otherwise (a size_switch, a user's compressor without one). O(1).
  [[nodiscard]] std::optional<value_type> values_type() const { return get().values_type(); }
  //! The name it was made by (named constructor), or C::state_name (object constructor; empty
  //! where C has none). O(1).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  //! The held compressor's type (typeid(C)). O(1).
  [[nodiscard]] const std::type_info& target_type() const { return get().type(); }
  //! @brief The held compressor if it is a C (e.g. `target<gradcomp::qsgd>()` to read its
  //! levels), else nullptr; as std::function::target. O(1).
  template <class C>
  [[nodiscard]] C* target() noexcept {
    return impl_ && impl_->type() == typeid(C) ? &static_cast<model<C>&>(*impl_).c : nullptr;
  }
  //! The held compressor if it is a C, else nullptr (read only). O(1).
  template <class C>
  [[nodiscard]] const C* target() const noexcept {
    return impl_ && impl_->type() == typeid(C) ? &static_cast<const model<C>&>(*impl_).c : nullptr;
  }

private:
  struct capabilities {
    bool momentum = false;
    bool density = false;
    bool state = false;
  };

  struct interface {
    virtual ~interface() = default;
    [[nodiscard]] virtual std::unique_ptr<interface> clone() const = 0;
    virtual selection_stats compress(std::span<const float>, sparse_message&) = 0;
    virtual selection_stats
    compress_accumulate(std::span<float>, std::span<const float>, sparse_message&) = 0;
    virtual selection_stats compress_accumulate_momentum(std::span<float>,
                                                         std::span<float>,
                                                         std::span<const float>,
                                                         float,
                                                         bool,
                                                         sparse_message&) = 0;
    virtual selection_stats compress_with_feedback(std::span<float>,
                                                   std::span<float>,
                                                   std::span<const float>,
                                                   float,
                                                   bool,
                                                   sparse_message&) = 0;
    [[nodiscard]] virtual double density() const = 0;
    virtual void set_density(double) = 0;
    virtual void save_state(state_writer&) const = 0;
    virtual void load_state(state_reader&) = 0;
    [[nodiscard]] virtual std::optional<value_type> values_type() const = 0;
    [[nodiscard]] virtual const std::type_info& type() const noexcept = 0;
  };

  // The held compressor. The members for capabilities C lacks are never called (any_compressor
  // checks caps_ first); they throw should that change.
  template <class C>
  struct model final : interface {
    explicit model(C compressor) : c(std::move(compressor)) {}
    [[nodiscard]] std::unique_ptr<interface> clone() const override {
      return std::make_unique<model>(c);
    }
    selection_stats compress(std::span<const float> x, sparse_message& out) override {
      return c.compress(x, out);
    }
    selection_stats compress_accumulate(std::span<float> r,
                                        std::span<const float> g,
                                        sparse_message& out) override {
      return c.compress_accumulate(r, g, out);
    }
    selection_stats compress_accumulate_momentum(std::span<float> r,
                                                 std::span<float> u,
                                                 std::span<const float> g,
                                                 float momentum,
                                                 bool factor_masking,
                                                 sparse_message& out) override {
      if constexpr (momentum_compressor<C>) {
        return detail::compress_accumulate_momentum(c, r, u, g, momentum, factor_masking, out);
      } else {
        throw std::logic_error("any_compressor: no momentum form");
      }
    }
    selection_stats compress_with_feedback(std::span<float> r,
                                           std::span<float> u,
                                           std::span<const float> g,
                                           float momentum,
                                           bool factor_masking,
                                           sparse_message& out) override {
      return detail::compress_with_feedback(c, r, u, g, momentum, factor_masking, out);
    }
    [[nodiscard]] double density() const override {
      if constexpr (density_compressor<C>) {
        return c.density();
      } else {
        throw std::logic_error("any_compressor: no density");
      }
    }
    void set_density(double d) override {
      if constexpr (density_compressor<C>) {
        c.set_density(d);
      } else {
        throw std::logic_error("any_compressor: no density");
      }
    }
    void save_state(state_writer& w) const override {
      if constexpr (has_binary_state<C>) {
        c.save_state(w);
      } else {
        throw std::logic_error("any_compressor: no checkpoint state");
      }
    }
    void load_state(state_reader& r) override {
      if constexpr (has_binary_state<C>) {
        c.load_state(r);
      } else {
        throw std::logic_error("any_compressor: no checkpoint state");
      }
    }
    [[nodiscard]] std::optional<value_type> values_type() const override {
      if constexpr (requires(const C& cc) {
                      { cc.values_type() } -> std::convertible_to<value_type>;
                    }) {
        return c.values_type();
      } else {
        return std::nullopt;
      }
    }
    [[nodiscard]] const std::type_info& type() const noexcept override { return typeid(C); }
    C c;
  };

  template <class C>
  void adopt(C c) {
    impl_ = std::make_unique<model<C>>(std::move(c));
    caps_ = {momentum_compressor<C>, density_compressor<C>, has_binary_state<C>};
  }

  template <class T>
  static auto writable(T& t) {
    const auto s = host_span(t);
    static_assert(!std::is_const_v<typename decltype(s)::element_type>,
                  "gradcomp: the residual and the velocity must be writable");
    return s;
  }

  static constexpr const char* no_density_text =
      "has no density (gradcomp::density_compressor; the dense methods and the quantizers send "
      "every value)";

  void require_capability(bool has, const char* what, const char* lacks) const {
    if (!has) {
      throw std::logic_error(
          detail::concat("gradcomp: any_compressor: ", what, " on '", name_, "', which ", lacks));
    }
  }

  [[nodiscard]] interface& get() const {
    if (!impl_) {
      throw std::logic_error("gradcomp: any_compressor used after it was moved from");
    }
    return *impl_;
  }

  std::unique_ptr<interface> impl_;
  std::string name_;
  capabilities caps_;
};

static_assert(compressor<any_compressor>);
static_assert(momentum_compressor<any_compressor>);
static_assert(density_compressor<any_compressor>);
static_assert(has_binary_state<any_compressor>);
static_assert(std::copyable<any_compressor>);

} // namespace gradcomp
