// SPDX-License-Identifier: Apache-2.0
// message_cost (cost/transport.hpp) against hand-computed values.
#include <gradcomp/cost/transport.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "../common/catch.hpp"

namespace cost_transport_test {

using namespace gradcomp::cost;

TEST_CASE("message_cost prices the ring, MPI's allreduce and the sparse allgather", "[cost]") {
  const network net{.alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9};
  // P = 4, 1e6 bytes: 2 x 3 x 1e-5 + 2 x 3 x 1e-9 x 1e6 / 4 = 6e-5 + 1.5e-3
  const message_cost ring(transport_kind::ring_allreduce, 4, net);
  CHECK(ring(1'000'000) == Approx(1.56e-3));
  CHECK(message_cost(transport_kind::native_allreduce, 4, net)(1'000'000) == Approx(1.56e-3));
  // P = 3, 800-byte messages: the 32-byte header round 2 x (2e-6 + 32 x 1e-8) plus the
  // messages 2 x (2e-6 + 800 x 1e-8) = 4.64e-6 + 2e-5
  const network slow{.alpha_seconds = 2e-6, .beta_seconds_per_byte = 1e-8};
  CHECK(message_cost(transport_kind::sparse_allgather, 3, slow)(800) == Approx(2.464e-5));
  // nothing to exchange: no transport, or one rank
  CHECK(message_cost(transport_kind::none, 4, net)(1'000'000) == 0.0);
  for (const transport_kind k :
       {transport_kind::ring_allreduce, transport_kind::native_allreduce,
        transport_kind::sparse_allgather, transport_kind::parameter_server}) {
    CAPTURE(name(k));
    CHECK(message_cost(k, 1, net)(1'000'000) == 0.0);
  }
  CHECK(message_cost(transport_kind::hierarchical_allreduce, 1, net, {.group_size = 2})(1000) ==
        0.0);
  CHECK(ring(0) == Approx(6e-5));
}

TEST_CASE("message_cost prices gTop-k per tree level", "[cost]") {
  const network net{.alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9};
  // 8000-byte messages: k = 1000 pairs; P = 8: 3 levels of 9 alpha + 24 k beta
  CHECK(message_cost(transport_kind::gtopk, 8, net)(8000) == Approx(3 * (9e-5 + 2.4e-5)));
  // P = 5 needs 3 levels too; P = 2 one
  CHECK(message_cost(transport_kind::gtopk, 5, net)(8000) == Approx(3 * (9e-5 + 2.4e-5)));
  CHECK(message_cost(transport_kind::gtopk, 2, net)(8000) == Approx(9e-5 + 2.4e-5));
  CHECK(message_cost(transport_kind::gtopk, 1, net)(8000) == 0.0);
  // the busiest rank's bytes: 3 levels of (8 + 4k) + (8 + 8k)
  CHECK(gtopk_bytes_sent(1000, 8) == 3 * (16.0 + 12.0 * 1000));
  CHECK(gtopk_bytes_sent(1000, 1) == 0.0);
  CHECK(name(transport_kind::gtopk) == "gtopk");
}

TEST_CASE("message_cost prices Ok-Topk's two phases", "[cost]") {
  const network net{.alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9};
  // k = 1000 pairs at P = 8: 3 x 7 + 3 latencies; per phase 7 blocks of 32 + 8 x 125 bytes,
  // sizes 56 (alltoall) and 112 (allgather of size and count)
  const double bytes = 56 + 7 * (32 + 1000) + 112 + 7 * (32 + 1000);
  CHECK(oktopk_bytes_sent(1000, 1000, 8) == bytes);
  CHECK(message_cost(transport_kind::oktopk, 8, net)(8000) == Approx(24e-5 + bytes * 1e-9));
  CHECK(message_cost(transport_kind::oktopk, 1, net)(8000) == 0.0);
  CHECK(oktopk_bytes_sent(1000, 1000, 1, 8.0, true, true) == 0.0);
  // repartition: 7 boundaries x 8 bytes x 3 rounds; threshold: 4 histograms x 1024 x 3 rounds
  CHECK(oktopk_bytes_sent(1000, 1000, 8, 8.0, true, true) == bytes + 168 + 12288);
  // 2 (P-1)/P k pairs against the allgather's (P-1) k: about a quarter at P = 8
  CHECK(oktopk_bytes_sent(1000, 1000, 8) / (7 * 8000.0) == Approx(0.261).epsilon(0.01));
  CHECK(name(transport_kind::oktopk) == "oktopk");
}

TEST_CASE("message_cost prices the parameter server with its placement", "[cost]") {
  const network bw{.beta_seconds_per_byte = 1e-9};
  // servers = 0: one co-located server per rank, S = P = 4, 1e6 bytes at 1 ns/B: push phase
  // 3 parts of 2.5e5 in, pull phase 3 shards of 2.5e5 out: 1.5e6 x 1e-9 = 1.5e-3
  CHECK(message_cost(transport_kind::parameter_server, 4, bw)(1'000'000) == Approx(1.5e-3));
  // S = 1: 3 pushes of 1e6 in, then 3 pulls of 1e6 out: 6e-3
  CHECK(message_cost(transport_kind::parameter_server, 4, bw, {.servers = 1})(1'000'000) ==
        Approx(6e-3));
  // 6 ranks, 2 dedicated servers: W = 4; push 4 parts of 5e5 in, pull 5 shards of 5e5 out;
  // latency 5 (alltoall) + 3 (verdict, ceil(log2 6)) + 4 + 10 = 22 alpha; gamma on 4 parts
  // of 5e5
  const network full{
      .alpha_seconds = 2e-6, .beta_seconds_per_byte = 1e-8, .gamma_seconds_per_byte = 1e-10};
  const transport_options dedicated{.servers = 2, .placement = server_placement::dedicated};
  CHECK(message_cost(transport_kind::parameter_server, 6, full, dedicated)(1'000'000) ==
        Approx(4.4e-5 + 0.045 + 2e-4));
}

TEST_CASE("message_cost prices the parameter server's sparse pull as the pushes' union", "[cost]") {
  const network bw{.beta_seconds_per_byte = 1e-9};
  const message_cost ps(transport_kind::parameter_server, 4, bw, {.servers = 1});
  // 4 workers push 1e4 bytes of a 1e6-byte group: 3 pushes of 1e4 in, 3 pulls of the union
  // (at most 4 x 1e4) out: (3e4 + 1.2e5) x 1e-9
  CHECK(ps(10'000, 1'000'000) == Approx(1.5e-4));
  // 1e5-byte pushes: the union bound 4e5 is below the group: 3e5 in, 1.2e6 out
  CHECK(ps(100'000, 1'000'000) == Approx(1.5e-3));
  // a union bound above the dense group is pulled dense: 9e5 in, 3e6 out
  CHECK(ps(300'000, 1'000'000) == Approx(3.9e-3));
  // a dense push (b = d) and the one-argument form are the dense pull: 6e-3
  CHECK(ps(1'000'000, 1'000'000) == Approx(6e-3));
  CHECK(ps(1'000'000) == Approx(6e-3));
  // the dense pull option: 3e4 in, 3e6 out
  const message_cost dense_pull(transport_kind::parameter_server, 4, bw,
                                {.servers = 1, .dense_pull = true});
  CHECK(dense_pull(10'000, 1'000'000) == Approx(3.03e-3));
  // other transports ignore the dense size
  const message_cost ring(transport_kind::ring_allreduce, 4, bw);
  CHECK(ring(10'000, 1'000'000) == ring(10'000));
}

TEST_CASE("message_cost prices the hierarchical allreduce by group and variant", "[cost]") {
  const network inter{.alpha_seconds = 2e-6, .beta_seconds_per_byte = 1e-8};
  const network intra{.alpha_seconds = 1e-6, .beta_seconds_per_byte = 1e-10};
  // the message as one piece (the transport's pipelined pieces: alpha_beta_test.cpp)
  // 8 ranks, groups of 4, leader: 2 x (3e-6 + 1e-4) + (4e-6 + 1e-2) = 0.01021
  const transport_options leader{.group_size = 4, .intra_group = intra, .piece_bytes = 0.0};
  CHECK(message_cost(transport_kind::hierarchical_allreduce, 8, inter, leader)(1'000'000) ==
        Approx(0.01021));
  // reduce-scatter: 2 x (3e-6 + 7.5e-5) + (4e-6 + 2.5e-3) = 2.66e-3
  const transport_options rs{.group_size = 4,
                             .variant = hierarchical_variant::reduce_scatter,
                             .intra_group = intra,
                             .piece_bytes = 0.0};
  CHECK(message_cost(transport_kind::hierarchical_allreduce, 8, inter, rs)(1'000'000) ==
        Approx(2.66e-3));
  // no intra-group network given: the same network everywhere. 4 ranks, groups of 2, 1 ns/B:
  // reduce 1e6, ring of 2 leaders 1e6, broadcast 1e6 bytes through one link: 3e-3
  const network bw{.beta_seconds_per_byte = 1e-9};
  CHECK(message_cost(transport_kind::hierarchical_allreduce, 4, bw,
                     {.group_size = 2, .piece_bytes = 0.0})(1'000'000) == Approx(3e-3));
  // a group larger than P is one group of P, as in the transport: leader, one group of 4 at
  // 1 ns/B, no ring: reduce 1e6 + broadcast 1e6 bytes = 2e-3
  CHECK(message_cost(transport_kind::hierarchical_allreduce, 4, bw, {.group_size = 9})(1'000'000) ==
        Approx(2e-3));
}

TEST_CASE("message_cost is a copyable cost function and rejects bad parameters", "[cost]") {
  const network net{.alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9};
  const std::function<double(std::uint64_t)> f =
      message_cost(transport_kind::ring_allreduce, 4, net);
  CHECK(f(1'000'000) == Approx(1.56e-3));
  const message_cost c(transport_kind::parameter_server, 4, net, {.servers = 2});
  CHECK(c.kind() == transport_kind::parameter_server);
  CHECK(c.ranks() == 4);
  CHECK(c.options().servers == 2);
  CHECK(c.net().alpha_seconds == 1e-5);
  CHECK(name(transport_kind::hierarchical_allreduce) == "hierarchical_allreduce");
  CHECK(name(transport_kind::none) == "none");

  using K = transport_kind;
  CHECK_THROWS_AS(message_cost(K::ring_allreduce, 0, net), std::invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(message_cost(K::ring_allreduce, 4, {.alpha_seconds = -1.0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::ring_allreduce, 4, {.beta_seconds_per_byte = nan}),
                  std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::hierarchical_allreduce, 4, net,
                               {.group_size = 2, .intra_group = network{.alpha_seconds = nan}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::parameter_server, 4, net, {.servers = -1}),
                  std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::parameter_server, 4, net, {.servers = 5}), std::invalid_argument);
  CHECK_THROWS_AS(
      message_cost(K::parameter_server, 4, net, {.placement = server_placement::dedicated}),
      std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::parameter_server, 4, net,
                               {.servers = 4, .placement = server_placement::dedicated}),
                  std::invalid_argument);
  CHECK_THROWS_AS(message_cost(K::hierarchical_allreduce, 4, net), std::invalid_argument);
  // options that belong to other kinds are not checked
  CHECK_NOTHROW(message_cost(K::ring_allreduce, 4, net, {.servers = -1, .group_size = -1}));
}

} // namespace cost_transport_test
