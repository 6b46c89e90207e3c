// SPDX-License-Identifier: Apache-2.0
// gradcomp::coded's cost model (coded/cost.hpp): seconds under both link models with the ring as
// gradcomp::cost has it, choose_redundancy against an exhaustive evaluation, the T(r) table of
// docs/coded.md; bad parameters (of the loads, coded/exchange_load.hpp, too). The loads against a
// simulated exchange: exchange_load_test.cpp.
#include <gradcomp/coded/cost.hpp>
#include <gradcomp/cost/alpha_beta.hpp>

#include <cstddef>
#include <limits>
#include <set>
#include <vector>

#include "../common/catch.hpp"

namespace coded_cost_test {

using namespace gradcomp::coded;

TEST_CASE("coded cost model: seconds under both link models, ring as gradcomp::cost has it",
          "[coded][cost]") {
  const gradcomp::cost::network net{
      .alpha_seconds = 2e-5, .beta_seconds_per_byte = 1e-9, .gamma_seconds_per_byte = 1e-10};
  const exchange_load load{.sent_messages = 3,
                           .received_messages = 6,
                           .sent_bytes = 1000.0,
                           .received_bytes = 4000.0,
                           .reduced_bytes = 500.0};
  CHECK(exchange_seconds(load, net, link_model::sender_bound) ==
        Approx(3 * 2e-5 + 1000 * 1e-9 + 500 * 1e-10));
  CHECK(exchange_seconds(load, net, link_model::full_duplex) ==
        Approx(6 * 2e-5 + 4000 * 1e-9 + 500 * 1e-10));
  for (int n = 1; n <= 9; ++n) {
    CAPTURE(n);
    const exchange_load ring = ring_allreduce_load(n, 1000, 4);
    for (const link_model link : {link_model::sender_bound, link_model::full_duplex}) {
      CHECK(exchange_seconds(ring, net, link) ==
            Approx(gradcomp::cost::ring_allreduce_seconds(4000.0, n, net)).margin(1e-15));
    }
  }
  const workload w{.gradient_elements = 1000, .bytes_per_element = 4, .compute_seconds = 0.01};
  CHECK(ring_iteration_seconds(4, w, net) ==
        Approx(0.01 + gradcomp::cost::ring_allreduce_seconds(4000.0, 4, net)));
  CHECK(coded_iteration_seconds(4, 2, w, net, {delivery::multicast, link_model::sender_bound}) ==
        Approx(2 * 0.01 + exchange_seconds(coded_exchange_load(4, 2, 1000, 4, delivery::multicast),
                                           net, link_model::sender_bound)));
  CHECK(uncoded_iteration_seconds(4, 2, w, net) ==
        Approx(2 * 0.01 + exchange_seconds(uncoded_exchange_load(4, 2, 1000, 4), net,
                                           link_model::full_duplex)));
  // docs/coded.md, "Load formulas", table row "F, r = 2", n = 4: each rank sends 1.5 d (one
  // packet of d / 2 in each of its C(3, 2) = 3 groups)
  CHECK(coded_exchange_load(4, 2, 1000, 1, delivery::multicast).sent_bytes == 1500.0);
  // n = 3, r = 2 worked example: each worker sends d / 2 against d uncoded
  CHECK(coded_exchange_load(3, 2, 1000, 1, delivery::multicast).sent_bytes == 500.0);
  CHECK(uncoded_exchange_load(3, 2, 1000, 1).sent_bytes == 1000.0);
}

TEST_CASE("choose_redundancy returns the argmin of an exhaustive evaluation", "[coded][cost]") {
  const std::vector<gradcomp::cost::network> nets{
      gradcomp::cost::network::from_link(1e9, 5e-5),
      gradcomp::cost::network::from_link(1e11, 2e-6),
      {.alpha_seconds = 1e-3, .beta_seconds_per_byte = 1e-10, .gamma_seconds_per_byte = 1e-11}};
  std::set<int> chosen;
  for (int n = 2; n <= 9; ++n) {
    for (const auto& net : nets) {
      for (const double compute : {0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0}) {
        for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
          for (const link_model link : {link_model::sender_bound, link_model::full_duplex}) {
            const workload w{
                .gradient_elements = 1'000'003, .bytes_per_element = 4, .compute_seconds = compute};
            const coded_model model{mode, link};
            CAPTURE(n, compute, net.alpha_seconds, net.beta_seconds_per_byte);
            const redundancy_choice c = choose_redundancy(n, w, net, model);
            REQUIRE(c.table.size() == static_cast<std::size_t>(n - 1));
            int best = 0;
            double best_seconds = std::numeric_limits<double>::infinity();
            for (int r = 1; r < n; ++r) {
              const double t = coded_iteration_seconds(n, r, w, net, model);
              const redundancy_cost& row = c.table[static_cast<std::size_t>(r - 1)];
              CHECK(row.redundancy == r);
              CHECK(row.iteration_seconds == t);
              CHECK(row.compute_seconds == r * compute);
              CHECK(row.compute_seconds + row.communication_seconds == row.iteration_seconds);
              if (t < best_seconds) {
                best = r;
                best_seconds = t;
              }
            }
            CHECK(c.redundancy == best);
            CHECK(c.iteration_seconds == best_seconds);
            CHECK(c.ring_iteration_seconds == ring_iteration_seconds(n, w, net));
            chosen.insert(c.redundancy);
            // limited to r <= 2
            if (n >= 3) {
              const redundancy_choice limited = choose_redundancy(n, w, net, model, 2);
              CHECK(limited.table.size() == 2);
              CHECK(limited.redundancy ==
                    (c.table[1].iteration_seconds < c.table[0].iteration_seconds ? 2 : 1));
            }
          }
        }
      }
    }
  }
  CHECK(chosen.size() >= 3); // the cases above do not all pick the same r
  // ties go to the smallest r: a free network and no compute
  const redundancy_choice tie = choose_redundancy(5, workload{.gradient_elements = 100}, {});
  CHECK(tie.redundancy == 1);
  CHECK(tie.iteration_seconds == 0.0);
}

TEST_CASE("the T(r) table of docs/coded.md for n = 4", "[coded][cost]") {
  // 25e6 fp32-sized elements (100 MB), 10 Gbit/s, 50 us latency, 0.05 s compute at r = 1
  const auto net = gradcomp::cost::network::from_link(10e9, 50e-6);
  const workload w{
      .gradient_elements = 25'000'000, .bytes_per_element = 4, .compute_seconds = 0.05};
  const redundancy_choice p2p = choose_redundancy(4, w, net);
  CHECK(p2p.ring_iteration_seconds == Approx(0.1703));
  CHECK(p2p.table[0].iteration_seconds == Approx(0.29015));
  CHECK(p2p.table[1].iteration_seconds == Approx(0.3403));
  CHECK(p2p.table[2].iteration_seconds == Approx(0.23015));
  CHECK(p2p.redundancy == 3);
  const redundancy_choice mc =
      choose_redundancy(4, w, net, {delivery::multicast, link_model::sender_bound});
  CHECK(mc.table[0].iteration_seconds == Approx(0.29015));
  CHECK(mc.table[1].iteration_seconds == Approx(0.22015));
  CHECK(mc.table[2].iteration_seconds == Approx(0.1767167));
  CHECK(mc.redundancy == 3);
  const workload light{
      .gradient_elements = 25'000'000, .bytes_per_element = 4, .compute_seconds = 0.02};
  const redundancy_choice mc_light =
      choose_redundancy(4, light, net, {delivery::multicast, link_model::sender_bound});
  CHECK(mc_light.iteration_seconds == Approx(0.0867167));
  CHECK(mc_light.ring_iteration_seconds == Approx(0.1403));
  CHECK(choose_redundancy(4, light, net).iteration_seconds == Approx(0.14015));
}

// ---- bad parameters ---------------------------------------------------------------------------

TEST_CASE("coded cost model: bad parameters are rejected with messages naming the value",
          "[coded][errors]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(coded_exchange_load(1, 1, 10, 4, delivery::multicast), Contains("n = 1"));
  CHECK_THROWS_WITH(coded_exchange_load(4, 4, 10, 4, delivery::multicast), Contains("r = 4"));
  CHECK_THROWS_WITH(uncoded_exchange_load(4, 0, 10, 4), Contains("r = 0"));
  CHECK_THROWS_WITH(coded_exchange_load(4, 2, 10, 0, delivery::multicast),
                    Contains("bytes per element 0"));
  CHECK_THROWS_WITH(ring_allreduce_load(0, 10, 4), Contains("rank count 0"));
  CHECK_THROWS_WITH(coded_reduce_scatter_load(4, 2, 10, 4, delivery::multicast, 4),
                    Contains("rank 4") && Contains("[0, n = 4)"));
  CHECK_THROWS_WITH(coded_reduce_scatter_load(4, 4, 10, 4, delivery::multicast), Contains("r = 4"));
  CHECK_THROWS_WITH(coded_exchange_load(120, 60, 10, 4, delivery::multicast),
                    Contains("does not fit"));
  const gradcomp::cost::network net = gradcomp::cost::network::from_link(1e9, 1e-5);
  CHECK_THROWS_WITH(choose_redundancy(4, workload{.compute_seconds = -1.0}, net), Contains("-1"));
  CHECK_THROWS_WITH(choose_redundancy(4, workload{}, net, {}, 4), Contains("max redundancy 4"));
  CHECK_THROWS_WITH(choose_redundancy(1, workload{}, net), Contains("n = 1"));
  CHECK_THROWS_WITH(choose_redundancy(100, workload{}, net), Contains("does not fit"));
  CHECK(choose_redundancy(100, workload{.gradient_elements = 10}, net, {}, 3).table.size() == 3);
}

} // namespace coded_cost_test
