// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Transport benchmarks (issue "MPI transports"): gradcomp's ring_allreduce,
//! sparse_allgather, parameter_server and hierarchical_allreduce against MPICH's allreduce, side by
//! side in one run, each next to the alpha-beta cost model's prediction. Plain MPI + std::chrono
//! (runs under mpiexec); prints a Markdown table on rank 0's stdout and optionally writes JSON.
//!
//! Timing: before every timed call the ranks line up (MPI_Ibarrier completed with the yield wait
//! policy); each rank times its call with std::chrono::steady_clock; the slowest rank's time
//! (max over ranks) is one sample. One untimed warm-up call per case, then N samples; best and
//! median are reported, the ratio to the model uses the median. Every nonblocking MPI call here
//! (ours and MPICH's MPI_Iallreduce) completes with gradcomp's yield wait policy; the blocking
//! MPI_Allreduce is measured as it is (MPICH busy-polls inside it).
//!
//! With --two-tier (two_tier.hpp) it measures instead, on hosts with several ranks
//! each, the flat ring against hierarchical_allreduce with one group per host and MPICH's
//! allreduce, 1 KiB .. 64 MiB, modelled with separately calibrated intra- and inter-host
//! networks.
//!
//! Results are written and flushed before MPI_Finalize (which can hang with 3+ hosts over UCX/TCP
//! in MPICH 4.0.2; see docs/emulated-cluster.md).

#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/mpi/calibrate.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/hierarchical_allreduce.hpp>
#include <gradcomp/mpi/parameter_server.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/sparse_allgather.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

namespace gm = gradcomp::mpi;
namespace gc = gradcomp::cost;

struct config {
  std::size_t min_bytes = std::size_t{1} << 12;
  std::size_t max_bytes = std::size_t{1} << 26;
  unsigned reps_small = 10;  // samples for messages < 4 MiB
  unsigned reps_medium = 5;  // samples for 4 MiB .. < 64 MiB
  unsigned reps_large = 3;   // samples for >= 64 MiB
  double link_bits = 0.0;    // > 0: also predict from this link rate (bit/s)
  double link_latency = 0.0; // latency of that link, seconds
  std::string label;         // free text printed in the header (e.g. "4 hosts, 1 Gbit/s")
  std::string json_path;     // rank 0 writes JSON here when not empty
  bool dense = true, sparse = true, others = true;
  std::size_t sparse_elements = std::size_t{1} << 24;
  bool two_tier = false; // --two-tier: only the two-tier comparison (two_tier.hpp)
  int group_size = 0;    // --two-tier's ranks per host; 0: those sharing rank 0's node
  std::size_t piece_bytes = gm::hierarchical_allreduce_options{}.piece_bytes; // --two-tier's
};

struct row {
  std::string section;
  std::string op;
  double bytes = 0;      // tensor size (dense bytes)
  double wire_bytes = 0; // per-rank message bytes (sparse: encoded message), else = bytes
  unsigned samples = 0;
  double best = 0, median = 0;
  double pred_cal = 0, pred_link = -1; // seconds; pred_link < 0: not given
  std::string note;
};

row make_row(std::string section, std::string op, double bytes, double wire_bytes) {
  row r;
  r.section = std::move(section);
  r.op = std::move(op);
  r.bytes = bytes;
  r.wire_bytes = wire_bytes;
  return r;
}

const gm::wait_policy yield_policy{};

void wait_request(MPI_Request& r) {
  gm::wait(r, yield_policy);
}

void sync(const gm::communicator& comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  gm::detail::check(MPI_Ibarrier(comm.native(), &r), "MPI_Ibarrier");
  wait_request(r);
}

double slowest(const gm::communicator& comm, double mine) {
  double out = mine;
  MPI_Request r = MPI_REQUEST_NULL;
  gm::detail::check(MPI_Iallreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, comm.native(), &r),
                    "MPI_Iallreduce");
  wait_request(r);
  return out;
}

unsigned samples_for(const config& c, double bytes) {
  if (bytes >= double(std::size_t{1} << 26)) {
    return c.reps_large;
  }
  return bytes >= double(std::size_t{1} << 22) ? c.reps_medium : c.reps_small;
}

// {best, median} of samples.
std::pair<double, double> best_and_median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const std::size_t m = t.size();
  const double median = m % 2 == 1 ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
  return {t.front(), median};
}

// Runs `prepare` (untimed) then `op` (timed) 1 + n times (n without the warm-up); returns
// {best, median} of the slowest-rank times, skipping the warm-up.
std::pair<double, double> measure(const gm::communicator& comm,
                                  unsigned n,
                                  const std::function<void()>& prepare,
                                  const std::function<void()>& op,
                                  bool warm_up = true) {
  std::vector<double> t;
  for (unsigned i = warm_up ? 0 : 1; i <= n; ++i) {
    prepare();
    sync(comm);
    const auto start = std::chrono::steady_clock::now();
    op();
    const double mine =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double s = slowest(comm, mine);
    if (i > 0) {
      t.push_back(s);
    }
  }
  return best_and_median(std::move(t));
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1 << 20) {
    std::snprintf(buf, sizeof buf, "%g MiB", b / (1 << 20));
  } else if (b >= 1 << 10) {
    std::snprintf(buf, sizeof buf, "%g KiB", b / (1 << 10));
  } else {
    std::snprintf(buf, sizeof buf, "%g B", b);
  }
  return buf;
}

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Fills `v` with value `x` (the ring and MPI sums are checked against P x mean afterwards).
void fill(std::vector<float>& v, float x) {
  std::fill(v.begin(), v.end(), x);
}

bool check_sum(const std::vector<float>& v, float expected) {
  if (v.empty()) {
    return true;
  }
  const float tol = 1e-3f * std::abs(expected);
  return std::abs(v.front() - expected) <= tol && std::abs(v.back() - expected) <= tol &&
         std::abs(v[v.size() / 2] - expected) <= tol;
}

config parse(int argc, char** argv) {
  config c;
  bool min_given = false, group_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw std::invalid_argument("missing value after " + a);
      }
      return argv[++i];
    };
    if (a == "--max-bytes") {
      c.max_bytes = std::stoull(next());
    } else if (a == "--min-bytes") {
      c.min_bytes = std::stoull(next());
      min_given = true;
    } else if (a == "--reps") {
      c.reps_small = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--reps-medium") {
      c.reps_medium = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--reps-large") {
      c.reps_large = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--link-gbit") {
      c.link_bits = std::stod(next()) * 1e9;
    } else if (a == "--link-latency-us") {
      c.link_latency = std::stod(next()) * 1e-6;
    } else if (a == "--label") {
      c.label = next();
    } else if (a == "--json") {
      c.json_path = next();
    } else if (a == "--sparse-elements") {
      c.sparse_elements = std::stoull(next());
    } else if (a == "--only") {
      const std::string s = next();
      c.dense = s.find("dense") != std::string::npos;
      c.sparse = s.find("sparse") != std::string::npos;
      c.others = s.find("others") != std::string::npos;
    } else if (a == "--two-tier") {
      c.two_tier = true;
    } else if (a == "--group-size") {
      c.group_size = std::stoi(next());
      group_given = true;
    } else if (a == "--piece-bytes") {
      c.piece_bytes = std::stoull(next());
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: gradcomp_bench_transports [--min-bytes B] [--max-bytes B] [--reps N]\n"
          "  [--reps-medium N] [--reps-large N] [--link-gbit G] [--link-latency-us U]\n"
          "  [--label TEXT] [--json FILE] [--sparse-elements N] [--only dense,sparse,others]\n"
          "  [--two-tier [--group-size G] [--piece-bytes B]]\n"
          "--two-tier: only the two-tier comparison (flat ring, hierarchical allreduce with one\n"
          "  group per host, MPICH) at 1, 16, 256 KiB and 1, 4, 16, 64 MiB (--min-bytes,\n"
          "  --max-bytes narrow it); G: ranks per host, default those sharing rank 0's node;\n"
          "  every host must hold G consecutive ranks (mpiexec -ppn G); B: the pipelined\n"
          "  hierarchical rows' piece size (default the library's)\n");
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (c.two_tier && !min_given) {
    c.min_bytes = 1024; // the two-tier sizes start at 1 KiB
  }
  if (c.min_bytes < 4 || c.max_bytes < c.min_bytes || c.reps_small < 1 || c.reps_medium < 1 ||
      c.reps_large < 1) {
    throw std::invalid_argument("bad sizes or repetitions");
  }
  if (c.piece_bytes < 4) {
    throw std::invalid_argument("--piece-bytes " + std::to_string(c.piece_bytes) +
                                " is below the minimum 4");
  }
  if (group_given && (!c.two_tier || c.group_size < 1)) {
    throw std::invalid_argument("--group-size " + std::to_string(c.group_size) +
                                " needs --two-tier and a value >= 1");
  }
  return c;
}

void print_table(const std::vector<row>& rows, const config& c, const std::string& section) {
  const bool link = c.link_bits > 0;
  std::printf("\n| operation | size | on the wire / rank | N | best s | median s | model s |"
              " median/model |%s note |\n",
              link ? " link model s | median/link |" : "");
  std::printf("|---|---|---|---|---|---|---|---|%s---|\n", link ? "---|---|" : "");
  for (const row& r : rows) {
    if (r.section != section) {
      continue;
    }
    std::printf("| %s | %s | %s | %u | %.4g | %.4g | %.4g | %.2f |", r.op.c_str(),
                human_bytes(r.bytes).c_str(), human_bytes(r.wire_bytes).c_str(), r.samples, r.best,
                r.median, r.pred_cal, r.pred_cal > 0 ? r.median / r.pred_cal : 0.0);
    if (link) {
      std::printf(" %.4g | %.2f |", r.pred_link, r.pred_link > 0 ? r.median / r.pred_link : 0.0);
    }
    std::printf(" %s |\n", r.note.c_str());
  }
}

void write_json(const std::vector<row>& rows,
                const config& c,
                int p,
                const gc::network& cal,
                const gm::calibration& calib,
                const gm::calibration& sparse_calib) {
  std::FILE* f = std::fopen(c.json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", c.json_path.c_str());
    return;
  }
  std::fprintf(f, "{\n  \"label\": \"%s\",\n  \"ranks\": %d,\n", c.label.c_str(), p);
  std::fprintf(f, "  \"calibrated\": {\"alpha_s\": %.6e, \"beta_s_per_byte\": %.6e},\n",
               cal.alpha_seconds, cal.beta_seconds_per_byte);
  if (!sparse_calib.bytes.empty()) {
    std::fprintf(f,
                 "  \"sparse_calibrated\": {\"alpha_s\": %.6e, \"beta_s_per_byte\": %.6e, "
                 "\"r_squared\": %.4f},\n",
                 sparse_calib.net.alpha_seconds, sparse_calib.net.beta_seconds_per_byte,
                 sparse_calib.fit.r_squared);
  }
  std::fprintf(f, "  \"calibration_points\": [");
  for (std::size_t i = 0; i < calib.bytes.size(); ++i) {
    std::fprintf(f, "%s{\"bytes\": %.0f, \"median_s\": %.6e}", i ? ", " : "", calib.bytes[i],
                 calib.seconds[i]);
  }
  std::fprintf(f, "],\n  \"link_bits_per_s\": %.6e,\n  \"rows\": [\n", c.link_bits);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    std::fprintf(f,
                 "    {\"section\": \"%s\", \"op\": \"%s\", \"bytes\": %.0f, \"wire_bytes\": %.0f, "
                 "\"samples\": %u, \"best_s\": %.6e, \"median_s\": %.6e, \"model_s\": %.6e, "
                 "\"link_model_s\": %.6e, \"note\": \"%s\"}%s\n",
                 r.section.c_str(), r.op.c_str(), r.bytes, r.wire_bytes, r.samples, r.best,
                 r.median, r.pred_cal, r.pred_link, r.note.c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

// The two-tier mode (--two-tier): it uses the helpers above, so it is included here, inside this
// file's unnamed namespace.
#include "two_tier.hpp"

int run(int argc, char** argv) {
  const config c = parse(argc, argv);
  gm::communicator comm(MPI_COMM_WORLD);
  if (c.two_tier) {
    return run_two_tier(c, comm);
  }
  const int p = comm.size();
  const int rank = comm.rank();
  const bool root = rank == 0;
  const bool link = c.link_bits > 0;
  const gc::network link_net =
      link ? gc::network::from_link(c.link_bits, c.link_latency) : gc::network{};

  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);

  // Calibration (same run, same ranks): alpha and beta from gradcomp's ring, 4 KiB .. 16 MiB.
  const auto cal_start = std::chrono::steady_clock::now();
  const gm::calibration calib = gm::calibrate_ring_allreduce(comm, {});
  const double cal_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cal_start).count();
  const gc::network cal = calib.net;
  if (root) {
    std::printf("# gradcomp transport benchmarks\n\n");
    std::printf("- ranks: %d (rank 0 on %s)%s%s\n", p, host, c.label.empty() ? "" : "; ",
                c.label.c_str());
    std::printf("- wait policy: yield (MPI_Test + sched_yield) for every nonblocking call\n");
    std::printf("- timing: Ibarrier sync, then slowest rank's time; 1 warm-up + N samples; "
                "ratios use the median\n");
    std::printf("- calibrated (calibrate_ring_allreduce, 4 KiB .. 16 MiB, %.2f s): alpha = %.3g "
                "us, beta = %.4g ns/B (%.3g Gbit/s)\n",
                cal_seconds, cal.alpha_seconds * 1e6, cal.beta_seconds_per_byte * 1e9,
                cal.beta_seconds_per_byte > 0 ? 8.0 / cal.beta_seconds_per_byte / 1e9 : 0.0);
    if (link) {
      std::printf("- link model: %.3g Gbit/s, latency %.3g us\n", c.link_bits / 1e9,
                  c.link_latency * 1e6);
    }
    std::fflush(stdout);
  }

  std::vector<row> rows;
  std::string sparse_calibration_line; // rank 0's description of the sparse calibration
  gm::calibration sparse_calib;        // calibrate_sparse_allgather's (when sparse runs)
  auto add = [&](row r) {
    rows.push_back(r);
    if (root) { // progress on stderr, so a hung run still shows what it measured
      std::fprintf(stderr, "[transports] %s %s %s: best %.4g s median %.4g s model %.4g s\n",
                   r.section.c_str(), r.op.c_str(), human_bytes(r.bytes).c_str(), r.best, r.median,
                   r.pred_cal);
    }
  };
  auto pred = [&](const std::function<double(const gc::network&)>& f, row& r) {
    r.pred_cal = f(cal);
    r.pred_link = link ? f(link_net) : -1.0;
  };

  // ---- dense: ring vs MPI_Iallreduce (yield) vs MPI_Allreduce -----------------------------
  double dense_iallreduce_full = 0, dense_allreduce_full = 0, dense_ring_full = 0;
  const double full_bytes = 4.0 * static_cast<double>(c.sparse_elements);
  const float expected = static_cast<float>(p) * static_cast<float>(p + 1) / 2.0f;
  if (c.dense) {
    gm::ring_allreduce ring(comm);
    for (std::size_t bytes = c.min_bytes; bytes <= c.max_bytes; bytes *= 4) {
      std::vector<float> data(bytes / sizeof(float));
      const unsigned n = samples_for(c, double(bytes));
      const auto prep = [&] { fill(data, static_cast<float>(rank + 1)); };
      const auto model = [&](const gc::network& net) {
        return gc::ring_allreduce_seconds(double(bytes), p, net);
      };
      for (int which = 0; which < 3; ++which) {
        std::function<void()> op;
        row r = make_row("dense", "", double(bytes), double(bytes));
        if (which == 0) {
          r.op = "gradcomp ring_allreduce";
          op = [&] { ring(data); };
        } else if (which == 1) {
          r.op = "MPI_Iallreduce + yield";
          op = [&] {
            MPI_Request req = MPI_REQUEST_NULL;
            gm::detail::check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT,
                                             MPI_SUM, comm.native(), &req),
                              "MPI_Iallreduce");
            wait_request(req);
          };
        } else {
          r.op = "MPI_Allreduce (blocking)";
          op = [&] {
            gm::detail::check(MPI_Allreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT,
                                            MPI_SUM, comm.native()),
                              "MPI_Allreduce");
          };
        }
        const auto [best, median] = measure(comm, n, prep, op);
        r.samples = n;
        r.best = best;
        r.median = median;
        pred(model, r);
        if (!check_sum(data, expected)) {
          r.note = "WRONG SUM";
        }
        if (double(bytes) == full_bytes) {
          (which == 0   ? dense_ring_full
           : which == 1 ? dense_iallreduce_full
                        : dense_allreduce_full) = median;
        }
        add(r);
      }
    }
  }

  // ---- sparse: sparse_allgather of exact top-k messages vs dense allreduce ------------------
  if (c.sparse) {
    const std::size_t n = c.sparse_elements;
    std::vector<float> grad(n);
    std::mt19937 gen(1234u + static_cast<unsigned>(rank));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& x : grad) {
      x = dist(gen);
    }
    std::vector<float> sum(n);
    if (dense_iallreduce_full == 0.0) { // the dense baseline of the same tensor, if not done yet
      std::vector<float> data(n);
      const unsigned reps = samples_for(c, full_bytes);
      const auto prep = [&] { fill(data, static_cast<float>(rank + 1)); };
      dense_iallreduce_full =
          measure(comm, reps, prep, [&] {
            MPI_Request req = MPI_REQUEST_NULL;
            gm::detail::check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), int(n), MPI_FLOAT, MPI_SUM,
                                             comm.native(), &req),
                              "MPI_Iallreduce");
            wait_request(req);
          }).second;
      dense_allreduce_full = measure(comm, reps, prep, [&] {
                               gm::detail::check(MPI_Allreduce(MPI_IN_PLACE, data.data(), int(n),
                                                               MPI_FLOAT, MPI_SUM, comm.native()),
                                                 "MPI_Allreduce");
                             }).second;
    }
    // the sparse allgather's own calibration (its receive-side work folded in), at density 0.01
    const auto sparse_cal_start = std::chrono::steady_clock::now();
    sparse_calib = gm::calibrate_sparse_allgather(comm, {});
    const double sparse_cal_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sparse_cal_start).count();
    if (root) {
      std::fprintf(stderr,
                   "[transports] calibrate_sparse_allgather (%.2f s): alpha %.3g us, beta %.4g "
                   "ns/B, fit r^2 %.3f\n",
                   sparse_cal_seconds, sparse_calib.net.alpha_seconds * 1e6,
                   sparse_calib.net.beta_seconds_per_byte * 1e9, sparse_calib.fit.r_squared);
      sparse_calibration_line =
          fmt("%.2f", sparse_cal_seconds) +
          " s): alpha = " + fmt("%.3g", sparse_calib.net.alpha_seconds * 1e6) +
          " us, beta = " + fmt("%.4g", sparse_calib.net.beta_seconds_per_byte * 1e9) +
          " ns/B, fit r^2 = " + fmt("%.3f", sparse_calib.fit.r_squared);
    }
    gm::sparse_allgather pairwise(comm, {.algorithm = gm::sparse_allgather_algorithm::pairwise});
    gm::sparse_allgather allgatherv(comm,
                                    {.algorithm = gm::sparse_allgather_algorithm::mpi_allgatherv});
    for (const double density : {0.1, 0.01, 0.001}) {
      gradcomp::exact_top_k topk(density);
      gradcomp::sparse_message msg;
      topk.compress(std::span<const float>(grad), msg);
      const double wire =
          double(gradcomp::encoded_size_bytes(msg, gradcomp::index_encoding::delta_varint));
      // the model's message: the largest encoded message over the ranks (ring allgather steps)
      const double wire_max = slowest(comm, wire);
      const double k = double(msg.nnz());
      const unsigned reps = std::max(c.reps_medium, 3u);
      // both algorithms, alternating sample by sample so that they see the same machine load
      std::vector<double> times[2];
      gm::sparse_allgather* gathers[2] = {&pairwise, &allgatherv};
      gathers[0]->operator()(msg, sum); // warm-up
      gathers[1]->operator()(msg, sum);
      for (unsigned rep = 0; rep < reps; ++rep) {
        for (int a = 0; a < 2; ++a) {
          times[a].push_back(measure(
                                 comm, 1, [] {}, [&] { (*gathers[a])(msg, sum); }, false)
                                 .second);
        }
      }
      for (int a = 0; a < 2; ++a) {
        const auto [best, median] = best_and_median(times[a]);
        row r = make_row(
            "sparse",
            std::string(a == 0 ? "sparse_allgather" : "sparse_allgather (MPI_Iallgatherv)") +
                " d=" + fmt("%g", density),
            full_bytes, wire_max);
        r.samples = reps;
        r.best = best;
        r.median = median;
        const auto model = [&](const gc::network& net) {
          return gc::sparse_allgather_seconds(k, wire_max / k, p, net);
        };
        pred(model, r);
        const double ring_calibrated = r.pred_cal;
        r.pred_cal = model(sparse_calib.net); // the transport's own calibration
        r.note = "ring-calibrated model " + fmt("%.4g", ring_calibrated) + " s (" +
                 fmt("%.2f", median / ring_calibrated) + "x); k=" + fmt("%.0f", k) +
                 "; dense MPI_Iallreduce / this = " + fmt("%.1fx", dense_iallreduce_full / median) +
                 ", MPI_Allreduce / this = " + fmt("%.1fx", dense_allreduce_full / median);
        if (dense_ring_full > 0) {
          r.note += ", ring / this = " + fmt("%.1fx", dense_ring_full / median);
        }
        if (gathers[a]->used_dense()) {
          r.note += "; DENSE SWITCH FIRED (ring allreduce used)";
        }
        add(r);
      }
    }
  }

  // ---- parameter server (S = 1) and hierarchical allreduce (G = 2) vs ring ----------------
  if (c.others) {
    gm::ring_allreduce ring(comm);
    gm::parameter_server ps(comm, {.servers = 1});
    gm::hierarchical_allreduce hier_leader(
        comm, {.group_size = 2, .variant = gm::hierarchical_variant::leader});
    gm::hierarchical_allreduce hier_rs(
        comm, {.group_size = 2, .variant = gm::hierarchical_variant::reduce_scatter});
    const int g = std::min(2, p);
    const auto piece_bytes = static_cast<double>(gm::hierarchical_allreduce_options{}.piece_bytes);
    for (const std::size_t bytes :
         {std::size_t{1} << 18, std::size_t{1} << 22, std::size_t{1} << 26}) {
      if (bytes > c.max_bytes || bytes < c.min_bytes) {
        continue;
      }
      const double b = double(bytes);
      const unsigned n = samples_for(c, b);
      std::vector<float> data(bytes / sizeof(float));
      std::vector<float> avg(data.size());
      const auto prep = [&] { fill(data, static_cast<float>(rank + 1)); };
      gradcomp::sparse_message push;
      push.dense_length_elements = data.size();
      push.dense = true;
      push.values.assign(data.size(), static_cast<float>(rank + 1));

      auto emit = [&](const std::string& op, const std::function<void()>& f,
                      const std::function<double(const gc::network&)>& model, bool sum_check,
                      bool avg_check) {
        const auto [best, median] = measure(comm, n, prep, f);
        row r = make_row("others", op, b, b);
        r.samples = n;
        r.best = best;
        r.median = median;
        pred(model, r);
        if ((sum_check && !check_sum(data, expected)) ||
            (avg_check && !check_sum(avg, expected / static_cast<float>(p)))) {
          r.note = "WRONG RESULT";
        }
        add(r);
      };
      emit(
          "gradcomp ring_allreduce", [&] { ring(data); },
          [&](const gc::network& net) { return gc::ring_allreduce_seconds(b, p, net); }, true,
          false);
      emit(
          "parameter_server S=1 (dense push)", [&] { ps(push, avg); },
          [&](const gc::network& net) { return gc::parameter_server_seconds(b, b, p, 1, net); },
          false, true);
      emit(
          "hierarchical G=2 leader", [&] { hier_leader(data); },
          [&](const gc::network& net) {
            return gc::hierarchical_allreduce_seconds(
                b, p, g, net, net, gc::hierarchical_variant::leader, false, piece_bytes);
          },
          true, false);
      emit(
          "hierarchical G=2 reduce_scatter", [&] { hier_rs(data); },
          [&](const gc::network& net) {
            return gc::hierarchical_allreduce_seconds(
                b, p, g, net, net, gc::hierarchical_variant::reduce_scatter, false, piece_bytes);
          },
          true, false);
    }
  }

  if (root) {
    if (c.dense) {
      std::printf("\n## Dense allreduce: gradcomp ring vs MPICH (model: ring_allreduce_seconds)\n");
      print_table(rows, c, "dense");
    }
    if (c.sparse) {
      std::printf("\n## Sparse allgather of exact top-k, %zu floats (model: "
                  "sparse_allgather_seconds, largest encoded message, alpha and beta from "
                  "calibrate_sparse_allgather (%s))\n",
                  c.sparse_elements, sparse_calibration_line.c_str());
      print_table(rows, c, "sparse");
    }
    if (c.others) {
      std::printf("\n## Parameter server (S=1, co-located) and hierarchical allreduce (G=2) vs "
                  "ring\n");
      print_table(rows, c, "others");
    }
    std::printf("\n(%s)\n", "results flushed before MPI_Finalize");
    std::fflush(stdout);
    if (!c.json_path.empty()) {
      write_json(rows, c, p, cal, calib, sparse_calib);
    }
  }
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
    std::fprintf(stderr, "gradcomp_bench_transports: %s\n", e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Finalize();
  return rc;
}
