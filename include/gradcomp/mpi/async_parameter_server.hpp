// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::async_parameter_server: asynchronous SGD (ASGD) through S dedicated
//! server ranks, each owning a contiguous shard of the parameters and applying every worker's
//! push as it arrives; optionally with bounded staleness (stale synchronous parallel, SSP). The
//! baseline S3 (CSSGD) compares its coded synchronous SGD against.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/async_parameter_server_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/async_agreement.hpp>
#include <gradcomp/mpi/detail/async_server.hpp>
#include <gradcomp/mpi/detail/async_sgd_rule.hpp>
#include <gradcomp/mpi/detail/async_worker.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! @brief A server update rule for async_parameter_server::serve(): called as rule(shard,
//! part) for each push, in arrival order, with the server's n_s parameters and the decoded push
//! part (dense length n_s, indices rebased to the shard); it updates `shard` in place and may
//! keep state (e.g. a velocity). What it throws stops the server (see the class).
template <class Rule>
concept async_update_rule = requires(Rule& rule, std::span<float> shard, const sparse_message& m) {
  rule(shard, m);
};

//! @brief What a worker's pull (or finish) observed. Versions count pushes applied on a server
//! (of every worker; each push has one part per server, so every server counts the same pushes,
//! each at its own pace).
struct async_pull_result {
  //! Smallest version among the servers' answers.
  std::uint64_t version = 0;
  //! Pushes of other workers applied since this worker's previous pull (version now minus
  //! version then minus this worker's own pushes since; the largest over the servers): how
  //! many updates the replica had not seen.
  std::uint64_t staleness = 0;
  //! This worker's clock minus the smallest clock among the unfinished workers when a server
  //! answered (largest over the servers; 0 for finish()). <= staleness_bound when k >= 1.
  std::uint64_t clock_gap = 0;
};

//! @brief What serve() did on one server.
struct async_server_stats {
  //! Pushes applied, per worker w (index w, worker rank w).
  std::vector<std::uint64_t> pushes_applied;
  //! Final version: pushes applied in all.
  std::uint64_t version = 0;
  //! Staleness of a push: the server's version when it was applied minus the version the
  //! pushing worker got at its last pull from this server (0 before any pull), so it counts
  //! every update applied between the read and the write, the worker's own included.
  std::uint64_t max_staleness = 0;
  double mean_staleness = 0.0; //!< over the pushes applied (0 if none).
  //! Pulls answered (finish() answers included).
  std::uint64_t pulls_answered = 0;
  //! Pulls the staleness bound held back at least once.
  std::uint64_t pulls_deferred = 0;
  //! Largest clock gap at any pull answer (see async_pull_result::clock_gap); the SSP
  //! invariant: <= staleness_bound when staleness_bound >= 1.
  std::uint64_t max_clock_gap = 0;
  //! @{
  //! Payload bytes received (encoded push parts) and sent (answered shards, 4 n_s each);
  //! control messages (16 bytes) and answer headers (32 bytes) are not counted.
  std::size_t bytes_received = 0, bytes_sent = 0;
  //! @}
};

//! @brief Asynchronous SGD with a parameter server of S dedicated ranks (ASGD; with
//! staleness_bound >= 1, SSP). Workers push gradients and pull parameters whenever they like,
//! with no barrier between them; each server applies every push to its shard the moment it
//! receives it, in arrival order, and answers pulls with its current shard.
//!
//! Roles and calls (P ranks, S dedicated servers, W = P - S workers; see the options):
//! - every rank constructs the object with the same n and agreed options (collective);
//! - each server rank calls serve() once: it returns when every worker has finished (finish()
//!   or destruction) and every push has been applied;
//! - each worker rank calls push() and pull() in any pattern, then finish() once.
//! A server takes part in nothing else while in serve(), so a worker must not start anything
//! that needs a server (a collective on the communicator, say) before its finish(); finish()
//! returns once every worker has finished (the final answers wait for the last worker), and
//! serve() once those answers are sent.
//!
//! Protocol, per worker push (gradient of dense length n): split by shard (indices rebased),
//! each part encoded in the wire format (gradcomp::encode; empty parts too, so that every
//! server counts every push) and sent to its server (MPI_Isend, tag_base). A pull sends each
//! server a 16-byte request {pull, clock} (tag_base + 1); the server answers once it has
//! applied the worker's clock pushes (and SSP allows) with a 32-byte header {version, status,
//! culprit, clock gap} (tag_base + 2) and its shard as n_s raw floats (tag_base + 3), received
//! straight into the worker's params. Bytes on the wire per push: 32 + 4 n_s (dense) or 32 +
//! index bytes + 4 nnz_s (sparse, fp32) to each server; per pull 4 n_s from each server (plus
//! the 16 + 32 bytes of request and header). Work: O(nnz + S log nnz) per push on the worker,
//! O(n_s) per pull answer on a server (it copies the shard, since it keeps applying pushes
//! while the answer is sent) plus the rule's work per push. Memory: on a worker, the encoded
//! pushes in flight; on a server, one shard copy per worker with an answer in flight (up to
//! W n_s floats) and the received message.
//!
//! Determinism: one server applies pushes in the order they arrive (MPI_ANY_SOURCE), which
//! varies from run to run; with a rule whose arithmetic is exact (integers in float, lr 1,
//! momentum 0) the result does not depend on that order. Nothing is lost: every push is
//! applied exactly once, before serve() returns, and a worker's pull reflects all its own
//! earlier pushes. After finish(), every worker's params equal the servers' final parameters
//! bit for bit.
//!
//! Failures: a push that fails sparse_message::validate(), has the wrong dense length, or has a
//! part over INT_MAX bytes throws std::invalid_argument on that worker before anything is sent
//! (the object stays usable). A server that receives a part that does not decode (e.g. NaN),
//! or a control message out of protocol, or whose rule throws, stops applying pushes but keeps
//! receiving and answering (the other servers go on): every later pull and finish() on every
//! worker throws (gradcomp::wire_error naming that server and the worker rank whose message it
//! rejected; mpi_error if the rule threw or the server's serve() arguments were invalid), and
//! that server's serve() throws the original exception once every worker has finished, so no
//! rank waits forever as long as every worker reaches finish() or destroys its object. A worker
//! destroyed before finish() tells the servers it leaves (they then count it as finished and do not
//! wait for it). An MPI failure throws mpi_error on the rank where it happened only; the others may
//! then wait forever.
//!
//! Errors thrown at construction (on every rank, after the agreement): std::invalid_argument on
//! the ranks whose options are invalid (S < 1, S >= P: no worker; staleness_bound < 0;
//! max_pushes_in_flight < 1; tag_base < 0 or tag_base + 3 > MPI_TAG_UB; indices none; a shard
//! longer than INT_MAX elements), mpi_error on the others naming the first such rank; mpi_error
//! on every rank when ranks pass different n or agreed options.
class async_parameter_server {
public:
  //! The options struct (async_parameter_server_options).
  using options = async_parameter_server_options;

  //! Collective: one MPI_Iallreduce of 72 bytes (MIN of n, servers, staleness_bound,
  //! tag_base, their complements, and the lowest rank with invalid options), waited for
  //! through o.wait. @throws as the class says.
  async_parameter_server(const communicator& comm, std::size_t n, options o = {})
      : comm_(&comm), n_(n), options_(o) {
    const int p = comm.size();
    detail::agree_async_options(comm, n, o);
    workers_ = p - o.servers;
    const int r = comm.rank();
    my_server_ = r >= workers_ ? r - workers_ : -1;
    if (is_worker()) {
      worker_.emplace(comm, o);
      versions_.assign(static_cast<std::size_t>(o.servers), 0);
    }
  }
  async_parameter_server(const async_parameter_server&) = delete;
  async_parameter_server& operator=(const async_parameter_server&) = delete;
  //! A worker that did not finish() tells every server that it leaves and waits (through the
  //! wait policy) until its pushes and that message are sent; then completes what is pending
  //! (detail::abandon). Never throws.
  ~async_parameter_server() {
    if (is_worker() && !finished_) {
      try {
        worker_->abandon();
        exchange(detail::async_request::leave, {});
      } catch (...) { // NOLINT(bugprone-empty-catch): destructors do not throw
      }
    }
  }

  //! @brief Serves this server's shard with `rule` until every worker has finished and every
  //! push is applied. Server ranks only, once per object.
  //! @param[in,out] params the parameters: n floats (the server uses and updates its shard,
  //! [shard_begin(s), shard_begin(s + 1)), and leaves the rest alone) or only the shard's n_s
  //! floats; initially the values every worker starts from.
  //! @param rule see async_update_rule.
  //! @returns the server's statistics.
  //! @throws std::invalid_argument (at once) if this rank is a worker or serve() ran before;
  //! after draining (see the class): std::invalid_argument if params has neither length,
  //! gradcomp::wire_error if a push was rejected, what the rule threw; mpi_error on an MPI
  //! failure.
  template <async_update_rule Rule>
  async_server_stats serve(std::span<float> params, Rule&& rule) {
    return serve_with(params, rule, nullptr);
  }

  //! @brief serve() with the default rule (async_sgd). An invalid rule (lr negative or not
  //! finite, momentum outside [0, 1]) is reported like invalid params: std::invalid_argument
  //! after draining.
  async_server_stats serve(std::span<float> params, const async_sgd& rule = {}) {
    detail::async_sgd_rule applier{rule, workers_};
    std::exception_ptr problem;
    if (!(std::isfinite(rule.lr) && rule.lr >= 0.0f && rule.momentum >= 0.0f &&
          rule.momentum <= 1.0f)) {
      problem = std::make_exception_ptr(std::invalid_argument(gradcomp::detail::concat(
          "gradcomp: async_parameter_server: async_sgd lr ", rule.lr, " or momentum ",
          rule.momentum, " is outside lr >= 0 (finite), momentum in [0, 1]")));
    }
    return serve_with(params, applier, problem);
  }

  //! @brief Posts a gradient to the servers and returns (not collective; worker ranks only).
  //! The push is split and encoded here, so `gradient` may be reused at once; the encoded
  //! parts are owned by this object until their sends complete (waited for by a later push
  //! beyond max_pushes_in_flight, by finish(), or by destruction).
  //! @param[in] gradient dense length n, sparse or dense, any value type.
  //! @throws std::invalid_argument on this rank before sending anything if this rank is a
  //! server, after finish(), if gradient fails validate(), its dense length is not n, or a part
  //! encodes to more than INT_MAX bytes; mpi_error on an MPI failure.
  void push(const sparse_message& gradient) {
    require_worker("push()");
    gradient.validate();
    gradcomp::detail::require(gradient.dense_length_elements == n_,
                              "async_parameter_server: push of dense length ",
                              gradient.dense_length_elements, ", expected n = ", n_);
    worker_->push(*this, gradient, pushes_, bytes_sent_);
    ++pushes_;
    ++pushes_since_pull_;
    worker_->progress_pushes();
  }

  //! @brief Fetches the current parameters from every server into `params` (n floats) and
  //! waits for them through the wait policy (not collective; worker ranks only). Each server
  //! answers once it has applied every earlier push of this worker, and, with a staleness
  //! bound k >= 1, once this worker's clock is at most the slowest unfinished worker's + k.
  //! @returns the versions and staleness observed.
  //! @throws std::invalid_argument (before sending) if this rank is a server, after finish(),
  //! or params is not n floats; wire_error / mpi_error if a server failed (see the class;
  //! params is then unspecified); mpi_error on an MPI failure.
  async_pull_result pull(std::span<float> params) {
    require_worker("pull()");
    require_length(params);
    return exchange(detail::async_request::pull, params);
  }

  //! @brief Ends this worker's part: tells every server it pushes no more and receives the
  //! final parameters into `params` (n floats), which the servers send once every worker has
  //! finished and every push is applied, so every worker's params are then bit-identical to
  //! the servers' final parameters. Waits through the wait policy; afterwards the worker's
  //! sends are complete. Not collective, but it returns only after the last worker's finish().
  //! @throws as pull(); the worker counts as finished even then.
  async_pull_result finish(std::span<float> params) {
    require_worker("finish()");
    require_length(params);
    finished_ = true;
    return exchange(detail::async_request::finish, params);
  }

  //! Dense length n.
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  //! Number of servers S.
  [[nodiscard]] int servers() const noexcept { return options_.servers; }
  //! Number of workers W = P - S.
  [[nodiscard]] int workers() const noexcept { return workers_; }
  //! Rank of server s, 0 <= s < S: W + s.
  [[nodiscard]] int server_rank(int s) const noexcept { return workers_ + s; }
  //! Rank of worker w: w.
  [[nodiscard]] static int worker_rank(int w) noexcept { return w; }
  //! Whether this rank is a server (rank >= W): it calls serve().
  [[nodiscard]] bool is_server() const noexcept { return my_server_ >= 0; }
  //! Whether this rank is a worker (rank < W): it calls push(), pull() and finish().
  [[nodiscard]] bool is_worker() const noexcept { return my_server_ < 0; }
  //! First element of server s's shard (s = S gives n).
  [[nodiscard]] std::size_t shard_begin(int s) const noexcept {
    return detail::block_begin(n_, s, options_.servers);
  }
  //! Worker: pushes made (its clock). 0 on a server.
  [[nodiscard]] std::uint64_t pushes() const noexcept { return pushes_; }
  //! Worker: pulls completed (finish() included). 0 on a server.
  [[nodiscard]] std::uint64_t pulls() const noexcept { return pulls_; }
  //! Worker: each server's version at the last pull (index s).
  [[nodiscard]] std::span<const std::uint64_t> versions() const noexcept { return versions_; }
  //! Worker: payload bytes sent (encoded push parts; headers not counted). 0 on a server (see
  //! async_server_stats).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Worker: payload bytes received (pulled shards, 4 n per pull or finish(); headers not
  //! counted). 0 on a server.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  template <class Rule>
  async_server_stats serve_with(std::span<float> params, Rule& rule, std::exception_ptr problem) {
    gradcomp::detail::require(is_server(), "async_parameter_server: serve() on rank ",
                              comm_->rank(), ", a worker (servers are ranks ", workers_, " .. ",
                              comm_->size() - 1, ")");
    gradcomp::detail::require(!server_, "async_parameter_server: serve() called twice");
    detail::async_server& server = server_.emplace(*comm_, workers_, options_.staleness_bound,
                                                   options_.tag_base, options_.wait);
    const std::size_t lo = shard_begin(my_server_);
    const std::size_t length = shard_begin(my_server_ + 1) - lo;
    std::span<float> shard = params.size() == n_ ? params.subspan(lo, length) : params;
    std::vector<float> stand_in; // answers of the right length while the server only drains
    if (shard.size() != length) {
      problem = std::make_exception_ptr(std::invalid_argument(
          gradcomp::detail::concat("gradcomp: async_parameter_server: serve() got ", params.size(),
                                   " parameters, neither n = ", n_, " nor the shard's ", length)));
      stand_in.resize(length);
      shard = stand_in;
    }
    if (problem) {
      server.fail_arguments(problem);
    }
    server.run(shard, rule);
    return stats();
  }

  void require_worker(const char* call) const {
    gradcomp::detail::require(is_worker(), "async_parameter_server: ", call, " on rank ",
                              comm_->rank(), ", a server (workers are ranks 0 .. ", workers_ - 1,
                              ")");
    gradcomp::detail::require(!finished_, "async_parameter_server: ", call, " after finish()");
  }
  void require_length(std::span<const float> params) const {
    gradcomp::detail::require(params.size() == n_, "async_parameter_server: params of ",
                              params.size(), " elements, expected n = ", n_);
  }

  // One request to every server, and (unless leaving) every server's answer into params.
  async_pull_result exchange(detail::async_request kind, std::span<float> params) {
    worker_->exchange(*this, kind, pushes_, params);
    return kind == detail::async_request::leave ? async_pull_result{} : answered(params);
  }

  // Reads the servers' answer headers of the exchange that just completed.
  async_pull_result answered(std::span<const float> params) {
    async_pull_result result{.version = UINT64_MAX};
    for (int s = 0; s < options_.servers; ++s) {
      const std::int64_t* h = worker_->header(s);
      const auto status = static_cast<detail::async_status>(h[1]);
      if (status == detail::async_status::rejected_push) {
        throw wire_error(gradcomp::detail::concat(
            "gradcomp wire: async_parameter_server: server rank ", server_rank(s),
            " rejected a message of worker rank ", h[2],
            h[2] == comm_->rank() ? " (this rank)" : "",
            " and stopped applying pushes (the server's exception says why)"));
      }
      if (status != detail::async_status::ok) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: async_parameter_server: server rank ", server_rank(s),
            status == detail::async_status::rule_failed
                ? gradcomp::detail::concat("'s update rule threw at a push of worker rank ", h[2])
                : std::string(" got invalid serve() arguments"),
            " and stopped applying pushes (the server's exception says why)"));
      }
      const auto version = static_cast<std::uint64_t>(h[0]);
      std::uint64_t& previous = versions_[static_cast<std::size_t>(s)];
      const std::uint64_t others =
          version >= previous + pushes_since_pull_ ? version - previous - pushes_since_pull_ : 0;
      previous = version;
      result.version = std::min(result.version, version);
      result.staleness = std::max(result.staleness, others);
      result.clock_gap = std::max(result.clock_gap, static_cast<std::uint64_t>(h[3]));
    }
    ++pulls_;
    pushes_since_pull_ = 0;
    bytes_received_ += params.size() * sizeof(float);
    return result;
  }

  async_server_stats stats() const {
    const detail::async_server& server = *server_;
    async_server_stats out;
    for (const detail::async_server::peer& p : server.peers()) {
      out.pushes_applied.push_back(p.applied);
    }
    out.version = server.version();
    out.max_staleness = server.max_staleness();
    out.mean_staleness = server.version() == 0
                             ? 0.0
                             : server.staleness_sum() / static_cast<double>(server.version());
    out.pulls_answered = server.pulls_answered();
    out.pulls_deferred = server.pulls_deferred();
    out.max_clock_gap = server.max_clock_gap();
    out.bytes_received = server.bytes_received();
    out.bytes_sent = server.bytes_sent();
    return out;
  }

  const communicator* comm_;
  std::size_t n_;
  options options_;
  int workers_ = 1;
  int my_server_ = -1;
  bool finished_ = false;
  std::optional<detail::async_worker> worker_; // the pushes and pulls, on a worker
  std::vector<std::uint64_t> versions_;
  std::optional<detail::async_server> server_; // the server loop, once serve() runs
  std::uint64_t pushes_ = 0, pulls_ = 0, pushes_since_pull_ = 0;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

} // namespace gradcomp::mpi
