// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The two-tier mode of gradcomp_bench_transports (`--two-tier`): several
//! ranks per host, fast shared memory inside a host and a slow link between hosts. Times
//! gradcomp's flat ring_allreduce, hierarchical_allreduce (leader and reduce_scatter, one group
//! per host) and MPICH's allreduce at 1 KiB .. 64 MiB, each beside the alpha-beta model with
//! separately calibrated intra-host and inter-host networks.
//!
//! Part of transports.cpp, not a standalone header: transports.cpp includes it inside its
//! unnamed namespace after its timing helpers (config, row, measure, sync, slowest, fill,
//! check_sum, human_bytes, fmt, samples_for), which this file uses, and after every standard and
//! gradcomp header it needs.
#pragma once

//! @brief The job's hosts as the two-tier mode sees them, checked by find_hosts.
struct host_layout {
  int ranks = 0;                  //!< P.
  int per_host = 0;               //!< G: ranks on each host, the hierarchical group size.
  int hosts = 0;                  //!< H = P / G.
  std::vector<std::string> names; //!< MPI_Get_processor_name of each rank.
};

//! @brief Gathers every rank's processor name and the size of its MPI_COMM_TYPE_SHARED node
//! (`node`), picks G (`requested` > 0, else the node size) and checks that hierarchical_allreduce
//! with group_size G, whose group k is ranks k G .. k G + G - 1, has exactly one group per host:
//! every node has G ranks, P is a multiple of G, every group's ranks share one processor name and
//! no two groups share one. Collective over `comm`; every rank sees the same data and so throws
//! the same std::runtime_error (naming the ranks and hosts) when a check fails.
host_layout find_hosts(const gm::communicator& comm, const gm::communicator& node, int requested) {
  const int p = comm.size();
  std::vector<char> names(static_cast<std::size_t>(p) * MPI_MAX_PROCESSOR_NAME, '\0');
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  gm::detail::check(MPI_Get_processor_name(mine, &length), "MPI_Get_processor_name");
  gm::detail::check(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                                  MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm.native()),
                    "MPI_Allgather");
  const int node_size = node.size();
  std::vector<int> node_sizes(static_cast<std::size_t>(p));
  gm::detail::check(
      MPI_Allgather(&node_size, 1, MPI_INT, node_sizes.data(), 1, MPI_INT, comm.native()),
      "MPI_Allgather");
  host_layout h;
  h.ranks = p;
  for (int r = 0; r < p; ++r) {
    h.names.emplace_back(names.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  }
  const auto where = [&](int r) {
    return "rank " + std::to_string(r) + " (host " + h.names[static_cast<std::size_t>(r)] + ")";
  };
  h.per_host = requested > 0 ? requested : node_sizes[0];
  const int g = h.per_host;
  for (int r = 0; r < p; ++r) {
    if (node_sizes[static_cast<std::size_t>(r)] != g) {
      throw std::runtime_error(
          "--two-tier: the hosts must each have the group size G = " + std::to_string(g) +
          " ranks (" + (requested > 0 ? "--group-size" : "ranks sharing rank 0's node") +
          "), but " + where(r) + " shares its node with " +
          std::to_string(node_sizes[static_cast<std::size_t>(r)]) + " ranks in all");
    }
  }
  if (p % g != 0) {
    throw std::runtime_error("--two-tier: " + std::to_string(p) +
                             " ranks are not a multiple of the group size " + std::to_string(g));
  }
  h.hosts = p / g;
  for (int r = 0; r < p; ++r) {
    const int first = r / g * g;
    if (h.names[static_cast<std::size_t>(r)] != h.names[static_cast<std::size_t>(first)]) {
      throw std::runtime_error("--two-tier: hierarchical_allreduce's group " +
                               std::to_string(r / g) + " (ranks " + std::to_string(first) + ".." +
                               std::to_string(first + g - 1) +
                               ") spans two hosts: " + where(first) + " and " + where(r) +
                               "; launch the ranks host by host (mpiexec -ppn G)");
    }
  }
  for (int a = 0; a < h.hosts; ++a) {
    for (int b = a + 1; b < h.hosts; ++b) {
      if (h.names[static_cast<std::size_t>(a * g)] == h.names[static_cast<std::size_t>(b * g)]) {
        throw std::runtime_error(
            "--two-tier: groups " + std::to_string(a) + " and " + std::to_string(b) +
            " of G = " + std::to_string(g) + " ranks are on the same host " +
            h.names[static_cast<std::size_t>(a * g)] + " (groups must coincide with hosts)");
      }
    }
  }
  return h;
}

//! @brief One measured operation of the two-tier table.
struct tier_row {
  row r;                         //!< section "two-tier"; pred_cal: the calibrated model.
  double speedup_measured = 0.0; //!< the flat ring's median / this median.
  double speedup_model = 0.0;    //!< the flat ring's model / this model.
  double shared_link_model = -1; //!< reduce_scatter: model with its G rings sharing a host link.
  std::optional<gc::hierarchical_variant> variant; //!< the hierarchical rows' variant.
  bool pipelined = false; //!< hierarchical rows: pipelined pieces (else the vector in one piece).
};

//! @brief Where the two calibrations of the two-tier mode came from, for the output.
struct tier_networks {
  gc::network intra;                 //!< used: the largest alpha and beta over the hosts.
  gc::network inter;                 //!< the leaders' calibration (one rank per host).
  std::vector<double> host_alpha;    //!< each host's intra-host alpha (seconds).
  std::vector<double> host_beta;     //!< each host's intra-host beta (seconds per byte).
  gm::calibration intra_rank0;       //!< this rank's host's calibration (rank 0: for the JSON).
  gm::calibration inter_calibration; //!< the leaders' calibration (valid on rank 0).
  double intra_seconds = 0.0;        //!< wall time of the intra-host calibration.
  double inter_seconds = 0.0;        //!< wall time of the inter-host calibration.
};

//! @brief Waits in an MPI_Ibarrier on `comm`, asleep between tests (wait_kind::sleep, up to
//! 1 ms): the ranks outside a calibration wait here, leaving the cores to the ranks being
//! calibrated (a yielding rank stays runnable and takes its share of a core).
void wait_asleep(const gm::communicator& comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  gm::detail::check(MPI_Ibarrier(comm.native(), &r), "MPI_Ibarrier");
  gm::wait(r, gm::wait_policy{.kind = gm::wait_kind::sleep,
                              .initial_sleep = std::chrono::microseconds{5},
                              .max_sleep = std::chrono::microseconds{1000}});
}

//! @brief Calibrates the intra-host network (calibrate_ring_allreduce on each host's `node`
//! communicator, one host after the other) and the inter-host network (calibrate_ring_allreduce
//! on `leaders`, the ranks with node rank 0); during each calibration the other ranks wait
//! asleep (wait_asleep), so that the parameters describe the links rather than this machine's
//! shared cores. Every rank gets the same result: the intra network is the largest alpha and the
//! largest beta over the hosts, the inter network rank 0's (a leader's). Collective over `comm`.
tier_networks calibrate_tiers(const gm::communicator& comm,
                              const gm::communicator& node,
                              const std::optional<gm::communicator>& leaders,
                              const host_layout& h) {
  tier_networks n;
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < h.hosts; ++k) { // host k is ranks k G .. k G + G - 1 (find_hosts)
    if (comm.rank() / h.per_host == k) {
      n.intra_rank0 = gm::calibrate_ring_allreduce(node, {}); // this rank's host's
    }
    wait_asleep(comm);
  }
  n.intra_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mine[2] = {n.intra_rank0.net.alpha_seconds, n.intra_rank0.net.beta_seconds_per_byte};
  std::vector<double> all(2 * static_cast<std::size_t>(h.ranks));
  gm::detail::check(MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, comm.native()),
                    "MPI_Allgather");
  for (int k = 0; k < h.hosts; ++k) { // the host's leader speaks for it (all its ranks agree)
    const std::size_t at = 2 * static_cast<std::size_t>(k * h.per_host);
    n.host_alpha.push_back(all[at]);
    n.host_beta.push_back(all[at + 1]);
  }
  n.intra.alpha_seconds = *std::max_element(n.host_alpha.begin(), n.host_alpha.end());
  n.intra.beta_seconds_per_byte = *std::max_element(n.host_beta.begin(), n.host_beta.end());

  start = std::chrono::steady_clock::now();
  if (leaders) {
    n.inter_calibration = gm::calibrate_ring_allreduce(*leaders, {});
  }
  wait_asleep(comm); // the other ranks wait here, asleep
  n.inter_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double inter[2] = {n.inter_calibration.net.alpha_seconds,
                     n.inter_calibration.net.beta_seconds_per_byte};
  gm::detail::check(MPI_Bcast(inter, 2, MPI_DOUBLE, 0, comm.native()), "MPI_Bcast");
  n.inter.alpha_seconds = inter[0];
  n.inter.beta_seconds_per_byte = inter[1];
  return n;
}

//! @brief "alpha = A us, beta = B ns/B (R Gbit/s)" for a network.
std::string describe(const gc::network& net) {
  return "alpha = " + fmt("%.3g", net.alpha_seconds * 1e6) +
         " us, beta = " + fmt("%.4g", net.beta_seconds_per_byte * 1e9) + " ns/B (" +
         fmt("%.3g", net.beta_seconds_per_byte > 0 ? 8.0 / net.beta_seconds_per_byte / 1e9 : 0.0) +
         " Gbit/s)";
}

//! @brief Writes the two-tier run as JSON to c.json_path (rank 0): the layout, both
//! calibrations (with rank 0's host's and the leaders' calibration points) and the rows, in
//! the same row fields as the other modes plus the speed-ups over the flat ring.
void write_two_tier_json(const std::vector<tier_row>& rows,
                         const config& c,
                         const host_layout& h,
                         const tier_networks& n) {
  std::FILE* f = std::fopen(c.json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", c.json_path.c_str());
    return;
  }
  const auto points = [&](const gm::calibration& cal) {
    std::string s = "[";
    for (std::size_t i = 0; i < cal.bytes.size(); ++i) {
      s += (i ? ", " : "") + std::string("{\"bytes\": ") + fmt("%.0f", cal.bytes[i]) +
           ", \"median_s\": " + fmt("%.6e", cal.seconds[i]) + "}";
    }
    return s + "]";
  };
  std::fprintf(f, "{\n  \"label\": \"%s\",\n  \"mode\": \"two-tier\",\n  \"ranks\": %d,\n",
               c.label.c_str(), h.ranks);
  std::fprintf(f, "  \"hosts\": %d,\n  \"ranks_per_host\": %d,\n  \"host_names\": [", h.hosts,
               h.per_host);
  for (int k = 0; k < h.hosts; ++k) {
    std::fprintf(f, "%s\"%s\"", k ? ", " : "",
                 h.names[static_cast<std::size_t>(k * h.per_host)].c_str());
  }
  std::fprintf(f,
               "],\n  \"intra_calibrated\": {\"alpha_s\": %.6e, \"beta_s_per_byte\": %.6e, "
               "\"per_host\": [",
               n.intra.alpha_seconds, n.intra.beta_seconds_per_byte);
  for (std::size_t k = 0; k < n.host_alpha.size(); ++k) {
    std::fprintf(f, "%s{\"alpha_s\": %.6e, \"beta_s_per_byte\": %.6e}", k ? ", " : "",
                 n.host_alpha[k], n.host_beta[k]);
  }
  std::fprintf(f, "], \"rank0_host_points\": %s},\n", points(n.intra_rank0).c_str());
  std::fprintf(f,
               "  \"inter_calibrated\": {\"alpha_s\": %.6e, \"beta_s_per_byte\": %.6e, "
               "\"points\": %s},\n",
               n.inter.alpha_seconds, n.inter.beta_seconds_per_byte,
               points(n.inter_calibration).c_str());
  std::fprintf(f, "  \"flat_ring_network\": \"%s\",\n  \"link_bits_per_s\": %.6e,\n  \"rows\": [\n",
               h.hosts > 1 ? "inter" : "intra", c.link_bits);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i].r;
    std::fprintf(f,
                 "    {\"section\": \"%s\", \"op\": \"%s\", \"bytes\": %.0f, \"wire_bytes\": %.0f, "
                 "\"samples\": %u, \"best_s\": %.6e, \"median_s\": %.6e, \"model_s\": %.6e, "
                 "\"link_model_s\": %.6e, \"speedup_vs_ring_measured\": %.4f, "
                 "\"speedup_vs_ring_model\": %.4f, \"shared_link_model_s\": %.6e, "
                 "\"note\": \"%s\"}%s\n",
                 r.section.c_str(), r.op.c_str(), r.bytes, r.wire_bytes, r.samples, r.best,
                 r.median, r.pred_cal, r.pred_link, rows[i].speedup_measured, rows[i].speedup_model,
                 rows[i].shared_link_model, r.note.c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

//! @brief Prints the two-tier tables on rank 0's stdout: every row (measured, model, ratio,
//! speed-up over the flat ring, measured and modelled), then per size whether each
//! hierarchical variant beats the ring, in the model and measured.
void print_two_tier(const std::vector<tier_row>& rows, const config& c) {
  const bool link = c.link_bits > 0;
  std::printf("\n| size | operation | N | best s | median s | model s | median/model |%s "
              "speed-up vs ring, measured | speed-up vs ring, model | note |\n",
              link ? " link model s | median/link |" : "");
  std::printf("|---|---|---|---|---|---|---|%s---|---|---|\n", link ? "---|---|" : "");
  for (const tier_row& t : rows) {
    const row& r = t.r;
    std::printf("| %s | %s | %u | %.4g | %.4g | %.4g | %.2f |", human_bytes(r.bytes).c_str(),
                r.op.c_str(), r.samples, r.best, r.median, r.pred_cal,
                r.pred_cal > 0 ? r.median / r.pred_cal : 0.0);
    if (link) {
      std::printf(" %.4g | %.2f |", r.pred_link, r.pred_link > 0 ? r.median / r.pred_link : 0.0);
    }
    std::printf(" %.2f | %.2f | %s |\n", t.speedup_measured, t.speedup_model, r.note.c_str());
  }
  std::printf("\n### Hierarchical faster than the flat ring? (speed-up = ring median / "
              "hierarchical median; model: ring model / hierarchical model)\n\n");
  std::printf("| size | schedule | leader: model | leader: measured | reduce_scatter: model | "
              "reduce_scatter: measured |\n|---|---|---|---|---|---|\n");
  const auto verdict = [](double s) { return (s > 1.0 ? "yes " : "no ") + fmt("(%.2fx)", s); };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].variant != gc::hierarchical_variant::leader) {
      continue;
    }
    const tier_row& lead = rows[i];
    const auto rs = std::find_if(rows.begin() + static_cast<std::ptrdiff_t>(i), rows.end(),
                                 [&](const tier_row& t) {
                                   return t.variant == gc::hierarchical_variant::reduce_scatter &&
                                          t.pipelined == lead.pipelined;
                                 });
    if (rs == rows.end()) {
      continue;
    }
    std::printf("| %s | %s | %s | %s | %s | %s |\n", human_bytes(lead.r.bytes).c_str(),
                lead.pipelined ? "pipelined pieces" : "one piece",
                verdict(lead.speedup_model).c_str(), verdict(lead.speedup_measured).c_str(),
                verdict(rs->speedup_model).c_str(), verdict(rs->speedup_measured).c_str());
  }
}

//! @brief The two-tier mode (see the file comment): checks the layout (find_hosts), calibrates
//! both tiers (calibrate_tiers), then per size 1 KiB, 16 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB,
//! 64 MiB (those within --min-bytes .. --max-bytes) times the flat ring, both hierarchical variants
//! with group_size G, MPI_Allreduce and MPI_Iallreduce + yield: one untimed warm-up of each, then N
//! rounds in which each operation is timed once in turn, so that all see the same machine load.
//! Prints the tables on rank 0 and writes the JSON. Collective over `comm`; returns the exit
//! status.
int run_two_tier(const config& c, const gm::communicator& comm) {
  const int p = comm.size();
  const int rank = comm.rank();
  const bool root = rank == 0;
  const gm::communicator node = gm::detail::split_by_node(comm);
  const host_layout h = find_hosts(comm, node, c.group_size);
  const int g = h.per_host;
  const std::optional<gm::communicator> leaders =
      gm::detail::split(comm, node.rank() == 0 ? 0 : MPI_UNDEFINED, rank);
  const tier_networks n = calibrate_tiers(comm, node, leaders, h);
  const bool link = c.link_bits > 0;
  const gc::network link_inter =
      link ? gc::network::from_link(c.link_bits, c.link_latency) : gc::network{};

  if (root) {
    std::printf("# gradcomp transport benchmarks: two-tier cluster\n\n");
    std::printf("- ranks: %d = %d hosts x %d%s%s\n- hosts:", p, h.hosts, g,
                c.label.empty() ? "" : "; ", c.label.c_str());
    for (int k = 0; k < h.hosts; ++k) {
      std::printf("%s %s (ranks %d..%d)", k ? "," : "",
                  h.names[static_cast<std::size_t>(k * g)].c_str(), k * g, k * g + g - 1);
    }
    std::printf("\n- hierarchical_allreduce: group_size %d (checked: each group of %d "
                "consecutive ranks is one host, and MPI_COMM_TYPE_SHARED agrees)\n",
                g, g);
    std::printf("- intra-host network: calibrate_ring_allreduce (4 KiB .. 16 MiB) on each host's "
                "%d ranks, one host after the other, the other ranks asleep (%.2f s); per host:",
                g, n.intra_seconds);
    for (std::size_t k = 0; k < n.host_alpha.size(); ++k) {
      std::printf("%s alpha %.3g us, beta %.4g ns/B", k ? ";" : "", n.host_alpha[k] * 1e6,
                  n.host_beta[k] * 1e9);
    }
    std::printf("; used (largest of each): %s\n", describe(n.intra).c_str());
    std::printf("- inter-host network: calibrate_ring_allreduce (4 KiB .. 16 MiB) on the %d "
                "leaders, one rank per host, the others asleep (%.2f s): %s\n",
                h.hosts, n.inter_seconds, describe(n.inter).c_str());
    if (h.hosts > 1) {
      std::printf("- flat ring model: ring_allreduce_seconds(M, %d, inter-host network): in each "
                  "of its 2(P-1) steps one segment of M/P crosses every host's link (the pairs "
                  "r, r+1 on different hosts), so the slowest (inter-host) link sets each step's "
                  "time; the faster intra-host pairs do not shorten a step\n",
                  p);
    } else {
      std::printf("- flat ring model: ring_allreduce_seconds(M, %d, intra-host network): one "
                  "host, no inter-host link (the hierarchical allreduce is one group)\n",
                  p);
    }
    std::printf("- hierarchical models: hierarchical_allreduce_seconds(M, %d, %d, intra, inter, "
                "variant); MPI_Allreduce / MPI_Iallreduce rows: the flat ring's model, as a "
                "reference\n",
                p, g);
    std::printf("- reduce_scatter note: the model column runs the %d shard rings in parallel "
                "on separate links; here they share each host's link, so the note also gives "
                "the model with group_shares_link (the inter-host beta x %d on the rings)\n",
                g, g);
    if (link) {
      std::printf("- link model: inter-host network = the nominal %.3g Gbit/s link, latency %.3g "
                  "us (intra-host as calibrated)\n",
                  c.link_bits / 1e9, c.link_latency * 1e6);
    }
    std::printf("- timing: Ibarrier sync, then slowest rank's time; 1 warm-up + N rounds, each "
                "round times every operation once in turn; ratios use the median\n");
    std::fflush(stdout);
  }

  gm::ring_allreduce ring(comm);
  // the hierarchical variants with pipelined pieces of c.piece_bytes, and each with the whole
  // vector as one piece (the schedule before pipelining; 1 GiB pieces, more than any size here)
  const std::size_t whole = std::size_t{1} << 30;
  const auto hierarchical = [&](gm::hierarchical_variant v, std::size_t piece) {
    return std::make_unique<gm::hierarchical_allreduce>(
        comm,
        gm::hierarchical_allreduce_options{.group_size = g, .variant = v, .piece_bytes = piece});
  };
  const auto leader = hierarchical(gm::hierarchical_variant::leader, c.piece_bytes);
  const auto leader_whole = hierarchical(gm::hierarchical_variant::leader, whole);
  const auto shards = hierarchical(gm::hierarchical_variant::reduce_scatter, c.piece_bytes);
  const auto shards_whole = hierarchical(gm::hierarchical_variant::reduce_scatter, whole);
  const float expected = static_cast<float>(p) * static_cast<float>(p + 1) / 2.0f;
  std::vector<tier_row> rows;
  constexpr std::size_t kib = 1024, mib = kib * kib;
  for (const std::size_t bytes : {kib, 16 * kib, 256 * kib, mib, 4 * mib, 16 * mib, 64 * mib}) {
    if (bytes < c.min_bytes || bytes > c.max_bytes) {
      continue;
    }
    const double b = double(bytes);
    std::vector<float> data(bytes / sizeof(float));
    const auto prep = [&] { fill(data, static_cast<float>(rank + 1)); };
    struct op_case {
      std::string name;
      std::function<void()> run;
      std::function<double(const gc::network&)> model;                // of the inter-host network
      std::optional<gc::hierarchical_variant> variant = std::nullopt; // hierarchical rows
      double piece_bytes = 0.0; // hierarchical rows: the model's pieces (0: one)
    };
    const auto ring_model = [&](const gc::network& inter) {
      return gc::ring_allreduce_seconds(b, p, h.hosts > 1 ? inter : n.intra);
    };
    const auto hier_model = [&](gc::hierarchical_variant v, double piece) {
      return [&, v, piece](const gc::network& inter) {
        return gc::hierarchical_allreduce_seconds(b, p, g, n.intra, inter, v, false, piece);
      };
    };
    const auto piece = static_cast<double>(c.piece_bytes);
    const std::string pieces = ", pipelined " + human_bytes(piece) + " pieces";
    const std::vector<op_case> ops = {
        {"gradcomp ring_allreduce (flat)", [&] { ring(data); }, ring_model},
        {"hierarchical leader" + pieces, [&] { (*leader)(data); },
         hier_model(gc::hierarchical_variant::leader, piece), gc::hierarchical_variant::leader,
         piece},
        {"hierarchical leader, one piece", [&] { (*leader_whole)(data); },
         hier_model(gc::hierarchical_variant::leader, 0.0), gc::hierarchical_variant::leader, 0.0},
        {"hierarchical reduce_scatter" + pieces, [&] { (*shards)(data); },
         hier_model(gc::hierarchical_variant::reduce_scatter, piece),
         gc::hierarchical_variant::reduce_scatter, piece},
        {"hierarchical reduce_scatter, one piece", [&] { (*shards_whole)(data); },
         hier_model(gc::hierarchical_variant::reduce_scatter, 0.0),
         gc::hierarchical_variant::reduce_scatter, 0.0},
        {"MPI_Allreduce (blocking)",
         [&] {
           gm::detail::check(MPI_Allreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT,
                                           MPI_SUM, comm.native()),
                             "MPI_Allreduce");
         },
         ring_model},
        {"MPI_Iallreduce + yield",
         [&] {
           MPI_Request req = MPI_REQUEST_NULL;
           gm::detail::check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT,
                                            MPI_SUM, comm.native(), &req),
                             "MPI_Iallreduce");
           wait_request(req);
         },
         ring_model},
    };
    const unsigned reps = samples_for(c, b);
    std::vector<std::vector<double>> times(ops.size());
    std::vector<bool> wrong(ops.size(), false);
    for (unsigned round = 0; round <= reps; ++round) { // round 0: the warm-up
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const double t = measure(comm, 1, prep, ops[k].run, false).second;
        if (round > 0) {
          times[k].push_back(t);
        }
        wrong[k] = wrong[k] || !check_sum(data, expected);
      }
    }
    const std::size_t first = rows.size();
    for (std::size_t k = 0; k < ops.size(); ++k) {
      tier_row t;
      t.r = make_row("two-tier", ops[k].name, b, b);
      t.r.samples = reps;
      std::tie(t.r.best, t.r.median) = best_and_median(times[k]);
      t.r.pred_cal = ops[k].model(n.inter);
      t.r.pred_link = link ? ops[k].model(link_inter) : -1.0;
      t.variant = ops[k].variant;
      t.pipelined = ops[k].piece_bytes > 0.0;
      if (ops[k].variant == gc::hierarchical_variant::reduce_scatter) {
        t.shared_link_model = gc::hierarchical_allreduce_seconds( // the G shard rings of a
            b, p, g, n.intra, n.inter, gc::hierarchical_variant::reduce_scatter, true, // host
            ops[k].piece_bytes);
        t.r.note = "shared-link model " + fmt("%.4g", t.shared_link_model) + " s (" +
                   fmt("%.2fx", t.r.median / t.shared_link_model) + ")";
      } else if (!ops[k].variant && k > 0) {
        t.r.note = "model: the flat ring's";
      }
      if (wrong[k]) {
        t.r.note += std::string(t.r.note.empty() ? "" : "; ") + "WRONG SUM";
      }
      rows.push_back(t);
      if (root) {
        std::fprintf(stderr,
                     "[transports] two-tier %s %s: best %.4g s median %.4g s model %.4g s\n",
                     t.r.op.c_str(), human_bytes(b).c_str(), t.r.best, t.r.median, t.r.pred_cal);
      }
    }
    for (std::size_t k = first; k < rows.size(); ++k) {
      rows[k].speedup_measured = rows[first].r.median / rows[k].r.median;
      rows[k].speedup_model =
          rows[k].r.pred_cal > 0 ? rows[first].r.pred_cal / rows[k].r.pred_cal : 0.0;
    }
  }

  if (root) {
    std::printf("\n## Two-tier: flat ring vs hierarchical allreduce (group = host) vs MPICH\n");
    print_two_tier(rows, c);
    std::printf("\n(%s)\n", "results flushed before MPI_Finalize");
    std::fflush(stdout);
    if (!c.json_path.empty()) {
      write_two_tier_json(rows, c, h, n);
    }
  }
  return 0;
}
