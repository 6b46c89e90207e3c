// SPDX-License-Identifier: Apache-2.0
// gradcomp_bench_sparse_bytes: bytes per rank of the sparse exchanges on the ranks it runs on,
// counted by the transports themselves: the sparse allgather (mpi::sparse_allgather, delta +
// varint, its dense switch on; plus its 32-byte header to each other rank), gTop-k
// (mpi::gtopk_allreduce, raw pairs) and Ok-Topk (mpi::oktopk_allreduce, delta + varint and u32),
// beside the dense ring's 2 (P-1)/P x 4n.
//
// Each rank's gradient per iteration is c x a common part + (1 - c) x its own part (both
// normal, seeded; c = --correlation); each exchange has its own error feedback (exact top-k at
// --density, the global selection's leftovers returned to the residual), so the selections
// evolve as in training. Reported: bytes sent per rank per iteration, the mean over ranks and
// iterations and the busiest rank's mean, and the global selection's size; then the models
// extended to 2..1024 ranks with this run's bytes per delta-varint pair: the allgather (P-1)
// messages of its measured size, cost::oktopk_bytes_sent, cost::gtopk_bytes_sent (raw pairs,
// its busiest rank) and the dense ring.
//
//   mpiexec -n P gradcomp_bench_sparse_bytes [--elements N] [--density D] [--iterations T]
//                                            [--correlation C] [--json FILE]
// Markdown row on stdout (rank 0), JSON to FILE. docs/sparse-allreduce.md has the results.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

namespace gm = gradcomp::mpi;

struct config {
  std::size_t elements = 1'000'000;
  double density = 0.01;
  unsigned iterations = 20;
  double correlation = 0.5;
  std::string json_path;
};

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      throw std::invalid_argument(a + " needs a value");
    }
    const std::string v = argv[++i];
    if (a == "--elements") {
      c.elements = std::stoull(v);
    } else if (a == "--density") {
      c.density = std::stod(v);
    } else if (a == "--iterations") {
      c.iterations = static_cast<unsigned>(std::stoul(v));
    } else if (a == "--correlation") {
      c.correlation = std::stod(v);
    } else if (a == "--json") {
      c.json_path = v;
    } else {
      throw std::invalid_argument("unknown option " + a);
    }
  }
  if (c.elements < 1 || c.elements > UINT32_MAX || !(c.density > 0.0 && c.density <= 1.0) ||
      c.iterations < 1 || !(c.correlation >= 0.0 && c.correlation <= 1.0)) {
    throw std::invalid_argument("--elements in [1, 2^32), --density in (0, 1], --iterations >= 1, "
                                "--correlation in [0, 1]");
  }
  return c;
}

// one exchange under test: its residual, its per-iteration byte counts
struct exchange_bytes {
  const char* name;
  std::vector<float> residual;
  double sum = 0; // bytes sent by this rank over the iterations
  double selected = 0;
  double overlap = 0;     // of the global selection, the share this rank had selected
  double evaluations = 0; // Ok-Topk: calls that evaluated the threshold
};

} // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    const config c = parse(argc, argv);
    const gm::communicator comm(MPI_COMM_WORLD);
    const int p = comm.size();
    const std::size_t n = c.elements;
    const std::size_t k = gradcomp::k_for_density(n, c.density);
    gm::sparse_allgather allgather(comm);
    gm::gtopk_allreduce gtopk(comm);
    gm::oktopk_allreduce oktopk(comm);
    gm::oktopk_allreduce oktopk_u32(comm, {.indices = gradcomp::index_encoding::u32});
    std::vector<exchange_bytes> x{{"allgather", std::vector<float>(n, 0.0f)},
                                  {"gtopk", std::vector<float>(n, 0.0f)},
                                  {"oktopk", std::vector<float>(n, 0.0f)},
                                  {"oktopk_u32", std::vector<float>(n, 0.0f)}};
    std::vector<float> gradient(n);
    std::vector<float> sum(n);
    // one distribution per engine: a distribution may keep a second variate for its next call
    std::normal_distribution<float> common_normal;
    std::normal_distribution<float> own_normal;
    for (unsigned t = 0; t < c.iterations; ++t) {
      common_normal.reset();
      own_normal.reset();
      std::mt19937_64 common(1000 + t);
      std::mt19937_64 own(1'000'000ull * static_cast<unsigned>(comm.rank() + 1) + t);
      for (float& g : gradient) {
        g = static_cast<float>(c.correlation) * common_normal(common) +
            static_cast<float>(1.0 - c.correlation) * own_normal(own);
      }
      for (exchange_bytes& e : x) {
        gradcomp::exact_top_k top_k(c.density);
        gradcomp::sparse_message local;
        top_k.compress_accumulate(e.residual, gradient, local);
        gradcomp::sparse_message global;
        const std::string name = e.name;
        std::size_t sent = 0;
        if (name == "allgather") {
          allgather(local, sum);
          // its header round too (32 bytes to each other rank; bytes_sent() leaves it out), as
          // Ok-Topk's size rounds are counted
          sent = allgather.bytes_sent() + 32 * static_cast<std::size_t>(p - 1);
          e.selected += static_cast<double>(local.nnz()) * p; // at most: the union is smaller
        } else {
          if (name == "gtopk") {
            gtopk(local, k, global);
            sent = gtopk.bytes_sent();
          } else {
            gm::oktopk_allreduce& o = name == "oktopk" ? oktopk : oktopk_u32;
            o(local, k, global);
            sent = o.bytes_sent();
            e.evaluations += o.threshold_evaluated() ? 1 : 0;
          }
          gm::return_unselected(e.residual, local, global);
          e.selected += static_cast<double>(global.nnz());
          std::vector<std::uint32_t> both;
          std::set_intersection(local.indices.begin(), local.indices.end(), global.indices.begin(),
                                global.indices.end(), std::back_inserter(both));
          e.overlap += global.nnz() == 0
                           ? 0.0
                           : static_cast<double>(both.size()) / static_cast<double>(global.nnz());
        }
        e.sum += static_cast<double>(sent);
      }
    }
    // mean over ranks and the busiest rank, per iteration
    std::vector<double> mine;
    for (const exchange_bytes& e : x) {
      mine.push_back(e.sum / c.iterations);
    }
    const double overlap = x[2].overlap / c.iterations;
    std::vector<double> total(mine.size());
    std::vector<double> most(mine.size());
    MPI_Allreduce(mine.data(), total.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    MPI_Allreduce(mine.data(), most.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    if (comm.rank() == 0) {
      const double ring = p > 1 ? 2.0 * (p - 1) / p * 4.0 * static_cast<double>(n) : 0.0;
      std::printf("| P | n | k | exchange | bytes per rank (mean) | busiest rank | / allgather | "
                  "global selection |\n|---|---|---|---|---|---|---|---|\n");
      for (std::size_t j = 0; j < x.size(); ++j) {
        std::printf("| %d | %zu | %zu | %s | %.0f | %.0f | %.3f | %.0f |\n", p, n, k, x[j].name,
                    total[j] / p, most[j], total[j] / total[0], x[j].selected / c.iterations);
      }
      std::printf("| %d | %zu | %zu | dense ring (2 (P-1)/P x 4n) | %.0f | %.0f | %.3f | %zu |\n",
                  p, n, k, ring, ring, ring / (total[0] / p), n);
      std::printf("\nOk-Topk: %.3f of the global selection is in rank 0's own selection; the "
                  "threshold evaluated in %.0f of %u calls\n",
                  overlap, x[2].evaluations, c.iterations);
      // the models, with this run's message size (bytes per pair: the message less the header
      // and the wire header)
      const double message = total[0] / p / std::max(1, p - 1);
      const double per_pair = (message - 64.0) / static_cast<double>(k);
      const auto kd = static_cast<double>(k);
      const int model_ranks[] = {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
      std::printf(
          "\nmodels (%.2f bytes per delta-varint pair):\n\n| P | allgather | gtopk "
          "(busiest) | oktopk | dense ring | oktopk / allgather |\n|---|---|---|---|---|---|\n",
          per_pair);
      std::string model_json;
      for (const int q : model_ranks) {
        const double ag = (q - 1) * message;
        const double gt = gradcomp::cost::gtopk_bytes_sent(kd, q);
        const double ok = gradcomp::cost::oktopk_bytes_sent(kd, kd, q, per_pair);
        const double dense = 2.0 * (q - 1) / q * 4.0 * static_cast<double>(n);
        std::printf("| %d | %.0f | %.0f | %.0f | %.0f | %.3f |\n", q, ag, gt, ok, dense, ok / ag);
        model_json += (model_json.empty() ? "" : ", ") + std::string("{\"ranks\": ") +
                      std::to_string(q) + ", \"allgather\": " + std::to_string(ag) +
                      ", \"gtopk\": " + std::to_string(gt) + ", \"oktopk\": " + std::to_string(ok) +
                      ", \"ring\": " + std::to_string(dense) + "}";
      }
      if (!c.json_path.empty()) {
        FILE* f = std::fopen(c.json_path.c_str(), "w");
        if (f == nullptr) {
          throw std::runtime_error("cannot write " + c.json_path);
        }
        std::fprintf(f,
                     "{\"ranks\": %d, \"elements\": %zu, \"k\": %zu, \"density\": %g, "
                     "\"iterations\": %u, \"correlation\": %g, \"ring_bytes\": %.0f",
                     p, n, k, c.density, c.iterations, c.correlation, ring);
        for (std::size_t j = 0; j < x.size(); ++j) {
          std::fprintf(f,
                       ", \"%s\": {\"mean_bytes\": %.1f, \"max_bytes\": %.1f, \"selected\": %.1f}",
                       x[j].name, total[j] / p, most[j], x[j].selected / c.iterations);
        }
        std::fprintf(f, ", \"model\": [%s]}\n", model_json.c_str());
        std::fclose(f);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcomp_bench_sparse_bytes: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
