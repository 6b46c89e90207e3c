// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Communication volumes per iteration of the parallelisation schemes in S5 and S2 (no
//! MPI needed). Values are counts of values or bytes as each function says.
#pragma once

#include <gradcomp/error.hpp>

#include <cstddef>
#include <span>

namespace gradcomp::cost {

//! @brief S5, data parallel, every device exchanging its full gradient with every other:
//! V = Par x Byte x N (N - 1) bytes in total per iteration (independent of the batch size).
[[nodiscard]] constexpr double
data_parallel_all_to_all_bytes(double parameters, double bytes_per_value, double devices) noexcept {
  return parameters * bytes_per_value * devices * (devices - 1);
}

//! @brief S5, data parallel with a ring allreduce: 2 (N-1)/N x Par x Byte bytes per device.
[[nodiscard]] constexpr double data_parallel_ring_bytes_per_device(double parameters,
                                                                   double bytes_per_value,
                                                                   double devices) noexcept {
  return devices <= 1 ? 0.0 : 2.0 * (devices - 1) / devices * parameters * bytes_per_value;
}

//! @brief S5, tensor (vertical) model parallel: sum over the communicating layers of
//! out_i x Byte x N (N - 1) bytes (out_i = output features per device of layer i).
[[nodiscard]] inline double tensor_parallel_bytes(std::span<const double> outputs_per_device,
                                                  double bytes_per_value,
                                                  double devices) {
  double total = 0.0;
  for (double out : outputs_per_device) {
    total += out * bytes_per_value * devices * (devices - 1);
  }
  return total;
}

//! @brief S5, pipeline (horizontal) model parallel: V = sum_i out_i x Byte over the N stages.
[[nodiscard]] inline double pipeline_parallel_bytes(std::span<const double> stage_outputs,
                                                    double bytes_per_value) {
  double total = 0.0;
  for (double out : stage_outputs) {
    total += out * bytes_per_value;
  }
  return total;
}

//! @brief S2: values moved per iteration for one fully connected layer of K inputs and N
//! outputs, data parallel (weight and bias gradients: K N + N values).
[[nodiscard]] constexpr double fc_data_parallel_values(double inputs_k, double outputs_n) noexcept {
  return inputs_k * outputs_n + outputs_n;
}

//! @brief S2: values moved per iteration for the same layer model parallel over P ranks with
//! local batch M: 3 M K P + 2 M N P values.
[[nodiscard]] constexpr double fc_model_parallel_values(double batch_m,
                                                        double inputs_k,
                                                        double outputs_n,
                                                        double ranks_p) noexcept {
  return 3.0 * batch_m * inputs_k * ranks_p + 2.0 * batch_m * outputs_n * ranks_p;
}

//! @brief S2's decision rule: model parallel moves less data when
//! M P < (K + 1) N / (3 K + 2 N).
[[nodiscard]] constexpr bool fc_prefer_model_parallel(double batch_m,
                                                      double inputs_k,
                                                      double outputs_n,
                                                      double ranks_p) noexcept {
  return batch_m * ranks_p < (inputs_k + 1.0) * outputs_n / (3.0 * inputs_k + 2.0 * outputs_n);
}

} // namespace gradcomp::cost
