// Reference routing (CONTRACT §3). Plain loops in increasing slot order: determinism and
// readability matter here, speed does not.
#include "reference/routing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "moeq/error.hpp"
#include "reference/formats.hpp"

namespace moeq::ref {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

std::string outside(int64_t lo, int64_t hi) {
  return " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

void require_at_least(const char* name, int64_t value, int64_t minimum) {
  if (value < minimum)
    fail(std::string(name) + " = " + std::to_string(value) + " must be at least " +
         std::to_string(minimum));
}

// Slot indices and the pad value num_slots are stored as int32.
void require_int32_slots(int64_t num_slots) {
  if (num_slots > kInt32Max)
    fail("num_slots = " + std::to_string(num_slots) + " does not fit the int32 slot indices");
}

void check_local_ids(const int32_t* local_ids, int64_t num_slots, int64_t num_experts) {
  for (int64_t f = 0; f < num_slots; ++f)
    if (local_ids[f] < -1 || local_ids[f] >= num_experts)
      fail("local_ids[" + std::to_string(f) + "] = " + std::to_string(local_ids[f]) +
           outside(-1, num_experts));
}

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

int64_t read_id(const void* ids, DType dtype, int64_t i) {
  if (dtype == DType::i32) return static_cast<const int32_t*>(ids)[i];
  return static_cast<const int64_t*>(ids)[i];
}

bool is_float_dtype(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16; }

void require_float_dtype(const char* name, DType dtype) {
  if (!is_float_dtype(dtype))
    fail(std::string(name) + " dtype = " + std::string(to_string(dtype)) + " is not f32, bf16 or f16");
}

float load_float(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

void store_float(void* base, DType dtype, int64_t i, float value) {
  switch (dtype) {
    case DType::bf16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(value); break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = f32_to_f16(value); break;
    default: static_cast<float*>(base)[i] = value; break;
  }
}

// Rows per local expert; throws when one exceeds the batched capacity T.
std::vector<int64_t> batched_counts(const int32_t* local_ids, int64_t num_slots, int64_t num_experts,
                                    int64_t max_tokens_per_expert) {
  require_at_least("num_experts", num_experts, 1);
  require_at_least("max_tokens_per_expert", max_tokens_per_expert, 0);
  require_int32_slots(num_slots);
  check_local_ids(local_ids, num_slots, num_experts);
  if (num_experts * max_tokens_per_expert > kInt32Max)
    fail("num_experts * max_tokens_per_expert = " + std::to_string(num_experts * max_tokens_per_expert) +
         " does not fit the int32 row indices");
  std::vector<int64_t> counts(num_experts, 0);
  for (int64_t f = 0; f < num_slots; ++f)
    if (local_ids[f] >= 0) ++counts[local_ids[f]];
  for (int64_t e = 0; e < num_experts; ++e)
    if (counts[e] > max_tokens_per_expert)
      fail("expert " + std::to_string(e) + " receives " + std::to_string(counts[e]) +
           " rows but max_tokens_per_expert is " + std::to_string(max_tokens_per_expert));
  return counts;
}

}  // namespace

std::vector<int32_t> to_local_expert_ids(const void* topk_ids, DType ids_dtype, int64_t num_tokens,
                                         int64_t top_k, int64_t num_global_experts,
                                         const int32_t* expert_map, int64_t num_experts) {
  if (ids_dtype != DType::i32 && ids_dtype != DType::i64)
    fail("topk_ids dtype = " + std::string(to_string(ids_dtype)) + " is not i32 or i64");
  require_at_least("num_tokens", num_tokens, 0);
  require_at_least("top_k", top_k, 1);
  require_at_least("num_experts", num_experts, 1);
  require_at_least("num_global_experts", num_global_experts, 1);
  // Without a map the global id is the local id, so both ranges must agree.
  if (expert_map == nullptr && num_global_experts != num_experts)
    fail("num_global_experts = " + std::to_string(num_global_experts) + " differs from num_experts = " +
         std::to_string(num_experts) + " but no expert_map is given");
  if (expert_map != nullptr)
    for (int64_t g = 0; g < num_global_experts; ++g)
      if (expert_map[g] < -1 || expert_map[g] >= num_experts)
        fail("expert_map[" + std::to_string(g) + "] = " + std::to_string(expert_map[g]) +
             outside(-1, num_experts));

  std::vector<int32_t> local(static_cast<size_t>(num_tokens * top_k));
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t f = t * top_k + k;
      const int64_t id = read_id(topk_ids, ids_dtype, f);
      if (id < -1 || id >= num_global_experts)
        fail("topk_ids[" + std::to_string(t) + "," + std::to_string(k) + "] = " + std::to_string(id) +
             outside(-1, num_global_experts));
      if (id == -1) local[f] = -1;
      else local[f] = expert_map != nullptr ? expert_map[id] : static_cast<int32_t>(id);
    }
  }
  return local;
}

int64_t align_capacity(int64_t num_slots, int64_t num_experts, int64_t block_m) {
  require_at_least("num_slots", num_slots, 0);
  require_at_least("num_experts", num_experts, 1);
  require_at_least("block_m", block_m, 1);
  // PERF: the GEMM launches capacity / BM blocks per N block and the ones past the device-side
  // count exit at once, but not for free: at M = 1 (8 slots, E = 128, BM = 8) E * (BM - 1)
  // gave 113 M blocks for 8 real ones (bench/results/2026-11-30-h200-gemm-v5.md).
  return round_up(num_slots + std::min(num_experts, num_slots) * (block_m - 1), block_m);
}

int64_t segment_capacity(int64_t rows, int64_t num_experts, int64_t block_m) {
  require_at_least("rows", rows, 0);
  require_at_least("num_experts", num_experts, 1);
  require_at_least("block_m", block_m, 1);
  return (rows + block_m - 1) / block_m + std::min(num_experts, rows);
}

void align(const int32_t* local_ids, int64_t num_slots, int64_t num_experts, int64_t block_m,
           int32_t* sorted_ids, int32_t* expert_ids, int32_t* num_tokens_padded) {
  const int64_t capacity = align_capacity(num_slots, num_experts, block_m);
  if (capacity > kInt32Max)
    fail("align capacity " + std::to_string(capacity) + " does not fit the int32 sorted_ids");
  check_local_ids(local_ids, num_slots, num_experts);

  std::vector<int64_t> counts(num_experts, 0);
  for (int64_t f = 0; f < num_slots; ++f)
    if (local_ids[f] >= 0) ++counts[local_ids[f]];

  // cursor[e]: next free entry of expert e's padded segment.
  std::vector<int64_t> cursor(num_experts);
  int64_t padded_total = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    cursor[e] = padded_total;
    padded_total += round_up(counts[e], block_m);
  }

  for (int64_t i = 0; i < capacity; ++i) sorted_ids[i] = static_cast<int32_t>(num_slots);
  for (int64_t b = 0; b < capacity / block_m; ++b) expert_ids[b] = -1;
  for (int64_t e = 0; e < num_experts; ++e)
    for (int64_t b = cursor[e] / block_m; b < (cursor[e] + round_up(counts[e], block_m)) / block_m; ++b)
      expert_ids[b] = static_cast<int32_t>(e);
  for (int64_t f = 0; f < num_slots; ++f)
    if (local_ids[f] >= 0) sorted_ids[cursor[local_ids[f]]++] = static_cast<int32_t>(f);
  *num_tokens_padded = static_cast<int32_t>(padded_total);
}

void permute_indices(const int32_t* local_ids, int64_t num_slots, int64_t num_experts,
                     int64_t* offsets, int32_t* inv_permuted_idx, int32_t* permuted_src) {
  require_at_least("num_slots", num_slots, 0);
  require_at_least("num_experts", num_experts, 1);
  require_int32_slots(num_slots);
  check_local_ids(local_ids, num_slots, num_experts);

  std::vector<int64_t> counts(num_experts, 0);
  for (int64_t f = 0; f < num_slots; ++f)
    if (local_ids[f] >= 0) ++counts[local_ids[f]];
  offsets[0] = 0;
  for (int64_t e = 0; e < num_experts; ++e) offsets[e + 1] = offsets[e] + counts[e];

  std::vector<int64_t> cursor(offsets, offsets + num_experts);
  int64_t next_non_local = offsets[num_experts];
  for (int64_t f = 0; f < num_slots; ++f) {
    const int32_t e = local_ids[f];
    const int64_t row = e >= 0 ? cursor[e]++ : next_non_local++;
    inv_permuted_idx[f] = static_cast<int32_t>(row);
    permuted_src[row] = static_cast<int32_t>(e >= 0 ? f : num_slots);
  }
}

void permute_rows(const void* hidden, int64_t hidden_row_stride_bytes, int64_t row_bytes,
                  const int32_t* permuted_src, int64_t num_valid_rows, int64_t top_k,
                  void* permuted, int64_t permuted_row_stride_bytes) {
  require_at_least("top_k", top_k, 1);
  require_at_least("row_bytes", row_bytes, 0);
  require_at_least("num_valid_rows", num_valid_rows, 0);
  require_at_least("hidden_row_stride_bytes", hidden_row_stride_bytes, row_bytes);
  require_at_least("permuted_row_stride_bytes", permuted_row_stride_bytes, row_bytes);
  const auto* src_base = static_cast<const unsigned char*>(hidden);
  auto* dst_base = static_cast<unsigned char*>(permuted);
  for (int64_t r = 0; r < num_valid_rows; ++r) {
    if (permuted_src[r] < 0)
      fail("permuted_src[" + std::to_string(r) + "] = " + std::to_string(permuted_src[r]) +
           " is negative inside the valid rows");
    const int64_t token = permuted_src[r] / top_k;
    std::memcpy(dst_base + r * permuted_row_stride_bytes, src_base + token * hidden_row_stride_bytes,
                static_cast<size_t>(row_bytes));
  }
}

void batched_dispatch(const int32_t* local_ids, int64_t num_slots, int64_t num_experts,
                      int64_t max_tokens_per_expert, int32_t* counts, int32_t* slot_of_row) {
  // Counted and checked before anything is written, so a rejected call leaves outputs alone.
  const std::vector<int64_t> expert_counts =
      batched_counts(local_ids, num_slots, num_experts, max_tokens_per_expert);
  for (int64_t i = 0; i < num_experts * max_tokens_per_expert; ++i) slot_of_row[i] = -1;
  std::vector<int64_t> filled(num_experts, 0);
  for (int64_t f = 0; f < num_slots; ++f) {
    const int32_t e = local_ids[f];
    if (e >= 0) slot_of_row[e * max_tokens_per_expert + filled[e]++] = static_cast<int32_t>(f);
  }
  for (int64_t e = 0; e < num_experts; ++e) counts[e] = static_cast<int32_t>(expert_counts[e]);
}

void topk_reduce(const void* down, DType down_dtype, int64_t down_row_stride, int64_t cols,
                 const int32_t* src_row, const void* topk_weights, DType weights_dtype,
                 int64_t num_tokens, int64_t top_k, void* out, DType out_dtype,
                 int64_t out_row_stride) {
  require_float_dtype("down", down_dtype);
  require_float_dtype("topk_weights", weights_dtype);
  require_float_dtype("out", out_dtype);
  require_at_least("num_tokens", num_tokens, 0);
  require_at_least("top_k", top_k, 1);
  require_at_least("cols", cols, 0);
  require_at_least("down_row_stride", down_row_stride, cols);
  require_at_least("out_row_stride", out_row_stride, cols);

  std::vector<float> acc(static_cast<size_t>(cols));
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t row = src_row[t * top_k + k];
      if (row < 0) continue;
      const float weight = load_float(topk_weights, weights_dtype, t * top_k + k);
      // Explicit fma: the result must not depend on whether the compiler contracts a*b+c,
      // and it is what a GPU's FFMA accumulation computes.
      for (int64_t c = 0; c < cols; ++c)
        acc[c] = std::fma(weight, load_float(down, down_dtype, row * down_row_stride + c), acc[c]);
    }
    for (int64_t c = 0; c < cols; ++c) store_float(out, out_dtype, t * out_row_stride + c, acc[c]);
  }
}

std::vector<int32_t> reduce_rows_indexed(const int32_t* local_ids, int64_t num_slots) {
  require_at_least("num_slots", num_slots, 0);
  require_int32_slots(num_slots);
  std::vector<int32_t> rows(static_cast<size_t>(num_slots));
  for (int64_t f = 0; f < num_slots; ++f) rows[f] = local_ids[f] >= 0 ? static_cast<int32_t>(f) : -1;
  return rows;
}

std::vector<int32_t> reduce_rows_contiguous(const int32_t* local_ids, const int32_t* inv_permuted_idx,
                                            int64_t num_slots) {
  require_at_least("num_slots", num_slots, 0);
  std::vector<int32_t> rows(static_cast<size_t>(num_slots));
  for (int64_t f = 0; f < num_slots; ++f) rows[f] = local_ids[f] >= 0 ? inv_permuted_idx[f] : -1;
  return rows;
}

std::vector<int32_t> reduce_rows_batched(const int32_t* local_ids, int64_t num_slots,
                                         int64_t num_experts, int64_t max_tokens_per_expert) {
  batched_counts(local_ids, num_slots, num_experts, max_tokens_per_expert);
  std::vector<int32_t> rows(static_cast<size_t>(num_slots));
  std::vector<int64_t> filled(num_experts, 0);
  for (int64_t f = 0; f < num_slots; ++f) {
    const int32_t e = local_ids[f];
    rows[f] = e >= 0 ? static_cast<int32_t>(e * max_tokens_per_expert + filled[e]++) : -1;
  }
  return rows;
}

void combine_batched(const void* down, DType dtype, int64_t max_tokens_per_expert, int64_t cols,
                     const int32_t* local_ids, const void* topk_weights, DType weights_dtype,
                     int64_t num_tokens, int64_t top_k, int64_t num_experts, void* out) {
  require_at_least("num_tokens", num_tokens, 0);
  require_at_least("top_k", top_k, 1);
  const std::vector<int32_t> rows =
      reduce_rows_batched(local_ids, num_tokens * top_k, num_experts, max_tokens_per_expert);
  topk_reduce(down, dtype, cols, cols, rows.data(), topk_weights, weights_dtype, num_tokens, top_k,
              out, dtype, cols);
}

}  // namespace moeq::ref
