// SPDX-License-Identifier: Apache-2.0
// gradcomp::coded's per-rank loads (coded/exchange_load.hpp): the loads of the coded, uncoded and
// reduce-scatter exchanges against counts taken by simulating the exchange over subsets enumerated
// by bit masks (or over the placement), and the iteration-time model's choice of the variant.
#include <gradcomp/coded/cost.hpp>
#include <gradcomp/coded/exchange_load.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/cost/alpha_beta.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"

namespace coded_exchange_load_test {

using namespace gradcomp::coded;

// ---- cost model against a simulation of the exchange --------------------------------------------

namespace {

std::vector<int> members_of(unsigned mask) {
  std::vector<int> m;
  for (int i = 0; i < 32; ++i) {
    if ((mask >> i) & 1U) {
      m.push_back(i);
    }
  }
  return m;
}

struct counted {
  std::uint64_t sent_messages = 0;
  std::uint64_t received_messages = 0;
  std::uint64_t sent_bytes = 0;
  std::uint64_t received_bytes = 0;
  std::uint64_t reduced_bytes = 0;
};

std::uint64_t slice_length(std::uint64_t elements, int r, int position) {
  const auto ur = static_cast<std::uint64_t>(r);
  return elements / ur + (static_cast<std::uint64_t>(position) < elements % ur ? 1 : 0);
}

// per rank, by walking every group (bit masks) and every message of the coded exchange
std::vector<counted>
simulate_coded(int n, int r, std::uint64_t elements, std::uint64_t bytes, delivery mode) {
  std::vector<counted> c(static_cast<std::size_t>(n));
  std::uint64_t longest = 0;
  for (int pos = 0; pos < r; ++pos) {
    longest = std::max(longest, slice_length(elements, r, pos));
  }
  const std::uint64_t packet = longest * bytes;
  std::uint64_t parts = 0;
  for (unsigned mask = 0; mask < (1U << n); ++mask) {
    parts += std::popcount(mask) == r ? 1 : 0;
  }
  for (unsigned group = 0; group < (1U << n); ++group) {
    if (std::popcount(group) != r + 1) {
      continue;
    }
    for (const int sender : members_of(group)) {
      auto& s = c[static_cast<std::size_t>(sender)];
      const std::uint64_t transmissions =
          mode == delivery::multicast ? 1 : static_cast<std::uint64_t>(r);
      s.sent_messages += transmissions;
      s.sent_bytes += transmissions * packet;
      s.reduced_bytes += static_cast<std::uint64_t>(r - 1) * packet; // building the packet
      for (const int receiver : members_of(group)) {
        if (receiver == sender) {
          continue;
        }
        auto& d = c[static_cast<std::size_t>(receiver)];
        d.received_messages += 1;
        d.received_bytes += packet;
        d.reduced_bytes += static_cast<std::uint64_t>(r - 1) * packet; // cancelling
      }
    }
  }
  for (auto& x : c) {
    x.reduced_bytes += (parts - 1) * elements * bytes; // summing all parts
  }
  return c;
}

// per rank: every owner sends its slice of each part to every rank that lacks it
std::vector<counted> simulate_uncoded(int n, int r, std::uint64_t elements, std::uint64_t bytes) {
  std::vector<counted> c(static_cast<std::size_t>(n));
  std::uint64_t parts = 0;
  for (unsigned owners = 0; owners < (1U << n); ++owners) {
    if (std::popcount(owners) != r) {
      continue;
    }
    ++parts;
    const auto list = members_of(owners);
    for (int position = 0; position < r; ++position) {
      const int sender = list[static_cast<std::size_t>(position)];
      for (int receiver = 0; receiver < n; ++receiver) {
        if ((owners >> receiver) & 1U) {
          continue;
        }
        const std::uint64_t b = slice_length(elements, r, position) * bytes;
        c[static_cast<std::size_t>(sender)].sent_messages += 1;
        c[static_cast<std::size_t>(sender)].sent_bytes += b;
        c[static_cast<std::size_t>(receiver)].received_messages += 1;
        c[static_cast<std::size_t>(receiver)].received_bytes += b;
      }
    }
  }
  for (auto& x : c) {
    x.reduced_bytes = (parts - 1) * elements * bytes;
  }
  return c;
}

} // namespace

TEST_CASE("coded cost model matches the counts of a simulated exchange", "[coded][cost]") {
  for (int n = 2; n <= 7; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::uint64_t elements : {1UL, 5UL, 12UL, 13UL, 1000003UL}) {
        for (const std::uint64_t bytes : {2UL, 4UL}) {
          CAPTURE(n, r, elements, bytes);
          for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
            const exchange_load model = coded_exchange_load(n, r, elements, bytes, mode);
            for (const counted& c : simulate_coded(n, r, elements, bytes, mode)) {
              CHECK(model.sent_messages == c.sent_messages);
              CHECK(model.received_messages == c.received_messages);
              CHECK(model.sent_bytes == static_cast<double>(c.sent_bytes));
              CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
              CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
            }
          }
          const exchange_load model = uncoded_exchange_load(n, r, elements, bytes);
          std::uint64_t busiest = 0;
          for (const counted& c : simulate_uncoded(n, r, elements, bytes)) {
            CHECK(model.sent_messages == c.sent_messages);
            CHECK(model.received_messages == c.received_messages);
            CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
            CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
            CHECK(model.sent_bytes >= static_cast<double>(c.sent_bytes));
            busiest = std::max(busiest, c.sent_bytes);
          }
          CHECK(model.sent_bytes == static_cast<double>(busiest));
          // coding cuts what a multicast sender transmits by r, not what a rank receives
          const exchange_load multicast =
              coded_exchange_load(n, r, elements, bytes, delivery::multicast);
          CHECK(multicast.sent_bytes * r == model.sent_bytes);
          if (elements > 1000) { // padding to ceil(d / r) aside
            CHECK(multicast.received_bytes == Approx(model.received_bytes).epsilon(1e-5));
          }
        }
      }
    }
  }
}

namespace {

// per rank, the reduce-scatter form counted from the placement: every packet of every group
// (point to point or multicast), padded to the longest slice of any block, then a ring
// allgather in which rank k sends block k - s to k + 1 in step s = 0 .. n - 2
std::vector<counted>
simulate_reduce_scatter(int n, int r, std::size_t d, std::uint64_t bytes, delivery mode) {
  const placement p(n, r);
  const auto un = static_cast<std::size_t>(n);
  std::uint64_t longest = 0;
  for (std::size_t b = 0; b < un; ++b) {
    const index_range blk = split_evenly(d, un, b);
    for (std::size_t s = 0; s < static_cast<std::size_t>(r); ++s) {
      longest = std::max<std::uint64_t>(
          longest, split_evenly(blk.size(), static_cast<std::size_t>(r), s).size());
    }
  }
  const std::uint64_t packet = longest * bytes;
  std::vector<counted> c(un);
  for (std::size_t g = 0; g < p.group_count(); ++g) {
    for (const int sender : p.members(g)) {
      auto& s = c[static_cast<std::size_t>(sender)];
      const auto terms = p.coding_terms(g, sender);
      const std::uint64_t transmissions = mode == delivery::multicast ? 1 : terms.size();
      s.sent_messages += transmissions;
      s.sent_bytes += transmissions * packet;
      s.reduced_bytes += (terms.size() - 1) * packet;
      for (const coding_term& t : terms) {
        auto& x = c[static_cast<std::size_t>(t.receiver)];
        x.received_messages += 1;
        x.received_bytes += packet;
        x.reduced_bytes += (terms.size() - 1) * packet;
      }
    }
  }
  for (std::size_t k = 0; k < un; ++k) {
    for (std::size_t step = 0; step + 1 < un; ++step) {
      const std::size_t block = (k + un - step) % un;
      const std::uint64_t b = split_evenly(d, un, block).size() * bytes;
      c[k].sent_messages += 1;
      c[k].sent_bytes += b;
      c[(k + 1) % un].received_messages += 1;
      c[(k + 1) % un].received_bytes += b;
    }
    c[k].reduced_bytes += (p.part_count() - 1) * split_evenly(d, un, k).size() * bytes;
  }
  return c;
}

} // namespace

TEST_CASE("coded reduce-scatter cost model matches counts taken from the placement",
          "[coded][cost]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::size_t d : {0UL, 1UL, 4UL, 5UL, 12UL, 13UL, 61UL, 1000003UL}) {
        for (const std::uint64_t bytes : {2UL, 4UL}) {
          for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
            CAPTURE(n, r, d, bytes, mode == delivery::multicast);
            const auto counts = simulate_reduce_scatter(n, r, d, bytes, mode);
            exchange_load busiest;
            for (int k = 0; k < n; ++k) {
              CAPTURE(k);
              const counted& c = counts[static_cast<std::size_t>(k)];
              const exchange_load model = coded_reduce_scatter_load(n, r, d, bytes, mode, k);
              CHECK(model.sent_messages == c.sent_messages);
              CHECK(model.received_messages == c.received_messages);
              CHECK(model.sent_bytes == static_cast<double>(c.sent_bytes));
              CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
              CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
              busiest.sent_messages = std::max(busiest.sent_messages, c.sent_messages);
              busiest.received_messages = std::max(busiest.received_messages, c.received_messages);
              busiest.sent_bytes = std::max(busiest.sent_bytes, static_cast<double>(c.sent_bytes));
              busiest.received_bytes =
                  std::max(busiest.received_bytes, static_cast<double>(c.received_bytes));
              busiest.reduced_bytes =
                  std::max(busiest.reduced_bytes, static_cast<double>(c.reduced_bytes));
            }
            CHECK(coded_reduce_scatter_load(n, r, d, bytes, mode) == busiest);
            CHECK(coded_exchange_load(n, r, d, bytes, mode, exchange_variant::reduce_scatter) ==
                  busiest);
            CHECK(coded_exchange_load(n, r, d, bytes, mode, exchange_variant::full_recovery) ==
                  coded_exchange_load(n, r, d, bytes, mode));
          }
        }
      }
    }
  }
  // docs/coded.md, "Load formulas", table rows "R, r = 2" and "R, r = 3": multicast coded
  // packets plus a ring allgather, in units of d (the table rounds to 2 decimals)
  const std::size_t d = 720000; // divisible by n r for every entry
  const struct {
    int n, r;
    double send;
  } table[] = {{3, 2, 0.83}, {4, 2, 1.13}, {5, 2, 1.40}, {6, 2, 1.67}, {8, 2, 2.19},
               {4, 3, 0.83}, {5, 3, 1.07}, {6, 3, 1.39}, {8, 3, 2.33}};
  for (const auto& row : table) {
    CAPTURE(row.n, row.r);
    for (int k = 0; k < row.n; ++k) {
      const exchange_load load =
          coded_reduce_scatter_load(row.n, row.r, d, 1, delivery::multicast, k);
      CHECK(load.sent_bytes / static_cast<double>(d) == Approx(row.send).margin(0.005));
    }
  }
  // reduce-scatter sends less than the full form exactly when C(n - 1, r) > 1, i.e. r < n - 1
  const std::size_t divisible = 840 * 840; // by n r for every n <= 8, r < n: no padding
  for (int n = 2; n <= 8; ++n) {
    for (int r = 1; r < n; ++r) {
      CAPTURE(n, r);
      const double rs =
          coded_reduce_scatter_load(n, r, divisible, 4, delivery::point_to_point).sent_bytes;
      const double full =
          coded_exchange_load(n, r, divisible, 4, delivery::point_to_point).sent_bytes;
      if (r < n - 1) {
        CHECK(rs < full);
      } else {
        CHECK(rs == full);
      }
    }
  }
  // the iteration-time model picks the variant from coded_model
  const auto net = gradcomp::cost::network::from_link(1e9, 5e-5);
  const workload w{.gradient_elements = 1'000'000, .bytes_per_element = 4, .compute_seconds = 0.01};
  const coded_model rs_model{.variant = exchange_variant::reduce_scatter};
  CHECK(coded_iteration_seconds(5, 2, w, net, rs_model) ==
        Approx(2 * 0.01 + exchange_seconds(coded_reduce_scatter_load(5, 2, 1'000'000, 4,
                                                                     delivery::point_to_point),
                                           net, link_model::full_duplex)));
  CHECK(choose_redundancy(5, w, net, rs_model).table[1].iteration_seconds ==
        coded_iteration_seconds(5, 2, w, net, rs_model));
}

} // namespace coded_exchange_load_test
