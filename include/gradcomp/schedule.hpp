// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's merge scheduler: layer profiles and their CSV form,
//! cost models, the iteration-time simulator, every merge strategy, and the per-group choice of
//! what to send (choose_exchange) with Accordion's critical-regime detector. Standard library
//! only.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/critical_regime.hpp>
#include <gradcomp/schedule/dlgs_greedy.hpp>
#include <gradcomp/schedule/exchange_choice.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/mgwfbp.hpp>
#include <gradcomp/schedule/optimal.hpp>
#include <gradcomp/schedule/profile_csv.hpp>
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/size_threshold.hpp>
#include <gradcomp/schedule/strategy.hpp>
#include <gradcomp/schedule/two_segment.hpp>
