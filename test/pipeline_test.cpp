// SPDX-License-Identifier: Apache-2.0
// The umbrella header <gradcomp/pipeline.hpp> alone gives what it promises: the pipeline, its
// policy concepts, the grouping policies, the loopback and type-erased transports and the core's
// compressors with error feedback, used together on two small layers worked by hand. The
// pieces' own tests are in test/pipeline/.
#include <gradcomp/pipeline.hpp>

#include <chrono>
#include <cstddef>
#include <vector>

#include "common/catch.hpp"

namespace pipeline_test {

using namespace gradcomp;

static_assert(pipeline_policy::transport<loopback_exchange>);
static_assert(pipeline_policy::in_place_transport<any_transport>);
static_assert(pipeline_policy::byte_counting_transport<any_transport>);
static_assert(pipeline_policy::grouping_policy<pipeline_policy::fixed_grouping>);
static_assert(pipeline_policy::replanning_policy<pipeline_policy::planned_grouping>);
static_assert(pipeline_policy::monotonic_clock<std::chrono::steady_clock>);
static_assert(compressor<exact_top_k>);

TEST_CASE("pipeline.hpp: two layers through a pipeline with the umbrella header alone",
          "[pipeline][umbrella]") {
  // exact top-k at density 0.5: k = 2 of layer 0's four values (4 and 3), 1 of layer 1's two;
  // one group, one worker: the average is what was sent
  const std::vector<std::size_t> sizes{4, 2};
  const std::vector<float> g0{0.5f, -4.0f, 1.0f, 3.0f};
  const std::vector<float> g1{2.0f, -0.25f};
  any_transport t = any_transport::make<loopback_exchange>();
  const pipeline_policy::planned_grouping one_group{
      .strategy = schedule::strategy::single, .model = schedule::cost_model::affine(1e-4, 1e-9)};
  pipeline<exact_top_k, any_transport, pipeline_policy::planned_grouping> p(
      sizes, one_group, exact_top_k(0.5), t, {}, compression_scope::per_layer);
  CHECK(p.groups() == schedule::single(2));
  p.gradient_ready(1, g1);
  p.gradient_ready(0, g0);
  p.finish();
  CHECK(std::vector<float>(p.averaged(0).begin(), p.averaged(0).end()) ==
        std::vector<float>{0.0f, -4.0f, 0.0f, 3.0f});
  CHECK(std::vector<float>(p.averaged(1).begin(), p.averaged(1).end()) ==
        std::vector<float>{2.0f, 0.0f});
  CHECK(std::vector<float>(p.residual(0).begin(), p.residual(0).end()) ==
        std::vector<float>{0.5f, 0.0f, 1.0f, 0.0f});
  const pipeline_iteration_stats& s = p.last_stats();
  CHECK(s.numel == 6);
  CHECK(s.selected == 3);
}

} // namespace pipeline_test
