// SPDX-License-Identifier: Apache-2.0
// CSSGD's coded multicast exchange (docs/coded-mpi.md, docs/coded.md): every part of the batch
// is computed by r = 2 ranks, and the ranks exchange coded packets instead of whole gradients.
// Four steps, each checked against a reference every rank computes alone (every part's gradient
// is a function of its samples, so any rank can compute any part):
//  1. coded_allreduce: the sum over all C(P, 2) parts of dense part gradients, fixed point;
//  2. coded_sparse_allreduce: the same on top-k messages (one error feedback per part), XOR;
//  3. the pipeline with coded_sparse_exchange: per-part error feedback, the mean over the parts;
//  4. in one process, what coded_allreduce does inside: the packets of a 4-rank placement built
//     and decoded with the MPI-free pieces of <gradcomp/coded.hpp>.
// Every result must also be bit-identical on every rank. Exits 1 on every rank on a mismatch.
// Needs gradcomp::mpi and at least 3 ranks. Run:
//   mpiexec -n 3 build/examples/08_coded_exchange/gradcomp_example_coded_exchange
#include <gradcomp/coded.hpp>
#include <gradcomp/gradcomp.hpp> // the compressors, error feedback, sparse messages
#include <gradcomp/mpi.hpp>
#include <gradcomp/pipeline.hpp>

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t samples = 600; // the global batch
constexpr std::size_t d = 1000;      // gradient elements

//! The gradient of the samples [batch.begin, batch.end): a deterministic function of them, so
//! every owner of a part computes the same gradient, as owners computing on the same samples do.
std::vector<float> part_gradient(gradcomp::coded::index_range batch, std::size_t length = d) {
  std::vector<float> g(length, 0.0f);
  for (std::size_t s = batch.begin; s < batch.end; ++s) {
    for (std::size_t i = 0; i < length; ++i) {
      g[i] += std::sin(0.001f * static_cast<float>((s + 1) * (i + 7) % 9973)) / 32.0f;
    }
  }
  return g;
}

//! Every part's gradient, computed locally (the reference of every check).
std::vector<std::vector<float>> all_part_gradients(const gradcomp::coded::placement& p,
                                                   std::size_t length = d) {
  std::vector<std::vector<float>> all;
  for (std::size_t t = 0; t < p.part_count(); ++t) {
    all.push_back(part_gradient(p.part_samples(t, samples), length));
  }
  return all;
}

//! True when `values` is bit for bit the same on every rank (rank 0's copy broadcast).
bool same_on_every_rank(std::span<const float> values) {
  std::vector<float> zero(values.begin(), values.end());
  MPI_Bcast(zero.data(), static_cast<int>(zero.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return std::equal(values.begin(), values.end(), zero.begin(), [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  });
}

bool report(const gradcomp::mpi::communicator& comm, std::string_view what, bool ok) {
  int all = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (comm.rank() == 0) {
    std::printf("%s: %s\n", all ? "ok" : "FAILED", std::string(what).c_str());
  }
  return all == 1;
}

//! 2. The sparse form: top-k part messages, one error feedback per part, XOR coding.
bool sparse_coded_allreduce(const gradcomp::mpi::communicator& comm) {
  namespace gm = gradcomp::mpi;
  gm::coded_sparse_allreduce exchange(comm,
                                      {.redundancy = 2, .coding = gm::packet_coding::xor_bits});
  const auto owned = exchange.placement().parts_of(comm.rank());
  std::vector<std::vector<float>> part_grads;
  for (const std::size_t t : owned) {
    part_grads.push_back(part_gradient(exchange.placement().part_samples(t, samples)));
  }
  std::vector<gradcomp::error_feedback<gradcomp::exact_top_k>> feedback; // one per owned part
  for (std::size_t i = 0; i < owned.size(); ++i) {
    feedback.emplace_back(d, gradcomp::exact_top_k(0.01)); // d: the gradient's length
  }
  std::vector<gradcomp::sparse_message> mine(owned.size());
  for (std::size_t i = 0; i < owned.size(); ++i) {
    feedback[i].compress(part_grads[i], mine[i]); // identical on the part's r owners
  }
  gradcomp::sparse_message sum; // indices U, values the sums
  exchange(std::span<const gradcomp::sparse_message>(mine), sum);
  std::vector<float> dense_gradient(d, 0.0f);
  gradcomp::accumulate(sum, dense_gradient); // or decompress(sum, dense_gradient)

  // reference: every part's top-k (a fresh error feedback selects the top-k of the gradient),
  // summed in part-index order as the XOR form sums the delivered floats
  std::vector<float> reference(d, 0.0f);
  for (const std::vector<float>& g : all_part_gradients(exchange.placement())) {
    gradcomp::error_feedback<gradcomp::exact_top_k> fresh(d, gradcomp::exact_top_k(0.01));
    gradcomp::sparse_message m;
    fresh.compress(g, m);
    std::vector<float> part(d, 0.0f);
    gradcomp::decompress(m, part);
    for (std::size_t i = 0; i < d; ++i) {
      reference[i] += part[i];
    }
  }
  return std::equal(dense_gradient.begin(), dense_gradient.end(), reference.begin()) &&
         same_on_every_rank(dense_gradient);
}

//! 3. The pipeline with several parts per rank: per-part error feedback, the coded exchange of
//! each merge group once all parts' layers of it are in, the mean over all C(P, r) parts.
bool coded_pipeline(const gradcomp::mpi::communicator& comm) {
  const std::vector<std::size_t> numel = {600, 50, 350}; // three layers, d elements in all
  const gradcomp::schedule::grouping groups =
      gradcomp::schedule::grouping_from_ends({1, 3}, numel.size());       // {layer 2}, {1, 0}
  gradcomp::mpi::coded_sparse_exchange exchange(comm, {.redundancy = 2}); // or coded_dense_exchange
  const gradcomp::coded::placement& layout = exchange.placement();
  gradcomp::pipeline pipe(numel, gradcomp::pipeline_policy::fixed_grouping{groups},
                          gradcomp::exact_top_k(0.01), exchange); // pipe.parts() == C(P-1, 1)
  // layer l of part t's gradient: its slice of the part's d-element gradient
  const auto layer_gradient = [&](std::size_t t, std::size_t l) {
    const std::vector<float> g = part_gradient(layout.part_samples(t, samples));
    std::size_t offset = 0;
    for (std::size_t i = 0; i < l; ++i) {
      offset += numel[i];
    }
    return std::vector<float>(g.begin() + static_cast<std::ptrdiff_t>(offset),
                              g.begin() + static_cast<std::ptrdiff_t>(offset + numel[l]));
  };
  const auto owned = layout.parts_of(comm.rank());
  for (std::size_t k = 0; k < owned.size(); ++k) { // one backward per part over its samples
    pipe.begin_backward();                         // optional: measuring
    for (std::size_t l = numel.size(); l-- > 0;) { // backward: last layer first
      pipe.gradient_ready(k, l, layer_gradient(owned[k], l)); // part k's error feedback
    }
  }
  pipe.finish(); // averaged(l): the mean over all C(P, r) parts

  // reference: each part's top-1 % per layer, averaged over the parts
  bool ok = pipe.parts() == layout.parts_per_rank();
  for (std::size_t l = 0; l < numel.size(); ++l) {
    std::vector<float> mean(numel[l], 0.0f);
    for (std::size_t t = 0; t < layout.part_count(); ++t) {
      gradcomp::error_feedback<gradcomp::exact_top_k> fresh(numel[l], gradcomp::exact_top_k(0.01));
      gradcomp::sparse_message m;
      fresh.compress(layer_gradient(t, l), m);
      gradcomp::accumulate(m, mean);
    }
    const std::span<const float> averaged = pipe.averaged(l);
    for (std::size_t i = 0; i < numel[l]; ++i) {
      const float expected = mean[i] / static_cast<float>(layout.part_count());
      ok = ok && std::abs(averaged[i] - expected) <= 1e-6f * (1.0f + std::abs(expected));
    }
    ok = same_on_every_rank(averaged) && ok;
  }
  return ok;
}

//! 4. What coded_allreduce does inside, in one process: the packets of every rank of a 4-rank
//! placement with r = 2 in fixed point, each decoded by its receivers, and the sum of all parts.
bool coded_arithmetic_in_one_process() {
  using namespace gradcomp::coded;
  const placement p(/*ranks=*/4, /*redundancy=*/2); // 6 parts, 4 groups
  bool ok = true;
  std::vector<std::vector<std::int32_t>> codes(p.part_count(), std::vector<std::int32_t>(d));
  const std::vector<std::vector<float>> gradient = all_part_gradients(p); // for the checks
  double agreed_max = 0.0;
  for (const std::vector<float>& g : gradient) {
    for (const float v : g) {
      agreed_max = std::max(agreed_max, static_cast<double>(std::abs(v)));
    }
  }
  // agreed_max: the allreduce-MAX of |gradient| over all ranks (the transport's job), then:
  const double scale = fixed_point_scale(agreed_max, p.part_count());
  for (int my_rank = 0; my_rank < p.ranks(); ++my_rank) { // over MPI: this rank only
    // this rank's parts: one gradient per range of samples, encoded with the agreed scale
    const std::span<const std::size_t> owned = p.parts_of(my_rank);
    std::size_t k = 0;
    for (const index_range batch : p.rank_samples(my_rank, samples)) {
      encode_fixed_point(part_gradient(batch), scale, codes[owned[k++]]);
    }
    for (const std::size_t group : p.groups_of(my_rank)) { // one packet per group
      std::vector<std::span<const std::int32_t>> slices;
      for (const coding_term& t : p.coding_terms(group, my_rank)) {
        const index_range e = p.slice_elements(d, t.slice);
        slices.push_back(std::span<const std::int32_t>(codes[t.part]).subspan(e.begin, e.size()));
      }
      std::vector<std::int32_t> packet(p.packet_elements(d));
      combine_fixed_point(slices, packet); // send to the other r members
      // receiver j (term j's receiver) owns every other term's part: it cancels them and
      // keeps its slice of the part it lacks
      for (std::size_t j = 0; j < slices.size(); ++j) {
        std::vector<std::span<const std::int32_t>> known = slices;
        known.erase(known.begin() + static_cast<std::ptrdiff_t>(j));
        std::vector<std::int32_t> received = packet;
        cancel_fixed_point(known, received);
        ok = ok && std::equal(slices[j].begin(), slices[j].end(), received.begin());
      }
    }
  }
  // every rank, once it holds every part's codes: their sum, decoded once
  std::vector<std::int32_t> total(d, 0);
  for (const std::vector<std::int32_t>& c : codes) {
    add_fixed_point(c, total);
  }
  std::vector<double> sum(d);
  decode_fixed_point(total, scale, sum);
  // within C(P, r) 0.5 / scale of the exact sum (docs/coded.md, "Exact coding")
  for (std::size_t i = 0; i < d; ++i) {
    double exact = 0.0;
    for (const std::vector<float>& g : gradient) {
      exact += g[i];
    }
    ok = ok && std::abs(sum[i] - exact) <= static_cast<double>(p.part_count()) * 0.5 / scale;
  }
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  gradcomp::mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 3) {
    if (comm.rank() == 0) {
      std::printf("run it on 3 or more ranks (mpiexec -n 3): r = 2 needs r < P\n");
    }
    return 1;
  }
  bool ok = true;
  {
    // 1. The dense exchange: every rank passes the gradients of the parts it computed.
    namespace gm = gradcomp::mpi;
    gm::coded_allreduce exchange(comm, {.redundancy = 2,
                                        .coding = gm::packet_coding::fixed_point,
                                        .schedule = gm::coded_schedule::concurrent});
    const gradcomp::coded::placement& p = exchange.placement();
    std::vector<std::vector<float>> grads; // one d-float gradient per part of this rank
    for (const auto batch : p.rank_samples(comm.rank(), samples)) {
      grads.push_back(part_gradient(batch));
    }
    std::vector<std::span<const float>> mine(grads.begin(), grads.end());
    std::vector<float> sum(d);
    exchange(mine, sum); // sum over all C(P, r) parts

    // reference: the exact sum, within the fixed-point error bound (docs/coded.md)
    const std::vector<std::vector<float>> all = all_part_gradients(p);
    bool dense_ok = true;
    for (std::size_t i = 0; i < d; ++i) {
      double exact = 0.0;
      for (const std::vector<float>& g : all) {
        exact += g[i];
      }
      // C(P, r) 0.5 / scale, plus the rounding to float
      const double bound = static_cast<double>(p.part_count()) * 0.5 / exchange.scale();
      dense_ok = dense_ok && std::abs(sum[i] - exact) <= bound + 1e-7 * std::abs(exact);
    }
    ok = report(comm, "coded_allreduce, fixed point: the sum over all parts on every rank",
                dense_ok && same_on_every_rank(sum)) &&
         ok;
  }
  ok = report(comm, "coded_sparse_allreduce, XOR: the sum of every part's top-k",
              sparse_coded_allreduce(comm)) &&
       ok;
  ok = report(comm, "pipeline over coded_sparse_exchange: the mean over the parts",
              coded_pipeline(comm)) &&
       ok;
  ok = report(comm, "coded packets built and decoded in one process (4 ranks, r = 2)",
              coded_arithmetic_in_one_process()) &&
       ok;
  if (comm.rank() == 0) {
    std::printf(ok ? "ok: %d ranks\n" : "FAILED: %d ranks\n", comm.size());
  }
  return ok ? 0 : 1;
}
