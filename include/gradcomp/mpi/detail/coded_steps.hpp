// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::coded_steps: the order in which one rank of a coded_allreduce
//! posts its packet transfers (steps), the same on every member of a group, so that neither
//! schedule can deadlock whatever the window. MPI-free.
#pragma once

#include <gradcomp/coded/placement.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief One point-to-point message of a rank of a coded_allreduce: a packet to (`send`) or
//! from `peer` in the rank's group groups_of(rank)[group_slot]; `request` numbers it among the
//! rank's sends, or among its receives.
struct coded_transfer {
  std::size_t group_slot = 0;
  int peer = 0;
  bool send = false;
  std::size_t request = 0;
};

//! @brief A rank's transfers in posting order, cut into steps (a step is posted whole).
struct coded_steps {
  std::vector<coded_transfer> transfers;
  std::vector<std::size_t> step_begin; //!< step i: transfers[step_begin[i] .. step_begin[i+1])
  std::size_t sends = 0;               //!< transfers with send set
  std::size_t receives = 0;            //!< the others

  //! Number of steps.
  [[nodiscard]] std::size_t steps() const noexcept { return step_begin.size() - 1; }

  //! @brief The steps of rank `rank`, in the order every rank agrees on (ascending group, then
  //! shift or turn), so that the smallest unfinished step of the whole job is always posted by
  //! all of its members: neither schedule can deadlock, whatever the window. Concurrent: in
  //! each group, shift s receives from position pos - s and sends to pos + s, a step holding
  //! whole shifts (max_requests / 2 of them), the same ones on every member. Serialized: the
  //! members take turns, a receive from each other member's turn being a step of its own and
  //! this rank's sends to the r others split into steps of at most max_requests.
  //! O(r C(P - 1, r)).
  [[nodiscard]] static coded_steps
  plan(const coded::placement& placement, int rank, const coded_allreduce_options& o) {
    coded_steps plan;
    const int q = o.redundancy + 1;
    const std::span<const std::size_t> groups = placement.groups_of(rank);
    plan.step_begin.assign(1, 0);
    const auto close_step = [&plan] { plan.step_begin.push_back(plan.transfers.size()); };
    for (std::size_t slot = 0; slot < groups.size(); ++slot) {
      const std::span<const int> members = placement.members(groups[slot]);
      const auto pos =
          static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
      const auto member = [&](int i) { return members[static_cast<std::size_t>((i + q) % q)]; };
      if (o.schedule == coded_schedule::concurrent) {
        const int shifts_per_step = static_cast<int>(o.max_requests / 2);
        for (int s0 = 1; s0 <= o.redundancy; s0 += shifts_per_step) {
          const int s1 = std::min(o.redundancy + 1, s0 + shifts_per_step);
          for (int s = s0; s < s1; ++s) {
            plan.add(slot, member(pos - s), false);
          }
          for (int s = s0; s < s1; ++s) {
            plan.add(slot, member(pos + s), true);
          }
          close_step();
        }
        continue;
      }
      for (int turn = 0; turn < q; ++turn) {
        if (turn != pos) {
          plan.add(slot, members[static_cast<std::size_t>(turn)], false);
          close_step();
          continue;
        }
        std::size_t in_step = 0;
        for (int j = 0; j < q; ++j) {
          if (j == pos) {
            continue;
          }
          plan.add(slot, members[static_cast<std::size_t>(j)], true);
          if (++in_step == o.max_requests) {
            close_step();
            in_step = 0;
          }
        }
        if (in_step != 0) {
          close_step();
        }
      }
    }
    return plan;
  }

private:
  void add(std::size_t slot, int peer, bool send) {
    std::size_t& count = send ? sends : receives;
    transfers.push_back({slot, peer, send, count++});
  }
};

} // namespace gradcomp::mpi::detail
