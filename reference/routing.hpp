#pragma once
// Reference routing for the three layouts (CONTRACT §3): local-id mapping, align (indexed),
// permute (contiguous), batched dispatch / combine (masked), and the weighted top-k reduction.
// All functions are deterministic and are the bit-exact oracle for the GPU routing kernels.
#include <cstdint>
#include <vector>

#include "moeq/types.hpp"

namespace moeq::ref {

// Flat slot f = t*top_k + k -> local expert id, or -1 when the slot has no local expert
// (id -1, or expert_map[id] == -1). Throws moeq::Error naming the element when an id is
// outside [-1, E_g) or expert_map maps to a value outside [-1, E). Without expert_map the
// global ids are the local ids, so E_g must equal E.
std::vector<int32_t> to_local_expert_ids(const void* topk_ids, DType ids_dtype, int64_t num_tokens,
                                         int64_t top_k, int64_t num_global_experts,
                                         const int32_t* expert_map, int64_t num_experts);

// ---- Indexed layout ----
// Capacity of sorted_ids for num_slots = M*top_k slots, E local experts and block BM:
// num_slots + min(E, num_slots)*(BM-1) (at most that many experts have slots to pad), rounded up
// to a multiple of BM. expert_ids holds capacity/BM entries.
int64_t align_capacity(int64_t num_slots, int64_t num_experts, int64_t block_m);
// Capacity of the GEMM block table of the segment layouts (contiguous, masked) over `rows` rows:
// at most ceil(rows / BM) + min(E, rows) blocks {expert, first row, rows} (each non-empty
// segment adds at most one partial block).
int64_t segment_capacity(int64_t rows, int64_t num_experts, int64_t block_m);

// Per local expert in increasing order, the slots routed to it in increasing f, each expert's
// list padded to a multiple of BM with the value num_slots; non-local slots dropped. Entries
// of sorted_ids past num_tokens_padded are num_slots; expert_ids past the used blocks are -1.
void align(const int32_t* local_ids, int64_t num_slots, int64_t num_experts, int64_t block_m,
           int32_t* sorted_ids, int32_t* expert_ids, int32_t* num_tokens_padded);

// ---- Grouped contiguous layout ----
// Stable sort of the slots by local expert, non-local slots after all local ones.
//   offsets [E+1]: offsets[e] = local rows with id < e; offsets[E] = all local rows.
//   inv_permuted_idx [num_slots]: destination row of slot f (>= offsets[E] for non-local).
//   permuted_src [num_slots]: source slot of destination row r (num_slots past offsets[E]).
void permute_indices(const int32_t* local_ids, int64_t num_slots, int64_t num_experts,
                     int64_t* offsets, int32_t* inv_permuted_idx, int32_t* permuted_src);

// Copies hidden row (src / top_k) to permuted row r for r < offsets[E]; rows beyond untouched.
void permute_rows(const void* hidden, int64_t hidden_row_stride_bytes, int64_t row_bytes,
                  const int32_t* permuted_src, int64_t num_valid_rows, int64_t top_k,
                  void* permuted, int64_t permuted_row_stride_bytes);

// ---- Grouped masked (batched) layout ----
// Dispatch as expert-parallel all-to-all delivers it: expert e's rows are the slots routed to
// e in increasing f. counts [E]; slot_of_row [E*T] (the slot f of row (e, i), -1 past counts).
// Throws moeq::Error when an expert receives more than T rows.
void batched_dispatch(const int32_t* local_ids, int64_t num_slots, int64_t num_experts,
                      int64_t max_tokens_per_expert, int32_t* counts, int32_t* slot_of_row);

// ---- Weighted top-k reduction ----
// out[t, c] = sum over k with src_row[t*top_k+k] >= 0 of w[t,k] * down[src_row, c], fp32
// accumulation in increasing k as acc = fma(w, down, acc), rounded once to out_dtype. Rows
// with no local slot are +0. Skipped rows (and their weights) are never read (stale NaN there
// never reaches out). Row strides are in elements; dtypes are f32, bf16 or f16.
void topk_reduce(const void* down, DType down_dtype, int64_t down_row_stride, int64_t cols,
                 const int32_t* src_row, const void* topk_weights, DType weights_dtype,
                 int64_t num_tokens, int64_t top_k, void* out, DType out_dtype,
                 int64_t out_row_stride);

// Source rows for topk_reduce in each layout.
std::vector<int32_t> reduce_rows_indexed(const int32_t* local_ids, int64_t num_slots);
std::vector<int32_t> reduce_rows_contiguous(const int32_t* local_ids, const int32_t* inv_permuted_idx,
                                            int64_t num_slots);
// Masked: slot f routed to e at position i among e's slots -> row e*T + i.
std::vector<int32_t> reduce_rows_batched(const int32_t* local_ids, int64_t num_slots,
                                         int64_t num_experts, int64_t max_tokens_per_expert);

// combine_batched: weights and reduces a batched result down [E, T, K] back to out [M, K]
// given the dispatch order of batched_dispatch. down and out are contiguous, both of `dtype`.
void combine_batched(const void* down, DType dtype, int64_t max_tokens_per_expert, int64_t cols,
                     const int32_t* local_ids, const void* topk_weights, DType weights_dtype,
                     int64_t num_tokens, int64_t top_k, int64_t num_experts, void* out);

}  // namespace moeq::ref
