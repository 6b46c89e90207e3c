// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::compression_scope: whether the pipeline's error feedback and selection apply
//! per layer or per group of layers.
#pragma once

namespace gradcomp {

//! @brief Where the pipeline's error feedback and selection apply.
//! * per_layer (default): every layer has its own residual and compressor state, and selects
//!   k = density x its size; a group's message is its layers' messages side by side. Results
//!   do not depend on the grouping.
//! * per_group: a group's layers are concatenated (forward order) and compressed as one
//!   gradient with one residual and one compressor state: k = density x the group's size, so
//!   the group's largest values win wherever they are (S1's merged-layer sparsification; the
//!   same selection per message as DDP/Horovod-style bucketed compression). Results depend on
//!   the grouping. Costs one copy of each gradient into a staging buffer (4 bytes per element).
enum class compression_scope { per_layer, per_group };

} // namespace gradcomp
