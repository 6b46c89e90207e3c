// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's merge scheduler: layer profiles and their CSV form,
//! cost models, the iteration-time simulator and every merge strategy. Standard library only.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/dlgs_greedy.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/mgwfbp.hpp>
#include <gradcomp/schedule/optimal.hpp>
#include <gradcomp/schedule/profile_csv.hpp>
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/size_threshold.hpp>
#include <gradcomp/schedule/strategy.hpp>
#include <gradcomp/schedule/two_segment.hpp>
