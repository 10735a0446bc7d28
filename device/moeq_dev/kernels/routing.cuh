#pragma once
// Routing entry points (CONTRACT §3), composed from moe/routing.cuh. The generated source defines
//   struct RoutingCfg {
//     static constexpr moeq_dev::RoutingKernel kKernel;  // which entry this module holds
//     static constexpr int kThreads;                      // CTA size
//     static constexpr bool kIdsInt64;                    // topk_ids int64 (else int32)
//     static constexpr moeq_dev::FloatType kDType;        // down / out (bf16, f16)
//     static constexpr moeq_dev::FloatType kWeightsDType; // topk_weights (f32, bf16, f16)
//     static constexpr int kFoldFormat;                   // -1, or the QuantFormat folded into
//     static constexpr bool kFoldBf16, kFoldValuesOut;    //   route_count / _fused / _chunk_count
//     static constexpr bool kFoldOrderRows;               // or the MMA-order copy folded there
//   };
// after including moe/routing.cuh and before this header (src/cuda/routing.cpp writes it).
// NOTE: every entry is declared in every module, but only RoutingCfg::kKernel's has a body: the
// JIT cache keys a module by its source and hands out one CUfunction per key, so each kernel is
// its own source; the empty entries cost nothing and are never launched.
//
// Launch sequence (all on one stream, no host sync):
//   indexed:    route_count(layout 0, BM) -> route_scatter(E + 1 CTAs), or route_fused (small M),
//               or route_chunk_count -> route_chunk_place (large M, kernels/routing_chunked.cuh)
//   contiguous: the same with layout 1 (offsets unpadded); then permute_rows
//   batched:    route_count(layout 2, 1)  -> route_scatter(E + 1 CTAs), or the chunked pair
//   then topk_reduce with row_map = none (indexed), inv_permuted_idx, or batched_rows.
#include "moeq_dev/moe/folded_quantizer.cuh"
#include "moeq_dev/moe/routing.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

// One CTA. Maps ids to local ids (written), counts per expert in shared memory, scans the counts
// padded to block_m, then writes the layout's per-expert outputs:
//   indexed:    num_tokens_padded, expert_ids for every one of num_blocks (= capacity / BM) blocks
//   contiguous: offsets [E+1] (int64, unpadded: block_m = 1)
//   batched:    counts [E] = min(count, T), flagging an overflow
// Dynamic shared memory: (2 * num_experts + 1) ints.
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_route_count(const void* topk_ids, const int* expert_map, int num_slots, int num_global_experts,
                 int num_experts, int layout, int block_m, int num_blocks, int max_tokens_per_expert,
                 int* local_ids, int* error_flags, int* expert_ids, int* num_tokens_padded,
                 long long* offsets, int* counts, moeq_dev::FoldedQuantizerArgs fold) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kRouteCount) {
    if (moeq_dev::run_folded_quantizer<RoutingCfg>(fold)) return;
    constexpr int kThreads = RoutingCfg::kThreads;
    extern __shared__ int smem[];
    int* smem_counts = smem;                 // (E)
    int* smem_offsets = smem + num_experts;  // (E + 1), padded to block_m
    for (int e = threadIdx.x; e < num_experts; e += kThreads) smem_counts[e] = 0;
    __syncthreads();
    // NOTE: shared atomics in any order: only the counts are kept, so the result is deterministic.
    for (int f = threadIdx.x; f < num_slots; f += kThreads) {
      const int local = moeq_dev::map_to_local<RoutingCfg::kIdsInt64>(topk_ids, f, expert_map, num_global_experts,
                                                                      num_experts, error_flags);
      local_ids[f] = local;
      if (local >= 0) atomicAdd(&smem_counts[local], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) moeq_dev::warp_padded_exclusive_scan(smem_counts, num_experts, block_m, smem_offsets);
    __syncthreads();

    const int padded_total = smem_offsets[num_experts];
    if (layout == moeq_dev::kLayoutIndexed) {
      if (threadIdx.x == 0) *num_tokens_padded = padded_total;
      // Block b starts at entry b*BM; the expert whose padded segment holds it owns the block.
      for (int b = threadIdx.x; b < num_blocks; b += kThreads) {
        const int entry = b * block_m;
        expert_ids[b] = entry < padded_total ? moeq_dev::last_at_most(smem_offsets, num_experts, entry) : -1;
      }
    } else if (layout == moeq_dev::kLayoutContiguous) {
      for (int e = threadIdx.x; e <= num_experts; e += kThreads) offsets[e] = smem_offsets[e];
    } else {
      for (int e = threadIdx.x; e < num_experts; e += kThreads) {
        const int count = smem_counts[e];
        if (count > max_tokens_per_expert && error_flags != nullptr)
          atomicOr(error_flags, moeq_dev::kErrorBatchedOverflow);
        counts[e] = min(count, max_tokens_per_expert);
      }
    }
  }
}

// E + 1 CTAs, after route_count. CTA e < E places expert e's slots in increasing f:
//   indexed:    sorted_ids[segment(e) + rank] = f, then its padding = num_slots; the last CTA
//               fills sorted_ids[num_tokens_padded, capacity) with num_slots
//   contiguous: row = offsets[e] + rank: inv_permuted_idx[f] = row, permuted_src[row] = f; the
//               last CTA ranks the non-local slots (local id -1) from offsets[E] (src num_slots)
//   batched:    batched_rows[f] = e*T + rank (-1 past T), slot_of_row[e*T + rank] = f (optional,
//               -1 up to T); the last CTA writes batched_rows[f] = -1 for non-local slots
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_route_scatter(const int* local_ids, int num_slots, int num_experts, int layout, int block_m, int capacity,
                   const int* expert_ids, const int* num_tokens_padded, int* sorted_ids,
                   const long long* offsets, int* inv_permuted_idx, int* permuted_src,
                   int max_tokens_per_expert, int* batched_rows, int* slot_of_row) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kRouteScatter) {
    constexpr int kThreads = RoutingCfg::kThreads;
    __shared__ int smem_groups[64];
    const int expert = static_cast<int>(blockIdx.x) < num_experts ? static_cast<int>(blockIdx.x) : -1;

    if (layout == moeq_dev::kLayoutIndexed) {
      const int padded_total = *num_tokens_padded;
      if (expert < 0) {
        for (int i = padded_total + threadIdx.x; i < capacity; i += kThreads) sorted_ids[i] = num_slots;
        return;
      }
      // NOTE: no offsets buffer: the blocks of lower experts, times BM, are where this expert's
      // segment starts (an empty expert has none). PERF: counted by the whole CTA, one coalesced
      // load per 256 blocks, instead of a binary search of dependent loads (~9 L2 round trips,
      // measured 10.0 us for both align kernels at M=256, E=256 before this change).
      int num_lower_blocks = 0;
      for (int b0 = 0; b0 < padded_total / block_m; b0 += kThreads) {
        const int b = b0 + threadIdx.x;
        num_lower_blocks += __syncthreads_count(b < padded_total / block_m && expert_ids[b] < expert);
      }
      const int base = num_lower_blocks * block_m;
      const int count = moeq_dev::rank_expert_slots<kThreads>(
          local_ids, num_slots, expert, smem_groups, [&](int f, int rank) { sorted_ids[base + rank] = f; });
      const int end = base + (count + block_m - 1) / block_m * block_m;
      for (int i = base + count + threadIdx.x; i < end; i += kThreads) sorted_ids[i] = num_slots;
    } else if (layout == moeq_dev::kLayoutContiguous) {
      // Non-local slots (expert -1) follow all local rows in increasing f, from offsets[E].
      const int base = static_cast<int>(offsets[expert < 0 ? num_experts : expert]);
      moeq_dev::rank_expert_slots<kThreads>(local_ids, num_slots, expert, smem_groups, [&](int f, int rank) {
        inv_permuted_idx[f] = base + rank;
        permuted_src[base + rank] = expert < 0 ? num_slots : f;
      });
    } else {
      if (expert < 0) {
        for (int f = threadIdx.x; f < num_slots; f += kThreads)
          if (local_ids[f] < 0) batched_rows[f] = -1;
        return;
      }
      const int slab = expert * max_tokens_per_expert;
      const int count = moeq_dev::rank_expert_slots<kThreads>(
          local_ids, num_slots, expert, smem_groups, [&](int f, int rank) {
            // Past T the expert overflowed (flagged by route_count): the slot is dropped.
            const bool fits = rank < max_tokens_per_expert;
            batched_rows[f] = fits ? slab + rank : -1;
            if (fits && slot_of_row != nullptr) slot_of_row[slab + rank] = f;
          });
      if (slot_of_row != nullptr)
        for (int i = min(count, max_tokens_per_expert) + threadIdx.x; i < max_tokens_per_expert; i += kThreads)
          slot_of_row[slab + i] = -1;
    }
  }
}

// One CTA: route_count then route_scatter in one launch, for the indexed and contiguous layouts
// (src/cuda/routing.cpp picks it for small num_slots), with the same outputs bit for bit.
// Thread b <= E owns bucket b (expert b; bucket E: the non-local slots, contiguous only).
// Maps and counts as route_count, scans the padded counts across the CTA (one bucket a thread),
// then places the slots chunk by chunk in increasing f (place_chunk_slots):
//   indexed:    sorted_ids[offsets(e) + rank] = f; then expert_ids, num_tokens_padded, padding
//   contiguous: row = offsets[e] + rank, inv_permuted_idx[f] = row, permuted_src[row] = f; the
//               non-local slots from offsets[E] (src num_slots)
// Needs E + 1 <= kThreads. Dynamic shared memory: (2 * E + 33 + kWarps * (E + 1)) ints.
// PERF: one launch instead of two. H200, align M = 1 top_k 8: 6.3-6.5 us streamed against
// 8.3-8.6 us for count + scatter (host launch cost dominates), but 5.4-5.7 us against 4.7-5.5 us
// in graph replay, and slower than count + scatter from M = 64 on either way: src/cuda/routing.hpp
// (kFusedMaxSlots) takes it for the smallest M only (docs/perf-notes.md, "Routing: align").
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_route_fused(const void* topk_ids, const int* expert_map, int num_slots, int num_global_experts,
                 int num_experts, int layout, int block_m, int capacity, int* local_ids, int* error_flags,
                 int* sorted_ids, int* expert_ids, int* num_tokens_padded, long long* offsets,
                 int* inv_permuted_idx, int* permuted_src, moeq_dev::FoldedQuantizerArgs fold) {
  // NOTE: wait first: GEMM1 may run self-routed after this kernel, reading the step's inputs without waiting for it.
  moeq_dev::wait_then_allow_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kRouteFused) {
    if (moeq_dev::run_folded_quantizer<RoutingCfg>(fold)) return;
    constexpr int kThreads = RoutingCfg::kThreads;
    constexpr int kWarps = kThreads / 32;
    constexpr int kHeld = 8;  // chunks whose local ids stay in registers
    const int bucket_of_thread = threadIdx.x;
    const bool contiguous = layout == moeq_dev::kLayoutContiguous;
    const int num_buckets = num_experts + 1;
    extern __shared__ int smem[];
    int* smem_counts = smem;                           // (E)
    int* smem_warp_sums = smem_counts + num_experts;   // (32)
    int* smem_offsets = smem_warp_sums + 32;           // (E + 1), padded to block_m (1: contiguous)
    int* smem_table = smem_offsets + num_buckets;      // (kWarps, E + 1)

    // PERF: all held ids are loaded, then all map entries, before the first barrier: two
    // round trips in flight instead of one per chunk.
    long long ids[kHeld];
    int mapped[kHeld];
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int f = j * kThreads + static_cast<int>(threadIdx.x);
      ids[j] = f < num_slots ? moeq_dev::load_topk_id<RoutingCfg::kIdsInt64>(topk_ids, f) : -1;
    }
#pragma unroll
    for (int j = 0; j < kHeld; ++j) mapped[j] = moeq_dev::lookup_local(ids[j], expert_map, num_global_experts);
    for (int i = threadIdx.x; i < num_experts; i += kThreads) smem_counts[i] = 0;
    for (int i = threadIdx.x; i < kWarps * num_buckets; i += kThreads) smem_table[i] = 0;
    __syncthreads();
    // NOTE: shared atomics in any order: only the counts are kept, so the result is deterministic.
    int held[kHeld];
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int f = j * kThreads + static_cast<int>(threadIdx.x);
      held[j] = moeq_dev::checked_local(ids[j], mapped[j], num_global_experts, num_experts, error_flags);
      if (f < num_slots) {
        local_ids[f] = held[j];
        if (held[j] >= 0) atomicAdd(&smem_counts[held[j]], 1);
      }
    }
    for (int f = kHeld * kThreads + threadIdx.x; f < num_slots; f += kThreads) {
      const int local = moeq_dev::map_to_local<RoutingCfg::kIdsInt64>(topk_ids, f, expert_map, num_global_experts,
                                                                      num_experts, error_flags);
      local_ids[f] = local;
      if (local >= 0) atomicAdd(&smem_counts[local], 1);
    }
    __syncthreads();

    // Exclusive scan of the padded counts, one bucket per thread (bucket E counts 0, so its
    // offset is the padded total).
    const int pad_to = contiguous ? 1 : block_m;
    const int count = bucket_of_thread < num_experts ? smem_counts[bucket_of_thread] : 0;
    const int padded = (count + pad_to - 1) / pad_to * pad_to;
    const int offset = moeq_dev::cta_exclusive_sum<kThreads>(padded, smem_warp_sums);
    if (bucket_of_thread < num_buckets) {
      smem_offsets[bucket_of_thread] = offset;
      if (contiguous) offsets[bucket_of_thread] = offset;
    }
    if (!contiguous && bucket_of_thread == num_experts) *num_tokens_padded = offset;

    int next = offset;  // this thread's bucket: next free position
    for (int base = 0; base < num_slots; base += kThreads) {
      const int f = base + static_cast<int>(threadIdx.x);
      int local = base < kHeld * kThreads ? held[0] : -1;
#pragma unroll
      for (int j = 1; j < kHeld; ++j)
        if (base == j * kThreads) local = held[j];
      // NOTE: past the held chunks, each thread re-reads the local ids it wrote itself above.
      if (base >= kHeld * kThreads && f < num_slots) local = local_ids[f];
      const int bucket = f >= num_slots ? -1 : local >= 0 ? local : contiguous ? num_experts : -1;
      const int position = moeq_dev::place_chunk_slots<kThreads>(bucket, num_buckets, smem_table, num_buckets, next);
      if (bucket < 0) continue;
      if (contiguous) {
        inv_permuted_idx[f] = position;
        permuted_src[position] = local >= 0 ? f : num_slots;
      } else {
        sorted_ids[position] = f;
      }
    }
    if (contiguous) return;
    if (num_slots == 0) __syncthreads();  // smem_offsets, else published by the chunks' barriers

    // Indexed: block b starts at entry b*BM; the expert whose padded segment holds it owns it.
    const int padded_total = smem_offsets[num_experts];
    for (int b = threadIdx.x; b < capacity / block_m; b += kThreads) {
      const int entry = b * block_m;
      expert_ids[b] = entry < padded_total ? moeq_dev::last_at_most(smem_offsets, num_experts, entry) : -1;
    }
    // Each expert's padding [offset + count, offset + padded), written by the warp of its owner
    // (coalesced), then everything past the last segment.
    moeq_dev::warp_fill_runs(true, offset + count, offset + padded, num_slots, sorted_ids);
    for (int i = padded_total + threadIdx.x; i < capacity; i += kThreads) sorted_ids[i] = num_slots;
  }
}

// permuted[r] = hidden[permuted_src[r] / top_k] for r < *num_valid_rows (offsets[E] on device;
// the grid covers all num_slots rows so the launch needs no host read). threads_per_row threads
// copy one row: 16-byte vectors up to vec_bytes, then single bytes.
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_permute_rows(const unsigned char* hidden, long long hidden_row_stride_bytes, unsigned char* permuted,
                  long long permuted_row_stride_bytes, int row_bytes, int vec_bytes, const int* permuted_src,
                  const long long* num_valid_rows, int top_k, int threads_per_row) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kPermuteRows) {
    const int rows_per_cta = RoutingCfg::kThreads / threads_per_row;
    const int row_in_cta = threadIdx.x / threads_per_row;
    const int lane = threadIdx.x % threads_per_row;
    const long long row = static_cast<long long>(blockIdx.x) * rows_per_cta + row_in_cta;
    if (row_in_cta >= rows_per_cta || row >= *num_valid_rows) return;
    const long long token = permuted_src[row] / top_k;
    const unsigned char* src = hidden + token * hidden_row_stride_bytes;
    unsigned char* dst = permuted + row * permuted_row_stride_bytes;
    const uint4* src_vecs = reinterpret_cast<const uint4*>(src);
    uint4* dst_vecs = reinterpret_cast<uint4*>(dst);
    for (int i = lane; i < vec_bytes / 16; i += threads_per_row) dst_vecs[i] = __ldg(src_vecs + i);
    for (int i = vec_bytes + lane; i < row_bytes; i += threads_per_row) dst[i] = src[i];
  }
}

// out[t, c] = sum over k (increasing) of w[t,k] * down[src_row(t,k), c], fp32 fma, one rounding.
// tokens_per_cta = kThreads / threads_per_token tokens per CTA; their source rows and weights are
// staged in shared memory first (dynamic: tokens_per_cta * top_k * 8 bytes). Columns below
// vec_cols (a multiple of 8, 0 when the rows are not 16-byte aligned) go 16 bytes at a time.
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_topk_reduce(const void* down, long long down_row_stride, void* out, long long out_row_stride, int cols,
                 int vec_cols, const int* local_ids, const int* row_map, const void* weights, int num_tokens,
                 int top_k, int threads_per_token) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kTopkReduce) {
    constexpr moeq_dev::FloatType kType = RoutingCfg::kDType;
    const int tokens_per_cta = RoutingCfg::kThreads / threads_per_token;
    extern __shared__ int smem[];
    int* smem_rows = smem;                                                       // (tokens, top_k)
    float* smem_weights = reinterpret_cast<float*>(smem + tokens_per_cta * top_k);  // (tokens, top_k)
    const int first_token = static_cast<int>(blockIdx.x) * tokens_per_cta;
    for (int i = threadIdx.x; i < tokens_per_cta * top_k; i += RoutingCfg::kThreads)
      if (first_token + i / top_k < num_tokens)
        moeq_dev::reduce_source<RoutingCfg::kWeightsDType>(local_ids, row_map, weights, first_token * top_k + i,
                                                          smem_rows[i], smem_weights[i]);
    __syncthreads();

    const int token_in_cta = threadIdx.x / threads_per_token;
    const int lane = threadIdx.x % threads_per_token;
    const int token = first_token + token_in_cta;
    if (token_in_cta >= tokens_per_cta || token >= num_tokens) return;
    const int* rows = smem_rows + token_in_cta * top_k;
    const float* row_weights = smem_weights + token_in_cta * top_k;
    const uint4* down_vecs = static_cast<const uint4*>(down);
    uint4* out_vecs = static_cast<uint4*>(out);
    for (int col8 = lane; col8 < vec_cols / 8; col8 += threads_per_token)
      out_vecs[token * (out_row_stride / 8) + col8] =
          moeq_dev::reduce_vector<kType>(down_vecs, down_row_stride / 8, col8, rows, row_weights, top_k);
    const unsigned short* down_elems = static_cast<const unsigned short*>(down);
    unsigned short* out_elems = static_cast<unsigned short*>(out);
    for (int col = vec_cols + lane; col < cols; col += threads_per_token)
      out_elems[token * out_row_stride + col] =
          moeq_dev::reduce_scalar<kType>(down_elems, down_row_stride, col, rows, row_weights, top_k);
  }
}

#include "moeq_dev/kernels/routing_chunked.cuh"
