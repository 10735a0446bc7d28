#pragma once
// Argument checks of Experts::apply: everything is checked before anything is written.
#include "moeq/experts.hpp"

namespace moeq::api {

// Checks pointers, dtypes, alignment, topk_ids / expert_map / expert_num_tokens ranges and
// that the input kind (standard or batched) fits the layout. Throws moeq::Error.
void validate_inputs(const ExpertsDesc& desc, Layout layout, const ExpertsInputs& inputs,
                     const ExpertsOutput& output);

}  // namespace moeq::api
