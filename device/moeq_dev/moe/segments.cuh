#pragma once
// The segment block table of the contiguous and masked layouts, built on the device once per
// GEMM (entry moeq_moe_gemm_segments, in the same module as the GEMM of that block size).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/moe/errors.cuh"

namespace moeq_dev {

// Segment blocks of the contiguous and masked layouts: expert e owns rows
// [first_e, first_e + n_e), split into ceil(n_e / BM) blocks {e, first row, rows}, in expert
// order. One CTA; offsets (contiguous, int64 [E+1]) or counts (masked, [E] of i32/i64, expert
// e's rows start at e * rows_per_expert).
constexpr int kMaxSegmentExperts = 4096;

template <class Cfg>
__device__ __forceinline__ void moe_gemm_segments(const long long* offsets, const void* counts, int counts_int64,
                                                  long long rows_per_expert, int num_experts, int* block_table,
                                                  int* num_blocks, int* error_flags) {
  constexpr int BM = Cfg::kBlockM;
  __shared__ int first_block[kMaxSegmentExperts + 1];
  auto rows_of = [&](int e) -> long long {
    if (offsets != nullptr) return offsets[e + 1] - offsets[e];
    // NOTE: counts come from the caller and cannot be checked on the host without a sync: a
    // count outside [0, T] is clamped so no block reaches past the expert's slab (and flagged
    // below).
    const long long n = counts_int64 ? static_cast<const long long*>(counts)[e] : static_cast<const int*>(counts)[e];
    return n < 0 ? 0 : n > rows_per_expert ? rows_per_expert : n;
  };
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    if (offsets == nullptr && error_flags != nullptr) {
      const long long n = counts_int64 ? static_cast<const long long*>(counts)[e] : static_cast<const int*>(counts)[e];
      if (n < 0 || n > rows_per_expert) atomicOr(error_flags, kErrorBatchedOverflow);
    }
    first_block[e + 1] = static_cast<int>((rows_of(e) + BM - 1) / BM);
  }
  __syncthreads();
  // NOTE: a serial prefix over <= 4096 shared-memory entries costs a few microseconds, once per
  // GEMM; the table writes below are parallel.
  if (threadIdx.x == 0) {
    first_block[0] = 0;
    for (int e = 0; e < num_experts; ++e) first_block[e + 1] += first_block[e];
    *num_blocks = first_block[num_experts];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    const long long first = offsets != nullptr ? offsets[e] : static_cast<long long>(e) * rows_per_expert;
    const long long rows = rows_of(e);
    for (int b = first_block[e], r = 0; b < first_block[e + 1]; ++b, r += BM) {
      block_table[3 * b] = e;
      block_table[3 * b + 1] = static_cast<int>(first + r);
      block_table[3 * b + 2] = static_cast<int>(rows - r < BM ? rows - r : BM);
    }
  }
}

}  // namespace moeq_dev
