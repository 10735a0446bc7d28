#pragma once
// Tuning tables against a layer (include/moeq/tuning.hpp).
#include <string>
#include <vector>

#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"

namespace moeq::plan {

// Why options.tuning cannot serve this layer: ranges not contiguous from 0, a block size the GEMMs
// do not take, a tile that does not parse, whose rows are not the entry's block_m or that is not
// legal for the GEMM's weights (cuda::gemm_tile_reasons); a table with batch_invariant or with
// Options::block_m. Empty for an empty table.
std::vector<std::string> tuning_reasons(const ExpertsDesc& desc, const Options& options);

}  // namespace moeq::plan
