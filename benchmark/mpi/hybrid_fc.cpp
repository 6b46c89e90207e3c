// SPDX-License-Identifier: Apache-2.0
// gradcomp_bench_hybrid_fc: S2 Figs. 14-16 on the ranks it runs on. For VGG-16's FC1-FC3
// (optionally scaled down) and local batches 1..128: the communication time per iteration of
// the layer data parallel (gradcomp's ring allreduce of its K N + N gradients, the dense
// baseline) and model parallel (mpi::column_parallel_linear, forward + backward, both
// exchanges), measured, beside the alpha-beta prediction (cost/hybrid.hpp) from a ring
// calibration made in the same run, and the planner's choice against the measured faster side.
//
// The model-parallel passes run with a GEMM that does nothing, so the time is communication
// (collectives, packing copies, argument agreement) only, as in S2's figures; the layer's
// arithmetic is the same on both sides (M K N multiply-adds per rank).
//
//   mpiexec -n P gradcomp_bench_hybrid_fc [--scale S] [--batches 1,2,...] [--reps N]
//                                         [--layer NAME:K:N ...] [--label TEXT] [--json FILE]
// Markdown on stdout (rank 0), JSON to FILE. benchmark/run_hybrid_fc.sh runs it on the emulated
// cluster; docs/hybrid.md has the results.
#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/hybrid/plan.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/calibrate_column_parallel.hpp>
#include <gradcomp/mpi/column_parallel_linear.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace gm = gradcomp::mpi;
namespace gh = gradcomp::hybrid;

struct config {
  double scale = 1.0; // K and N are multiplied by this (>= 1 each)
  std::vector<std::size_t> batches{1, 2, 4, 8, 16, 32, 64, 128};
  unsigned reps = 3;
  std::string label;
  std::string json_path;
  std::vector<gh::fc_layer> layers; // default: VGG-16's FC1-FC3
};

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw std::invalid_argument(a + " needs a value");
      }
      return argv[++i];
    };
    if (a == "--scale") {
      c.scale = std::stod(next());
      if (!(c.scale > 0.0 && c.scale <= 1.0)) {
        throw std::invalid_argument("--scale must be in (0, 1]");
      }
    } else if (a == "--batches") {
      c.batches.clear();
      std::stringstream list(next());
      for (std::string item; std::getline(list, item, ',');) {
        c.batches.push_back(std::stoul(item));
        if (c.batches.back() == 0) {
          throw std::invalid_argument("--batches: batch 0");
        }
      }
    } else if (a == "--reps") {
      c.reps = static_cast<unsigned>(std::stoul(next()));
      if (c.reps == 0) {
        throw std::invalid_argument("--reps must be >= 1");
      }
    } else if (a == "--layer") { // NAME:K:N
      const std::string v = next();
      const std::size_t x = v.find(':');
      const std::size_t y = x == std::string::npos ? x : v.find(':', x + 1);
      if (y == std::string::npos) {
        throw std::invalid_argument("--layer " + v + " is not NAME:K:N");
      }
      c.layers.push_back(
          {v.substr(0, x), std::stoul(v.substr(x + 1, y - x - 1)), std::stoul(v.substr(y + 1))});
      if (c.layers.back().inputs_k == 0 || c.layers.back().outputs_n == 0) {
        throw std::invalid_argument("--layer " + v + ": K and N must be >= 1");
      }
    } else if (a == "--label") {
      c.label = next();
    } else if (a == "--json") {
      c.json_path = next();
    } else {
      throw std::invalid_argument("unknown option " + a +
                                  " (--scale S --batches a,b --reps N --layer NAME:K:N --label T "
                                  "--json FILE)");
    }
  }
  return c;
}

struct row {
  std::string layer;
  std::size_t k, n, batch;
  double dp_seconds, a2a_seconds, s2_seconds;          // measured
  double dp_predicted, a2a_predicted, s2_predicted;    // alpha-beta
  std::uint64_t s2_values;                             // counted, S2's accounting
  gh::parallelism by_volume, by_cost, measured_faster; // all_to_all vs dense ring
  double a2a_predicted_fixed;                          // with the calibrated fixed cost
  gh::parallelism by_cost_fixed;
};

int run(int argc, char** argv) {
  const config c = parse(argc, argv);
  const gm::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const bool root = comm.rank() == 0;
  const gm::calibration cal = gm::calibrate_ring_allreduce(comm);
  // the model-parallel pass's own fixed cost (MPI's small-message collectives)
  const double mp_fixed = gm::calibrate_model_parallel_fixed_seconds(comm);
  const gradcomp::cost::fc_cost_options fixed_options{.model_parallel_fixed_seconds = mp_fixed};
  gm::ring_allreduce ring(comm);
  std::vector<float> sync(1, 0.0f);
  const auto line_up = [&] { ring(sync); };
  std::vector<row> rows;
  for (gh::fc_layer layer : c.layers.empty() ? gh::vgg16_fc_layers() : c.layers) {
    layer.inputs_k = std::max<std::size_t>(1, static_cast<std::size_t>(layer.inputs_k * c.scale));
    layer.outputs_n = std::max<std::size_t>(static_cast<std::size_t>(p),
                                            static_cast<std::size_t>(layer.outputs_n * c.scale));
    const std::size_t k = layer.inputs_k;
    const std::size_t n = layer.outputs_n;
    double dp_seconds = 0.0;
    {
      std::vector<float> grad(k * n + n, 1e-3f);
      dp_seconds = gm::detail::median_slowest_seconds(comm, c.reps, line_up, [&] { ring(grad); });
    }
    for (const std::size_t m : c.batches) {
      row r{layer.name, k, n, m, dp_seconds, 0, 0, 0, 0, 0, 0, {}, {}, {}, 0, {}};
      for (const auto exchange :
           {gradcomp::fc_exchange::all_to_all, gradcomp::fc_exchange::s2_allgather}) {
        gm::column_parallel_linear<gradcomp::no_gemm> fc(comm, k, n, {}, {.exchange = exchange});
        const std::size_t rows_r = fc.slice().rows;
        std::vector<float> x(m * k, 1.0f), w(rows_r * k, 1.0f), b(rows_r, 0.0f), y(m * n);
        std::vector<float> dy(m * n, 1.0f), dw(rows_r * k), db(rows_r), dx(m * k);
        fc.reset_traffic();
        const double t = gm::detail::median_slowest_seconds(comm, c.reps, line_up, [&] {
          fc.forward(x, w, b, y);
          fc.backward(dy, x, w, dw, db, dx);
        });
        const gradcomp::cost::fc_cost_options o{.exchange = exchange};
        const double predicted = gradcomp::cost::fc_model_parallel_seconds(
            static_cast<double>(m), static_cast<double>(k), static_cast<double>(n), p, cal.net, o);
        if (exchange == gradcomp::fc_exchange::all_to_all) {
          r.a2a_seconds = t;
          r.a2a_predicted = predicted;
        } else {
          r.s2_seconds = t;
          r.s2_predicted = predicted;
          r.s2_values = fc.traffic().collective_values / (c.reps + 1);
        }
      }
      r.dp_predicted = gradcomp::cost::fc_data_parallel_seconds(static_cast<double>(k),
                                                                static_cast<double>(n), p, cal.net);
      const gh::fc_choice choice = gh::choose(layer, m, p, cal.net);
      r.by_volume = choice.by_volume;
      r.by_cost = choice.by_cost;
      const gh::fc_choice fixed_choice = gh::choose(layer, m, p, cal.net, fixed_options);
      r.by_cost_fixed = fixed_choice.by_cost;
      r.a2a_predicted_fixed = fixed_choice.model_seconds;
      r.measured_faster =
          r.a2a_seconds < r.dp_seconds ? gh::parallelism::model : gh::parallelism::data;
      rows.push_back(r);
      if (root) {
        std::fprintf(stderr, "%s M=%zu: dp %.2f ms, mp %.2f / %.2f ms\n", layer.name.c_str(), m,
                     1e3 * r.dp_seconds, 1e3 * r.a2a_seconds, 1e3 * r.s2_seconds);
      }
    }
  }
  if (!root) {
    return 0;
  }
  std::printf("## %s: P = %d, scale %.4g\n\n", c.label.c_str(), p, c.scale);
  std::printf("Ring calibration: alpha %.1f us, beta %.3f ns/B (%.3f Gbit/s). Times: median of %u "
              "(slowest rank), ms per iteration (forward + backward for model parallel).\n\n",
              1e6 * cal.net.alpha_seconds, 1e9 * cal.net.beta_seconds_per_byte,
              8e-9 / cal.net.beta_seconds_per_byte, c.reps);
  std::printf("Model-parallel fixed cost (one pass of the smallest layer, "
              "calibrate_model_parallel_fixed_seconds): %.3f ms.\n\n",
              1e3 * mp_fixed);
  std::printf("| layer | K | N | M | DP ring | DP pred | MP a2a | MP a2a pred | MP S2 | MP S2 pred "
              "| S2 values (counted) | faster (measured) | planner (cost) | S2 rule | MP a2a pred "
              "(fixed cal.) "
              "| planner (fixed cal.) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int fixed_matches = 0;
  int matches = 0;
  int rule_matches = 0;
  for (const row& r : rows) {
    matches += r.by_cost == r.measured_faster ? 1 : 0;
    rule_matches += r.by_volume == r.measured_faster ? 1 : 0;
    fixed_matches += r.by_cost_fixed == r.measured_faster ? 1 : 0;
    std::printf(
        "| %s | %zu | %zu | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %llu | %s | %s%s "
        "| %s | %.2f | %s%s |\n",
        r.layer.c_str(), r.k, r.n, r.batch, 1e3 * r.dp_seconds, 1e3 * r.dp_predicted,
        1e3 * r.a2a_seconds, 1e3 * r.a2a_predicted, 1e3 * r.s2_seconds, 1e3 * r.s2_predicted,
        static_cast<unsigned long long>(r.s2_values),
        std::string(gh::name(r.measured_faster)).c_str(), std::string(gh::name(r.by_cost)).c_str(),
        r.by_cost == r.measured_faster ? "" : " (miss)", std::string(gh::name(r.by_volume)).c_str(),
        1e3 * r.a2a_predicted_fixed, std::string(gh::name(r.by_cost_fixed)).c_str(),
        r.by_cost_fixed == r.measured_faster ? "" : " (miss)");
  }
  std::printf("\nPlanner (cost) matches the measured faster side at %d of %zu points; S2's volume "
              "rule at %d; the planner with the calibrated fixed cost at %d.\n",
              matches, rows.size(), rule_matches, fixed_matches);
  if (!c.json_path.empty()) {
    std::FILE* f = std::fopen(c.json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", c.json_path.c_str());
      return 1;
    }
    std::fprintf(f,
                 "{\"label\": \"%s\", \"ranks\": %d, \"scale\": %g, \"alpha_seconds\": %g, "
                 "\"beta_seconds_per_byte\": %g, \"model_parallel_fixed_seconds\": %g, "
                 "\"rows\": [\n",
                 c.label.c_str(), p, c.scale, cal.net.alpha_seconds, cal.net.beta_seconds_per_byte,
                 mp_fixed);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      std::fprintf(
          f,
          " {\"layer\": \"%s\", \"k\": %zu, \"n\": %zu, \"batch\": %zu, \"dp_seconds\": %g, "
          "\"dp_predicted\": %g, \"a2a_seconds\": %g, \"a2a_predicted\": %g, "
          "\"s2_seconds\": %g, \"s2_predicted\": %g, \"s2_values\": %llu, "
          "\"measured_faster\": \"%s\", \"by_cost\": \"%s\", \"by_volume\": \"%s\", "
          "\"a2a_predicted_fixed\": %g, \"by_cost_fixed\": \"%s\"}%s\n",
          r.layer.c_str(), r.k, r.n, r.batch, r.dp_seconds, r.dp_predicted, r.a2a_seconds,
          r.a2a_predicted, r.s2_seconds, r.s2_predicted,
          static_cast<unsigned long long>(r.s2_values),
          std::string(gh::name(r.measured_faster)).c_str(),
          std::string(gh::name(r.by_cost)).c_str(), std::string(gh::name(r.by_volume)).c_str(),
          r.a2a_predicted_fixed, std::string(gh::name(r.by_cost_fixed)).c_str(),
          i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  std::fflush(stdout);
  std::printf("\n(results flushed before MPI_Finalize)\n");
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcomp_bench_hybrid_fc: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
