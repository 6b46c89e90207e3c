// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's run-time choice of compressor and transport: a pipeline is a
//! compile-time composition, so the program picks both by name through the library's type
//! erasure (gradcomp::any_compressor, gradcomp::any_transport) and instantiates two pipelines:
//! one for the dense methods (a concrete gradcomp::dense, averaged in place where it can be) and
//! one for every other host compressor.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/agreed_grouping.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp_train {

//! The names accepted by --method and --transport.
inline const std::vector<std::string> method_names = {"dense",
                                                      "exact_topk",
                                                      "sampled_topk",
                                                      "gaussian_threshold",
                                                      "lognormal_threshold",
                                                      "reused_threshold",
                                                      "random_k",
                                                      "signsgd",
                                                      "terngrad",
                                                      "qsgd",
                                                      "powersgd",
                                                      "fp16",
                                                      "auto"};
inline const std::vector<std::string> transport_names = {
    "allreduce", "ring", "allgather", "ps", "hierarchical", "none", "coded", "gtopk", "oktopk"};
//! A command-line name and the library value it stands for.
template <class E>
struct named {
  const char* name;
  E value;
};

//! The names of a table of named values (for CLI11's IsMember).
template <class E, std::size_t N>
std::vector<std::string> names_of(const named<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const named<E>& n : table) {
    names.emplace_back(n.name);
  }
  return names;
}

//! The value called `name` in `table`. @throws std::invalid_argument naming `what` and the name.
template <class E, std::size_t N>
E value_of(const named<E> (&table)[N], const std::string& name, const char* what) {
  for (const named<E>& n : table) {
    if (name == n.name) {
      return n.value;
    }
  }
  throw std::invalid_argument(std::string("unknown ") + what + " '" + name + "'");
}

//! --coding, --coded-schedule and --coded-variant (transport coded).
inline constexpr named<gradcomp::mpi::packet_coding> codings[] = {
    {"fixed_point", gradcomp::mpi::packet_coding::fixed_point},
    {"xor", gradcomp::mpi::packet_coding::xor_bits}};
inline constexpr named<gradcomp::mpi::coded_schedule> coded_schedules[] = {
    {"concurrent", gradcomp::mpi::coded_schedule::concurrent},
    {"serialized", gradcomp::mpi::coded_schedule::serialized}};
inline constexpr named<gradcomp::mpi::coded_variant> coded_variants[] = {
    {"full", gradcomp::mpi::coded_variant::full_recovery},
    {"reduce_scatter", gradcomp::mpi::coded_variant::reduce_scatter}};
inline const std::vector<std::string> coding_names = names_of(codings);
inline const std::vector<std::string> coded_schedule_names = names_of(coded_schedules);
inline const std::vector<std::string> coded_variant_names = names_of(coded_variants);

//! A pipeline transport chosen at run time (the library's type erasure).
using gradcomp::any_transport;

//! Transport settings from the command line.
struct transport_settings {
  std::string name = "allreduce";
  int servers = 0;                           //!< ps: server count (0: every rank).
  bool ps_dense_pull = false;                //!< ps: always pull the dense shard.
  int group_size = 2;                        //!< hierarchical: ranks per group.
  int redundancy = 1;                        //!< coded: R, the ranks that compute each part.
  std::string coding = "fixed_point";        //!< coded: fixed_point or xor.
  std::string coded_schedule = "concurrent"; //!< coded: concurrent or serialized.
  std::string coded_variant = "full";        //!< coded: full (S3) or reduce_scatter.
  bool uncoded = false; //!< coded: the uncoded baseline of the same placement (no coding).
  //! The ring options below apply to transport ring and to the sparse allgather's dense switch
  //! (ring_options).
  //! ring: how the communication thread waits (a wait_kind name). sleep (with a 50 us cap)
  //! measured fastest in training, where that thread shares the cores with backward
  //! (docs/transport-benchmarks.md, "Dense ring in training").
  std::string wait = "sleep";
  std::size_t segment_kib = 256; //!< ring: largest message of a ring step, KiB.
  //! ring: steps in flight, 2 (pipelined segment by segment, the default) or 1 (one step after
  //! the other); ring_allreduce_options::steps_in_flight.
  int ring_steps_in_flight = 2;
  unsigned wait_yield_rounds = 0;  //!< ring, --wait sleep: yields before the first sleep.
  unsigned wait_max_sleep_us = 50; //!< ring, --wait sleep: longest sleep, microseconds.
  //! ring: where the ring appends its per-step timeline (--ring-trace), or nullptr.
  gradcomp::mpi::ring_trace* trace = nullptr;
  //! Deadline of every wait of the synchronous transports, seconds (--timeout; 0: none):
  //! a peer that dies or cannot be reached ends the run with mpi::timeout_error. On by default
  //! in gradcomp-train, far above any legitimate wait (an iteration takes well under a second).
  double timeout_seconds = 300.0;
};

//! --wait: gradcomp::mpi::wait_kind by name.
inline constexpr named<gradcomp::mpi::wait_kind> wait_kinds[] = {
    {"spin", gradcomp::mpi::wait_kind::spin},
    {"yield", gradcomp::mpi::wait_kind::yield},
    {"sleep", gradcomp::mpi::wait_kind::sleep}};
inline const std::vector<std::string> wait_names = names_of(wait_kinds);

//! The ring allreduce options of `s` (--wait, --segment-kib, --ring-steps-in-flight,
//! --ring-trace).
//! @throws std::invalid_argument on an unknown wait name.
inline gradcomp::mpi::ring_allreduce_options ring_options(const transport_settings& s) {
  namespace gm = gradcomp::mpi;
  gm::ring_allreduce_options o;
  o.segment_bytes = s.segment_kib * 1024;
  o.steps_in_flight = s.ring_steps_in_flight;
  // the pipeline's layout and grouping are agreed by every rank (mpi::agreed_grouping, at
  // planning), so each group's length is the same everywhere: the per-group length check, a
  // collective that took 10-15 ms per group on 4 ranks / 2 cores during backward
  // (docs/transport-benchmarks.md), is left out
  o.check_lengths = false;
  o.wait.kind = value_of(wait_kinds, s.wait, "wait");
  o.wait.yield_rounds = s.wait_yield_rounds;
  o.wait.max_sleep = std::chrono::microseconds(s.wait_max_sleep_us);
  o.wait.timeout_seconds = s.timeout_seconds;
  o.trace = s.trace;
  return o;
}

//! Default options of a transport with --timeout applied to its wait policy.
template <class Options>
Options with_timeout(const transport_settings& s) {
  Options o;
  o.wait.timeout_seconds = s.timeout_seconds;
  return o;
}

//! The coded exchange options of transport coded (make_exchange builds a multi-part pipeline
//! over mpi::coded_dense_exchange or mpi::coded_sparse_exchange with them).
//! @throws std::invalid_argument on an unknown coding, schedule or variant name.
inline gradcomp::mpi::coded_allreduce_options coded_options(const transport_settings& s) {
  auto o = with_timeout<gradcomp::mpi::coded_allreduce_options>(s);
  o.redundancy = s.redundancy;
  o.coding = value_of(codings, s.coding, "coding");
  o.schedule = value_of(coded_schedules, s.coded_schedule, "coded schedule");
  o.variant = value_of(coded_variants, s.coded_variant, "coded variant");
  o.uncoded = s.uncoded;
  return o;
}

//! The transport called `s.name` over `comm` (gtopk and oktopk keep `density` of each group
//! globally).
//! @throws std::invalid_argument on an unknown name.
inline any_transport make_transport(const gradcomp::mpi::communicator& comm,
                                    const transport_settings& s,
                                    double density) {
  namespace gm = gradcomp::mpi;
  if (s.name == "allreduce") {
    return any_transport::make<gm::native_dense_exchange>(
        comm, with_timeout<gm::native_allreduce_options>(s));
  }
  if (s.name == "ring") {
    return any_transport::make<gm::dense_exchange>(comm, ring_options(s));
  }
  if (s.name == "allgather") {
    // the dense switch's ring as transport ring runs it (--wait, --segment-kib, no per-group
    // length check: the groups are agreed), with its tags below the allgather's
    auto o = with_timeout<gm::sparse_allgather_options>(s);
    o.dense = ring_options(s);
    return any_transport::make<gm::sparse_exchange>(comm, o);
  }
  if (s.name == "ps") {
    auto o = with_timeout<gm::parameter_server_options>(s);
    o.servers = s.servers > 0 ? s.servers : comm.size();
    o.pull = s.ps_dense_pull ? gm::pull_format::dense : gm::pull_format::adaptive;
    return any_transport::make<gm::parameter_server_exchange>(comm, o);
  }
  if (s.name == "hierarchical") {
    auto o = with_timeout<gm::hierarchical_allreduce_options>(s);
    o.group_size = s.group_size;
    return any_transport::make<gm::hierarchical_exchange>(comm, o);
  }
  if (s.name == "none") {
    return any_transport::make<gradcomp::loopback_exchange>();
  }
  if (s.name == "gtopk") {
    return any_transport::make<gm::gtopk_exchange>(comm, density,
                                                   with_timeout<gm::gtopk_allreduce_options>(s));
  }
  if (s.name == "oktopk") {
    return any_transport::make<gm::oktopk_exchange>(comm, density,
                                                    with_timeout<gm::oktopk_allreduce_options>(s));
  }
  if (s.name == "coded") {
    throw std::invalid_argument("transport 'coded' takes several parts per rank: make_exchange "
                                "builds it (coded_options), not make_transport");
  }
  throw std::invalid_argument("unknown transport '" + s.name + "'");
}

//! @brief The pipeline's grouping policy in gradcomp-train: it starts from the merge plan every
//! rank agreed on (plan_merge) and, with --replan-after W > 0, plans once more after W
//! iterations from the backward times the pipeline measured meanwhile (with the exchange
//! running beside backward, unlike the profile), on rank 0 and agreed by every rank
//! (mpi::agreed_grouping: a collective at the end of the W-th finish()). With keep_plan
//! (--replan-mode keep) the pipeline still measures the W iterations but keeps `initial` (no
//! collective: every rank keeps what it has); the report then predicts the iteration of the
//! initial plan from the measured times. A pipeline_policy::replanning_policy.
struct training_grouping {
  using grouping_concept = gradcomp::grouping_policy_tag; //!< opts in (grouping_policy).
  gradcomp::schedule::grouping initial;                   //!< plan_merge's agreed groups.
  //! The merge planner (its replan_after is W) and the communicator the re-plan agrees on.
  gradcomp::mpi::agreed_grouping<gradcomp::pipeline_policy::planned_grouping> planner;
  bool keep_plan = false; //!< --replan-mode keep: measure, predict, keep `initial`.

  //! `initial` (already agreed: not collective). O(groups).
  [[nodiscard]] gradcomp::schedule::grouping groups(std::span<const std::size_t>) const {
    return initial;
  }
  //! Rank 0's plan from its measured backward times, on every rank (collective); with
  //! keep_plan, `initial` (not collective).
  [[nodiscard]] gradcomp::schedule::grouping replan(std::span<const std::size_t> numel,
                                                    std::span<const double> measured) const {
    return keep_plan ? initial : planner.replan(numel, measured);
  }
  //! W (--replan-after; 0: never). O(1).
  [[nodiscard]] std::size_t warmup_iterations() const noexcept {
    return planner.policy.replan_after;
  }
};

//! With --replan-after: whether the pipeline re-planned, its grouping now and the backward
//! times (seconds per layer, forward order) it measured over the warm-up on this rank.
struct replan_state {
  bool replanned = false;
  gradcomp::schedule::grouping groups;
  std::vector<double> measured_backward_seconds;
};

//! What the training loop needs of a pipeline, whatever its compressor and transport.
class gradient_exchange {
public:
  virtual ~gradient_exchange() = default;
  //! Messages per rank (transport coded: the rank's parts; else 1).
  [[nodiscard]] virtual std::size_t parts() const = 0;
  virtual void begin_backward() = 0;
  virtual void gradient_ready(std::size_t part, std::size_t layer, std::span<const float> grad) = 0;
  virtual void finish() = 0;
  [[nodiscard]] virtual std::span<const float> averaged(std::size_t layer) const = 0;
  [[nodiscard]] virtual const gradcomp::pipeline_iteration_stats& last_stats() const = 0;
  //! The pipeline's rescale_state / drop_non_finite_state / return_sent (loss scaling and
  //! skipped steps, large_batch.hpp).
  virtual void rescale_state(float factor) = 0;
  virtual std::size_t return_sent() = 0;
  virtual std::size_t drop_non_finite_state() = 0;
  //! The pipeline's set_density / set_layer_densities (between iterations; fidelity.hpp).
  //! @throws std::logic_error if the method has no density (dense, fp16).
  virtual void set_density(double density) = 0;
  virtual void set_layer_densities(std::span<const double> densities) = 0;
  //! The pipeline's set_factor_masking (between iterations; fidelity.hpp).
  virtual void set_factor_masking(bool on) = 0;
  //! The pipeline's checkpoint state (gradcomp::pipeline::save_state / load_state; between
  //! iterations). load_state throws gradcomp::state_error naming what differs.
  virtual void save_state(gradcomp::state_writer& w) const = 0;
  virtual void load_state(gradcomp::state_reader& r) = 0;
  //! The pipeline's residual of `layer` (one part per rank; between iterations).
  [[nodiscard]] virtual std::span<const float> residual(std::size_t layer) const = 0;
  //! The re-planning's outcome (--replan-after); nothing for an exchange without a merge plan.
  [[nodiscard]] virtual replan_state replan() const { return {}; }
};

//! The pipeline of compressor C over transport T (any_transport, or a coded exchange built in
//! place from `transport_args`).
template <gradcomp::compressor C, class T = any_transport>
class pipeline_exchange final : public gradient_exchange {
public:
  template <class... TransportArgs>
  pipeline_exchange(std::vector<std::size_t> numel,
                    training_grouping grouping,
                    C prototype,
                    gradcomp::momentum_correction mc,
                    gradcomp::compression_scope scope,
                    TransportArgs&&... transport_args)
      : transport_(std::forward<TransportArgs>(transport_args)...),
        pipe_(std::move(numel), std::move(grouping), std::move(prototype), transport_, mc, scope) {}
  [[nodiscard]] std::size_t parts() const override { return pipe_.parts(); }
  void begin_backward() override { pipe_.begin_backward(); }
  void gradient_ready(std::size_t part, std::size_t layer, std::span<const float> grad) override {
    pipe_.gradient_ready(part, layer, grad);
  }
  void finish() override { pipe_.finish(); }
  [[nodiscard]] std::span<const float> averaged(std::size_t layer) const override {
    return pipe_.averaged(layer);
  }
  [[nodiscard]] const gradcomp::pipeline_iteration_stats& last_stats() const override {
    return pipe_.last_stats();
  }
  void rescale_state(float factor) override { pipe_.rescale_state(factor); }
  std::size_t drop_non_finite_state() override { return pipe_.drop_non_finite_state(); }
  std::size_t return_sent() override { return pipe_.return_sent(); }
  void set_density(double density) override {
    if constexpr (gradcomp::density_compressor<C>) {
      pipe_.set_density(density);
    } else {
      throw std::logic_error("set_density: the method sends every value (no density)");
    }
  }
  void set_factor_masking(bool on) override { pipe_.set_factor_masking(on); }
  void set_layer_densities(std::span<const double> densities) override {
    if constexpr (gradcomp::density_compressor<C>) {
      pipe_.set_layer_densities(densities);
    } else {
      throw std::logic_error("set_layer_densities: the method sends every value (no density)");
    }
  }

  void save_state(gradcomp::state_writer& w) const override { pipe_.save_state(w); }
  void load_state(gradcomp::state_reader& r) override { pipe_.load_state(r); }
  [[nodiscard]] std::span<const float> residual(std::size_t layer) const override {
    return pipe_.residual(layer);
  }
  [[nodiscard]] replan_state replan() const override {
    const auto measured = pipe_.measured_backward_seconds();
    return {pipe_.replanned(), pipe_.groups(), {measured.begin(), measured.end()}};
  }

private:
  T transport_; // before pipe_: the pipeline holds a reference to it
  gradcomp::pipeline<C, T, training_grouping> pipe_;
};

//! --method auto (auto_method.hpp): Accordion's detector and the rule's parameters.
struct auto_settings {
  //! --auto-critical-density: the sparse candidate's density while a group's gradient is in a
  //! critical regime, in [--density, 1] (1: dense or nothing there).
  double critical_density = 0.1;
  //! --auto-interval-epochs: the interval whose accumulated gradient norm the detector compares
  //! (Accordion: an epoch), in epochs.
  double interval_epochs = 0.125;
  double eta = 0.5;        //!< --auto-eta: the detector's threshold on the relative norm change.
  double min_saving = 0.1; //!< --auto-min-saving: what a lossier candidate must save, [0, 1).
  //! --auto-drop-intervals: the intervals after a learning-rate drop that are critical, [1, 1000].
  int drop_intervals = 1;
  //! --auto-dense-share: the smallest layers that together hold at most this share of the
  //! parameters are sent dense in every phase, in [0, 1)
  //! (gradcomp::schedule::dense_below_elements).
  double dense_share = 0.05;
};

//! The compressor --method auto sends its sparse groups with.
inline const std::string auto_compressor_name = "reused_threshold";

//! Compressor settings from the command line.
struct method_settings {
  std::string name = "dense";
  //! --density, --interval, --seed, --levels, --quantization-bucket, --threads, --precision and
  //! --nonfinite as the library's settings of a compressor chosen by name: the host compressors
  //! are built from them (gradcomp::any_compressor), and check_options() validates them with the
  //! library's gradcomp::check_named_compressor_settings (their one check).
  gradcomp::named_compressor_settings compressor;
  std::size_t rank = 2;        //!< powersgd: the approximation rank (--rank).
  std::size_t dense_below = 0; //!< sparse methods send layers below this many elements dense.
  std::string scope = "layer"; //!< error feedback and selection per "layer" or per "group".
  auto_settings automatic;     //!< --method auto's settings.

  //! The library compressor the method builds: auto's is the reused threshold.
  [[nodiscard]] const std::string& compressor_name() const {
    return name == "auto" ? auto_compressor_name : name;
  }
};

//! The names accepted by --compression-scope.
inline const std::vector<std::string> scope_names = {"layer", "group"};

//! --quantization-bucket as given: values per scale, or -1 when left to the quantizer (the
//! report's and the checkpoint's form).
inline std::int64_t quantization_bucket_option(const method_settings& s) {
  const auto& bucket = s.compressor.bucket_elements;
  return bucket ? std::int64_t{*bucket} : std::int64_t{-1};
}

//! The compressor of every method that is not dense (the sparse ones and the quantizers): the
//! host compressor chosen by name (gradcomp::any_compressor, one pipeline type for all of them),
//! behind a size_switch that sends layers of fewer than --dense-below elements dense.
using selecting_compressor = gradcomp::size_switch<gradcomp::dense, gradcomp::any_compressor>;

//! Calls fn(prototype) with the compressor of method `s.name`: gradcomp::dense for dense, fp16
//! and powersgd (kept concrete: the pipeline averages a lossless dense compressor in place),
//! else a selecting_compressor. fn is instantiated for these two types only.
//! @throws std::invalid_argument on an unknown name or bad settings (naming them).
template <class Fn>
decltype(auto) with_method(const method_settings& s, Fn&& fn) {
  const gradcomp::named_compressor_settings& c = s.compressor;
  // every value goes out in c.values (--precision); method fp16 is dense in fp16 whatever it says
  const gradcomp::dense plain({.values = c.values, .threads = c.threads, .nonfinite = c.nonfinite});
  if (s.name == "dense" || s.name == "powersgd") { // powersgd compresses in its own exchange
    return fn(plain);                              // (powersgd.hpp): profiled as dense
  }
  if (s.name == "fp16") {
    return fn(gradcomp::dense(
        {.values = gradcomp::value_type::fp16, .threads = c.threads, .nonfinite = c.nonfinite}));
  }
  return fn(
      selecting_compressor(s.dense_below, plain, gradcomp::any_compressor(s.compressor_name(), c)));
}

//! Whether the method quantizes every value (signsgd, terngrad, qsgd).
inline bool is_quantizer_method(const std::string& name) {
  return gradcomp::is_quantizer_name(name);
}

//! Whether the method sends a density of the gradient (a top-k or threshold compressor, or
//! auto, whose groups are sparse at a density or dense at density 1).
inline bool is_sparse_method(const std::string& name) {
  return name == "auto" || gradcomp::is_sparse_compressor_name(name);
}

//! Bits per value of a quantizing method's messages on the wire (1 + bit_width(levels); signsgd
//! 1), for the planner's message size. @pre is_quantizer_method(s.name).
inline unsigned quantizer_bits(const method_settings& s) {
  if (s.name == "signsgd") {
    return 1;
  }
  return gradcomp::quantized_code_bits(s.name == "qsgd" ? s.compressor.levels : 1, true);
}

//! Values per scale of a quantizing method's compressor as built (--quantization-bucket or the
//! quantizer's default; 0: one scale per message), for the planner's message size.
//! @pre is_quantizer_method(s.name).
inline std::uint32_t quantizer_bucket_elements(const method_settings& s) {
  return gradcomp::with_quantizer(s.name, s.compressor,
                                  [](const auto& q) { return q.bucket_elements(); });
}

//! The pipeline for the method and transport, grouped by `groups` (plan_merge's plan, re-planned
//! with --replan-after), with momentum correction `mc` in every layer's
//! (or group's, method.scope "group") error feedback (momentum 0: off). Transport coded: a
//! multi-part pipeline (one error feedback per part and layer) over mpi::coded_sparse_exchange
//! for the sparse methods (top-k parts on the agreed index union) or mpi::coded_dense_exchange
//! for dense and fp16.
inline std::unique_ptr<gradient_exchange> make_exchange(const gradcomp::mpi::communicator& comm,
                                                        const method_settings& method,
                                                        const transport_settings& transport,
                                                        std::vector<std::size_t> numel,
                                                        const training_grouping& groups,
                                                        gradcomp::momentum_correction mc) {
  namespace gm = gradcomp::mpi;
  return with_method(method, [&](auto prototype) -> std::unique_ptr<gradient_exchange> {
    using C = decltype(prototype);
    const auto scope = method.scope == "group" ? gradcomp::compression_scope::per_group
                                               : gradcomp::compression_scope::per_layer;
    if (transport.name == "coded") {
      if (is_sparse_method(method.name)) {
        return std::make_unique<pipeline_exchange<C, gm::coded_sparse_exchange>>(
            std::move(numel), groups, std::move(prototype), mc, scope, comm,
            coded_options(transport));
      }
      return std::make_unique<pipeline_exchange<C, gm::coded_dense_exchange>>(
          std::move(numel), groups, std::move(prototype), mc, scope, comm,
          coded_options(transport));
    }
    return std::make_unique<pipeline_exchange<C>>(
        std::move(numel), groups, std::move(prototype), mc, scope,
        make_transport(comm, transport, method.compressor.density));
  });
}

} // namespace gradcomp_train
