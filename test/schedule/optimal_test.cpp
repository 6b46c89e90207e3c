// SPDX-License-Identifier: Apache-2.0
// The exact planner against exhaustive search over all 2^(L-1) groupings of thousands of
// random small profiles in both placements, with and without compression and sparsification,
// with and without a different message cost after backward;
// every other strategy is a valid grouping and never beats it.
#include <gradcomp/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_optimal_test {

using namespace gradcomp::schedule;

namespace {

//! The least t_iter over all 2^(L-1) groupings, by enumeration (bit k of the mask: a group
//! ends after backward position k).
double exhaustive_minimum(const gradcomp::schedule::detail::backward_view& view) {
  const std::size_t n = view.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> ends;
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (n - 1)); ++mask) {
    ends.clear();
    for (std::size_t k = 0; k + 1 < n; ++k) {
      if ((mask >> k) & 1U) {
        ends.push_back(k + 1);
      }
    }
    ends.push_back(n);
    best = std::min(best, view.t_iter(ends));
  }
  return best;
}

//! A random instance: the profile and the model, and a description for failure messages.
struct instance {
  layer_profile profile;
  cost_model model;
  std::string description;
};

//! Random profiles over a wide range of regimes (compute- or communication-bound, cheap or
//! expensive compression, dense or sparse messages); half of them with small integers, which
//! makes ties common.
instance random_instance(std::mt19937_64& rng, std::size_t layers, compression_placement place) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 6);
  const bool integers = unit(rng) < 0.5;
  const auto value = [&](double scale) {
    return integers ? static_cast<double>(small(rng)) * scale : unit(rng) * 6.0 * scale;
  };
  instance x;
  std::ostringstream d;
  d.precision(17);
  x.profile.forward_seconds = value(0.5);
  d << "t_f " << x.profile.forward_seconds << "; layers (name numel t_b):";
  for (std::size_t i = 0; i < layers; ++i) {
    layer l;
    l.name = "l";
    l.name += std::to_string(i); // not "l" + ...: g++ 12 warns (-Wrestrict) on that
    l.numel = integers ? static_cast<std::uint64_t>(small(rng)) + 1
                       : static_cast<std::uint64_t>(std::exp(unit(rng) * std::log(2e4))) + 1;
    l.backward_seconds = unit(rng) < 0.15 ? 0.0 : value(1.0);
    d << " (" << l.name << " " << l.numel << " " << l.backward_seconds << ")";
    x.profile.layers.push_back(l);
  }
  const double alpha = value(1.0);
  const double beta = integers ? value(0.25) : value(1.0) * 2e-4;
  std::optional<affine_cost> compression;
  if (unit(rng) < 0.7) {
    compression = affine_cost{value(0.5), integers ? value(0.5) : value(1.0) * 2e-4};
  }
  std::optional<double> density;
  if (unit(rng) < 0.3) {
    density = std::vector<double>{0.01, 0.1, 0.5}[small(rng) % 3];
  }
  x.model = cost_model::affine(alpha, beta, compression, density, place);
  d << "; alpha " << alpha << " beta " << beta;
  if (unit(rng) < 0.4) { // a different cost after backward (cheaper, or not)
    const double alpha_after = value(0.5);
    const double beta_after = integers ? value(0.25) : value(1.0) * 2e-4;
    x.model.communication_seconds_after_backward = affine_cost{alpha_after, beta_after};
    d << "; after backward alpha " << alpha_after << " beta " << beta_after;
  }
  if (compression) {
    d << "; compression " << compression->fixed_seconds << " + " << compression->seconds_per_unit
      << " numel " << (place == compression_placement::on_compute_stream ? "on" : "off")
      << " stream";
  }
  if (density) {
    d << "; density " << *density;
  }
  x.description = d.str();
  return x;
}

//! Tolerance for "equal" t_iter: the on-stream DP sums a group's backward seconds by prefix
//! differences instead of one by one, so it can differ from the simulator in the last bits.
double tolerance(double t) {
  return 1e-9 * std::max(1.0, std::abs(t));
}

struct tally {
  std::size_t instances = 0;
  std::size_t greedy_suboptimal = 0; // dlgs_greedy or mgwfbp strictly above the optimum
  std::size_t largest_front = 0;
};

void check_instance(const instance& x, tally& counts) {
  INFO(x.description);
  const gradcomp::schedule::detail::backward_view view(x.profile, x.model);
  const std::size_t n = view.size();
  const double minimum = exhaustive_minimum(view);

  const grouping best = optimal(x.profile, x.model);
  REQUIRE(is_valid_grouping(best, n));
  const double t_best = t_iter_seconds(x.profile, x.model, best);
  CHECK(t_best <= minimum + tolerance(minimum));
  CHECK(t_best >= minimum); // a grouping cannot beat the minimum over all groupings

  const gradcomp::schedule::detail::exact_search_result search =
      gradcomp::schedule::detail::exact_search(view, true);
  CHECK(std::abs(search.t_iter_seconds - t_best) <= tolerance(t_best));
  if (x.model.placement == compression_placement::off_compute_stream) {
    CHECK(search.t_iter_seconds == t_best); // the same arithmetic as the simulator
  }
  counts.largest_front = std::max(counts.largest_front, search.max_front_size);
  if (!x.model.compression_seconds) { // E1: one state per prefix is exact without compression
    CHECK(gradcomp::schedule::detail::exact_search(view, false).t_iter_seconds == t_best);
  }

  for (const strategy s : all_strategies) {
    const grouping g = plan(s, x.profile, x.model, {.bucket_bytes = 24});
    INFO("strategy " << name(s));
    REQUIRE(is_valid_grouping(g, n));
    const double t = t_iter_seconds(x.profile, x.model, g);
    CHECK(t >= minimum);
    CHECK(t >= t_best - tolerance(t_best));
  }
  const double greedy =
      std::max(t_iter_seconds(x.profile, x.model, dlgs_greedy(x.profile, x.model)),
               t_iter_seconds(x.profile, x.model, mgwfbp(x.profile, x.model)));
  if (greedy > t_best + tolerance(t_best)) {
    ++counts.greedy_suboptimal;
  }
  ++counts.instances;
}

} // namespace

TEST_CASE("optimal equals exhaustive search on random small profiles", "[schedule][optimal]") {
  for (const auto place :
       {compression_placement::off_compute_stream, compression_placement::on_compute_stream}) {
    std::mt19937_64 rng(place == compression_placement::on_compute_stream ? 2024 : 1789);
    tally counts;
    for (int trial = 0; trial < 2500; ++trial) {
      const std::size_t layers = 1 + static_cast<std::size_t>(trial % 10); // L = 1 .. 10
      check_instance(random_instance(rng, layers, place), counts);
    }
    for (int trial = 0; trial < 200; ++trial) {
      const std::size_t layers = 11 + static_cast<std::size_t>(trial % 4); // L = 11 .. 14
      check_instance(random_instance(rng, layers, place), counts);
    }
    CAPTURE(counts.instances, counts.greedy_suboptimal, counts.largest_front);
    // the instances do separate the greedy rules from the optimum, and need the Pareto front
    CHECK(counts.greedy_suboptimal > counts.instances / 50);
    CHECK(counts.largest_front >= 2);
  }
}

TEST_CASE("one state per prefix is not exact with a compression stream", "[schedule][optimal]") {
  // Backward order t_b = [2, 0, 4], numel [5, 2, 5], t_f = 0; s(m) = 5 + 5 m off the compute
  // stream; T = 4 + 0.75 B = 4 + 3 m. After the first two positions, {0}{1} has the earlier
  // last message (compression ends 47, message 61) and {0, 1} the earlier compression stream
  // (42, 67); only the latter reaches 91 (then [42 -> 72], message [72, 91]); the one-state
  // DP keeps (47, 61) and ends at 96.
  const layer_profile p{{{"l0", 5, 4.0}, {"l1", 2, 0.0}, {"l2", 5, 2.0}}, 0.0};
  const cost_model m = cost_model::affine(4.0, 0.75, affine_cost{5.0, 5.0}, std::nullopt,
                                          compression_placement::off_compute_stream);
  const gradcomp::schedule::detail::backward_view view(p, m);
  CHECK(gradcomp::schedule::detail::exact_search(view, false).t_iter_seconds == 96.0);
  CHECK(gradcomp::schedule::detail::exact_search(view, true).t_iter_seconds == 91.0);
  CHECK(optimal(p, m) == grouping{{0, 2}, {2, 3}});
  CHECK(exhaustive_minimum(view) == 91.0);
}

} // namespace schedule_optimal_test
