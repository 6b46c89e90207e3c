// SPDX-License-Identifier: Apache-2.0
// gradcomp::compressor_base (compressor/compressor_base.hpp) through a compressor written here
// as docs/extending.md describes: `first_k` sends the first k = ceil(d n) elements. Everything
// the base promises is checked against values computed by hand: the concepts, the stats, the
// rounding to the values type with the rounding error kept by error feedback, DGC's momentum
// correction (velocity, accumulation, masking), the length and momentum checks, the constructor's
// and set_density's checks with the density_changed hook, the checkpoint state with the Derived
// hooks and the option checks, the non-finite policies, and that run() never sees n = 0.
#include <gradcomp/compressor/compressor_base.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "../common/catch.hpp"

namespace compressor_compressor_base_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

struct first_k_options {
  double density = 0.5;
  value_type values = value_type::fp32;
  unsigned threads = 1;
  double guard_factor = 2.0;
  nonfinite_policy nonfinite = nonfinite_policy::propagate;
};

// Sends elements [0, k) in order; counts its run() calls and density changes (its own state,
// saved in checkpoints by the Derived hooks).
class first_k : public compressor_base<first_k, first_k_options> {
public:
  static constexpr std::string_view state_name = "first_k";
  explicit first_k(options o = {}) : compressor_base(o) {}

  std::uint64_t runs = 0;
  int density_changes = 0;

  void density_changed() { ++density_changes; }
  void save_extra(state_writer& w) const { w.u64(runs); }
  void load_extra(state_reader& r) { runs = r.u64("first_k runs"); }

  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    ++runs;
    src.materialize(0, n);
    const float* x = src.materialized();
    for (std::size_t i = 0; i < stats.k_target; ++i) {
      out.indices.push_back(static_cast<std::uint32_t>(i));
      out.values.push_back(x[i]);
    }
    stats.threshold = 1.0f; // run() may set it; the base keeps it
    stats.exact = true;
  }
};

// a compressor of another name, for a checkpoint of the wrong kind
class other_k : public compressor_base<other_k, first_k_options> {
public:
  static constexpr std::string_view state_name = "other_k";
  explicit other_k(options o = {}) : compressor_base(o) {}
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats&, sparse_message&) {
    src.materialize(0, n);
  }
};

static_assert(compressor<first_k>);
static_assert(momentum_compressor<first_k>);
static_assert(density_compressor<first_k>);

constexpr float fp16_of_0_1 = 0.0999755859375f; // 0.1 rounded to fp16 (0x2E66)

} // namespace

TEST_CASE("compressor_base: compress gives run()'s pairs, the stats and the values type",
          "[compressor_base]") {
  const std::vector<float> x{0.1f, -2.0f, 3.0f, 4.0f, 5.0f};
  first_k c({.density = 0.5});
  sparse_message m;
  const selection_stats s = c.compress(x, m);
  CHECK(m.indices == std::vector<std::uint32_t>{0, 1, 2}); // k = ceil(0.5 x 5) = 3
  CHECK(m.values == std::vector<float>{0.1f, -2.0f, 3.0f});
  CHECK(m.dense_length_elements == 5);
  CHECK_FALSE(m.dense);
  CHECK(s.numel == 5);
  CHECK(s.k_target == 3);
  CHECK(s.k_selected == 3);
  CHECK(s.threshold == 1.0f);
  CHECK(s.exact);
  CHECK(c.target_k(5) == 3);
  CHECK(c.target_k(0) == 0);
  CHECK(c.density() == 0.5);
  CHECK(c.values_type() == value_type::fp32);
  // fp16: the base rounds the sent values; a std::span and a host_view are read the same
  first_k half({.density = 0.4, .values = value_type::fp16});
  half.compress(std::span<const float>(x), m);
  CHECK(m.values_type == value_type::fp16);
  CHECK(m.values == std::vector<float>{fp16_of_0_1, -2.0f});
  half.compress(host_view<const float>(x.data(), x.size()), m);
  CHECK(m.values == std::vector<float>{fp16_of_0_1, -2.0f});
  // a 0-element gradient never reaches run()
  const std::uint64_t runs = c.runs;
  const selection_stats empty = c.compress(std::vector<float>{}, m);
  CHECK(c.runs == runs);
  CHECK(empty.k_target == 0);
  CHECK(m.nnz() == 0);
}

TEST_CASE("compressor_base: error feedback keeps acc - sent, the rounding error included",
          "[compressor_base]") {
  first_k c({.density = 0.5, .values = value_type::fp16});
  std::vector<float> residual{0.25f, 1.0f, 0.5f, -1.0f};
  const std::vector<float> grad{-0.15f, 2.0f, 0.25f, 3.0f};
  sparse_message m;
  c.compress_accumulate(residual, grad, m);
  // acc = residual + grad = {0.1, 3, 0.75, 2}; the first 2 sent, rounded to fp16
  const float acc0 = 0.25f + -0.15f;
  CHECK(m.indices == std::vector<std::uint32_t>{0, 1});
  CHECK(m.values[1] == 3.0f);
  CHECK(m.values[0] + residual[0] == acc0); // sent + new residual == acc, bit for bit
  CHECK(residual[1] == 0.0f);
  CHECK(residual[2] == 0.75f); // unsent: the accumulation
  CHECK(residual[3] == 2.0f);
  // the lengths must agree, and nothing changes when they do not
  std::vector<float> short_residual(3, 7.0f);
  CHECK_THROWS_WITH(c.compress_accumulate(short_residual, grad, m),
                    Contains("residual has 3 elements, gradient has 4"));
  CHECK(short_residual == std::vector<float>(3, 7.0f));
}

TEST_CASE("compressor_base: momentum correction, worked by hand", "[compressor_base]") {
  first_k c({.density = 0.5});
  std::vector<float> residual{1.0f, 0.0f, 0.5f, 0.0f};
  std::vector<float> velocity{2.0f, 4.0f, 1.0f, -8.0f};
  const std::vector<float> grad{1.0f, 1.0f, 0.25f, 2.0f};
  sparse_message m;
  c.compress_accumulate_momentum(residual, velocity, grad, 0.5f, m);
  // velocity = 0.5 v + g = {2, 3, 0.75, -2}; acc = residual + velocity = {3, 3, 1.25, -2}
  CHECK(m.values == std::vector<float>{3.0f, 3.0f});
  CHECK(residual == std::vector<float>{0.0f, 0.0f, 1.25f, -2.0f});
  // momentum factor masking: the velocity of the sent elements is 0
  CHECK(velocity == std::vector<float>{0.0f, 0.0f, 0.75f, -2.0f});
  // with momentum 0 the message and residual equal compress_accumulate's
  std::vector<float> r1{1.0f, 2.0f, 3.0f, 4.0f}, r2 = r1, v(4, 9.0f);
  sparse_message a, b;
  c.compress_accumulate(r1, grad, a);
  c.compress_accumulate_momentum(r2, v, grad, 0.0f, b);
  CHECK(a.values == b.values);
  CHECK(r1 == r2);
  std::vector<float> short_velocity(2);
  CHECK_THROWS_WITH(c.compress_accumulate_momentum(r1, short_velocity, grad, 0.5f, m),
                    Contains("velocity 2"));
  CHECK_THROWS_WITH(c.compress_accumulate_momentum(r1, v, grad, 1.0f, m),
                    Contains("momentum 1 is outside [0, 1)"));
  CHECK_THROWS_AS(c.compress_accumulate_momentum(r1, v, grad, -0.1f, m), std::invalid_argument);
}

TEST_CASE("compressor_base: the constructor and set_density check their values",
          "[compressor_base]") {
  CHECK_THROWS_WITH(first_k({.density = 0.0}), Contains("density 0 is outside (0, 1]"));
  CHECK_THROWS_WITH(first_k({.density = 1.5}), Contains("density 1.5"));
  CHECK_THROWS_AS(first_k({.density = std::numeric_limits<double>::quiet_NaN()}),
                  std::invalid_argument);
  CHECK_THROWS_WITH(first_k({.guard_factor = 0.5}),
                    Contains("guard_factor 0.5 is outside [1, 1e6]"));
  CHECK_THROWS_WITH(first_k({.guard_factor = 2e6}), Contains("guard_factor 2000000"));
  CHECK_THROWS_WITH(first_k({.values = value_type::quantized}), Contains("values quantized"));
  CHECK_NOTHROW(first_k({.density = 1.0, .guard_factor = 1.0}));

  first_k c({.density = 0.5});
  c.set_density(0.5); // unchanged: no hook call
  CHECK(c.density_changes == 0);
  c.set_density(0.25);
  CHECK(c.density_changes == 1);
  CHECK(c.density() == 0.25);
  CHECK(c.get_options().density == 0.25);
  const std::vector<float> x(8, 1.0f);
  sparse_message m;
  CHECK(c.compress(x, m).k_target == 2); // from the next call
  CHECK_THROWS_WITH(c.set_density(0.0), Contains("density 0"));
  CHECK_THROWS_AS(c.set_density(-1.0), std::invalid_argument);
  CHECK(c.density() == 0.25); // nothing changed
  CHECK(c.density_changes == 1);
}

TEST_CASE("compressor_base: the checkpoint state round-trips and refuses another configuration",
          "[compressor_base]") {
  first_k c({.density = 0.5, .values = value_type::bf16});
  const std::vector<float> x(10, 1.0f);
  sparse_message m;
  c.compress(x, m);
  c.compress(x, m);
  c.set_density(0.125);
  const std::vector<std::byte> saved = save_state(c);
  CHECK(save_state(c) == saved); // deterministic

  first_k resumed({.density = 0.9, .values = value_type::bf16});
  load_state(resumed, saved);
  CHECK(resumed.runs == 2);          // Derived's own state, through its hooks
  CHECK(resumed.density() == 0.125); // the density is state, restored

  // a checked option that differs is named with both values; the object is unchanged
  first_k fp16({.density = 0.9, .values = value_type::fp16});
  CHECK_THROWS_WITH(load_state(fp16, saved),
                    Contains("first_k option 'values' differs: the checkpoint has 3, this "
                             "compressor 2"));
  CHECK(fp16.density() == 0.9);
  CHECK(fp16.runs == 0);
  first_k guard({.values = value_type::bf16, .guard_factor = 3.0});
  CHECK_THROWS_WITH(load_state(guard, saved), Contains("option 'guard_factor' differs"));
  // another compressor's state
  other_k other({.values = value_type::bf16});
  CHECK_THROWS_WITH(load_state(other, saved),
                    Contains("the checkpoint holds a 'first_k' compressor, this one is 'other_k'"));
  // the thread count is not part of the state
  first_k threads({.values = value_type::bf16, .threads = 4});
  CHECK_NOTHROW(load_state(threads, saved));
}

TEST_CASE("compressor_base: the non-finite policies around run()", "[compressor_base]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> grad{inf, 1.0f, 2.0f, 3.0f};
  sparse_message m;
  // raise: nonfinite_error naming the first element, nothing to send
  first_k raise({.density = 0.5, .nonfinite = nonfinite_policy::raise});
  CHECK_THROWS_AS(raise.compress(grad, m), nonfinite_error);
  CHECK(m.nnz() == 0);
  // skip_step with error feedback: the infinity is accumulated as 0, counted, and 0 is sent
  first_k skip({.density = 0.5, .nonfinite = nonfinite_policy::skip_step});
  std::vector<float> residual{0.5f, 0.0f, 0.0f, 0.0f};
  const selection_stats s = skip.compress_accumulate(residual, grad, m);
  CHECK(s.nonfinite == 1);
  CHECK(m.values == std::vector<float>{0.5f, 1.0f});
  CHECK(residual == std::vector<float>{0.0f, 0.0f, 2.0f, 3.0f});
  // propagate: sent as is
  first_k keep({.density = 0.5});
  keep.compress(grad, m);
  CHECK(m.values[0] == inf);
}

} // namespace compressor_compressor_base_test
