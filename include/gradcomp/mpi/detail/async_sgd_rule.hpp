// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::async_sgd_rule: the default server update rule of
//! gradcomp::mpi::async_parameter_server (async_sgd's settings) as the callable serve() applies
//! to each push: SGD with momentum on the server's shard, the velocity kept between pushes.
#pragma once

#include <gradcomp/mpi/async_parameter_server_options.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! async_sgd as the rule serve() calls: w -= step (momentum v + g), or w -= step g without
//! momentum (see async_sgd), with step from its lr_scaling over `workers` workers.
struct async_sgd_rule {
  //! The rule of `rule`'s settings for `workers` workers (step lr / W or lr).
  async_sgd_rule(const async_sgd& rule, int workers)
      : step(rule.scaling == lr_scaling::inverse_workers
                 ? rule.lr / static_cast<float>(std::max(workers, 1))
                 : rule.lr),
        momentum(rule.momentum) {}
  //! Applies the decoded push part `g` (dense length n_s) to `shard`.
  void operator()(std::span<float> shard, const sparse_message& g) {
    if (momentum == 0.0f) {
      accumulate(g, shard, -step);
      return;
    }
    velocity.resize(shard.size(), 0.0f);
    for (float& v : velocity) {
      v *= momentum;
    }
    accumulate(g, velocity);
    for (std::size_t i = 0; i < shard.size(); ++i) {
      shard[i] -= step * velocity[i];
    }
  }
  float step, momentum;        //!< the step size and the momentum.
  std::vector<float> velocity; //!< v, n_s floats once a push was applied with momentum.
};

} // namespace gradcomp::mpi::detail
