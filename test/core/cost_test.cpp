// SPDX-License-Identifier: Apache-2.0
// Cost models against hand-computed values.
#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/volume.hpp>

#include <catch2/catch.hpp>

#include <array>

using namespace gradcomp::cost;

TEST_CASE("ring allreduce follows S4's formula", "[cost]") {
  const network net{
      .alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9, .gamma_seconds_per_byte = 1e-10};
  // P = 4, M = 1e6: 2*3*1e-5 + (2*3*1e-9 + 3*1e-10) * 1e6 / 4 = 6e-5 + 6.3e-3/4
  CHECK(ring_allreduce_seconds(1e6, 4, net) == Approx(6e-5 + 1.575e-3));
  CHECK(ring_allreduce_seconds(1e6, 1, net) == 0.0);
  // toolchain notes: 64 MiB over 4 hosts at 1 Gbit/s, bound 2 * 3/4 * 64 MiB / 125 MB/s
  const network gigabit = network::from_link(1e9, 0.0);
  CHECK(ring_allreduce_seconds(64.0 * 1024 * 1024, 4, gigabit) == Approx(0.805306368));
  CHECK_THROWS_AS(ring_allreduce_seconds(1.0, 0, net), std::invalid_argument);
}

TEST_CASE("allgather, sparse allgather, parameter server and hierarchical models", "[cost]") {
  const network net{.alpha_seconds = 2e-6, .beta_seconds_per_byte = 1e-8};
  CHECK(allgather_seconds(1000, 4, net) == Approx(3 * (2e-6 + 1e-5)));
  CHECK(sparse_allgather_seconds(100, 8, 3, net) ==
        Approx(2 * (2e-6 + 24e-8) + 2 * (2e-6 + 800e-8)));
  // W = 3 workers, S = 1 server, 1e4 bytes each way: 2*3*a + 3*b*(2e4)/1
  CHECK(parameter_server_seconds(1e4, 1e4, 3, 1, net) == Approx(6 * 2e-6 + 3 * 1e-8 * 2e4));
  CHECK(parameter_server_seconds(1e4, 1e4, 3, 2, net) == Approx(6 * 2e-6 + 3 * 1e-8 * 1e4));
  // 8 ranks in groups of 4: intra reduce + ring over 2 leaders + intra broadcast
  const network intra{.alpha_seconds = 1e-6, .beta_seconds_per_byte = 1e-10};
  const double m = 1e6;
  const double expected = (3 * 1e-6 + 0.75 * m * 1e-10) + ring_allreduce_seconds(m, 2, net) +
                          (3 * 1e-6 + 0.75 * m * 1e-10);
  CHECK(hierarchical_allreduce_seconds(m, 8, 4, intra, net) == Approx(expected));
  CHECK_THROWS_AS(hierarchical_allreduce_seconds(m, 8, 9, intra, net), std::invalid_argument);
}

TEST_CASE("S5 volumes and S2's fully connected layer rule", "[cost]") {
  CHECK(data_parallel_all_to_all_bytes(1e6, 4, 4) == 4.8e7);
  CHECK(data_parallel_ring_bytes_per_device(1e6, 4, 4) == Approx(6e6));
  const std::array<double, 2> outs{512, 10};
  CHECK(tensor_parallel_bytes(outs, 4, 2) == Approx((512 + 10) * 4 * 2));
  CHECK(pipeline_parallel_bytes(outs, 2) == Approx(1044));
  // VGG-16 FC1: K = 25088, N = 4096
  CHECK(fc_data_parallel_values(25088, 4096) == 25088.0 * 4096 + 4096);
  CHECK(fc_model_parallel_values(32, 25088, 4096, 2) == 3.0 * 32 * 25088 * 2 + 2.0 * 32 * 4096 * 2);
  // threshold (K+1)N/(3K+2N) = 25089*4096/(75264+8192) ~ 1231: M P = 64 prefers model parallel
  CHECK(fc_prefer_model_parallel(32, 25088, 4096, 2));
  CHECK_FALSE(fc_prefer_model_parallel(1024, 25088, 4096, 2));
  // a small FC layer (FC3 of VGG: 4096 -> 1000): threshold ~ 305, so M P = 512 prefers data
  CHECK_FALSE(fc_prefer_model_parallel(128, 4096, 1000, 4));
}

#include <gradcomp/cost/fit.hpp>

TEST_CASE("fit_line recovers an exact line and reports its quality", "[cost][fit]") {
  const std::array<double, 4> x{1e3, 4e3, 16e3, 64e3};
  std::array<double, 4> t{};
  for (std::size_t i = 0; i < x.size(); ++i) {
    t[i] = 5e-5 + 2e-9 * x[i];
  }
  const line_fit f = fit_line(x, t);
  CHECK(f.intercept == Approx(5e-5));
  CHECK(f.slope == Approx(2e-9));
  CHECK(f.r_squared == Approx(1.0));
  CHECK(f.max_relative_error < 1e-9);
  t[3] *= 1.5; // one bad point lowers the quality
  const line_fit g = fit_line(x, t);
  CHECK(g.r_squared < 0.999);
  CHECK(g.max_relative_error > 0.05);
  const std::array<double, 2> same{1.0, 1.0};
  CHECK_THROWS_AS(fit_line(same, same), std::invalid_argument);
  CHECK_THROWS_AS(
      fit_line(std::span<const double>(x).first(1), std::span<const double>(t).first(1)),
      std::invalid_argument);
}
