#pragma once
// Argument checks of Experts::apply: everything is checked before anything is written.
#include <cstdint>
#include <string>

#include "moeq/experts.hpp"

namespace moeq::api {

// Checks pointers, dtypes, alignment, topk_ids / expert_map / expert_num_tokens ranges and
// that the input kind (standard or batched) fits the layout. Throws moeq::Error.
void validate_inputs(const ExpertsDesc& desc, Layout layout, const ExpertsInputs& inputs,
                     const ExpertsOutput& output);

// The step's size, before anything is computed from it: num_tokens (standard input) or
// max_tokens_per_expert (batched input) at least 0, and fewer than 2^31 routed rows (M * top_k, or
// E * T), which both backends index in 32 bits. `where` prefixes the message ("apply", ...), `t_name` names T.
void validate_token_counts(const ExpertsDesc& desc, int64_t num_tokens, int64_t max_tokens_per_expert, bool batched,
                           const char* where, const char* t_name = "max_tokens_per_expert");

// `rows` rows of `stride` elements of `elem_bytes` each span fewer than 2^63 bytes (0 = K, the
// caller's default), so no row address wraps.
void validate_row_span(const char* name, int64_t stride, int64_t rows, int64_t elem_bytes);

// p is not null and is a multiple of align_bytes; else throws naming `name` and the address.
void require_pointer(const void* p, const char* name, int64_t align_bytes);

// Either backend: each workspace null (the plan needs none) or 16-byte aligned.
void validate_workspaces(const void* workspace1, const void* workspace2);

// The plan's two workspaces, bytes1 at workspace1 and bytes2 at workspace2, share no byte: the step ping-pongs
// between them (one buffer passed as both gives a wrong result, not an error of its own).
void validate_workspace_ranges(const void* workspace1, int64_t bytes1, const void* workspace2, int64_t bytes2);

// to_string, or "DType(N)" for a value that is none of the enumerators.
std::string dtype_text(DType t);

}  // namespace moeq::api
