#pragma once
// The dense float64 oracle: each routed row through its expert alone, with the same
// rounding points as the staged reference (CONTRACT §2) but float64 accumulation. All three
// layouts are tested against it. Experts run on threads, rows blocked against each weight row; the
// bytes are those of a plain loop over tokens and slots (tests/unit/test_row_blocks.cpp).
#include <vector>

#include "moeq/experts.hpp"

namespace moeq::ref {

// Standard input: returns out [M, K] in float64 before the final rounding.
std::vector<double> oracle_experts(const ExpertsDesc& desc, const WeightView& w13,
                                   const WeightView& w2, const ExpertsInputs& inputs);

// Batched input: returns the unweighted down projections [E, T, K] (rows >= count are 0).
std::vector<double> oracle_experts_batched(const ExpertsDesc& desc, const WeightView& w13,
                                           const WeightView& w2, const ExpertsInputs& inputs);

}  // namespace moeq::ref
