#pragma once
// The chunked routing path for large M (src/cuda/routing.cpp picks it from kChunkedMinSlots):
// the slots are cut into C = gridDim.x chunks of chunk_slots, one CTA each, in two launches:
//   route_chunk_count: map and count each chunk per bucket into chunk_counts [C, E + 1]
//   route_chunk_place: each CTA sums the counts of the chunks before its own, scans the padded
//                      totals, and places its chunk's slots in increasing f
// with the outputs of route_count + route_scatter bit for bit (the ranks are stable in f).
// PERF: route_count is one CTA and route_scatter E + 1 CTAs that each scan every slot; at
// M = 4096, top_k 8 (32768 slots) they took 18 + 19 us of a Qwen3-30B-A3B step on the H200
// (ncu graph nodes, session 27); every CTA here reads its own chunk once.
// Included by kernels/routing.cuh (RoutingCfg defined before it).

// Bucket b < E: expert b; bucket E: the slots with no local expert. CTA c maps the slots
// [c * chunk_slots, min((c + 1) * chunk_slots, num_slots)) to local ids (written) and stores its
// per-bucket counts in chunk_counts[c * (E + 1) + b]. Dynamic shared memory: (E + 1) ints.
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_route_chunk_count(const void* topk_ids, const int* expert_map, int num_slots, int num_global_experts,
                       int num_experts, int chunk_slots, int* local_ids, int* error_flags, int* chunk_counts,
                       moeq_dev::FoldedQuantizerArgs fold) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kRouteChunkCount) {
    if (moeq_dev::run_folded_quantizer<RoutingCfg>(fold)) return;
    constexpr int kThreads = RoutingCfg::kThreads;
    constexpr int kHeld = 4;  // slots per thread whose ids are loaded before any is counted
    extern __shared__ int smem_counts[];  // (E + 1)
    const int num_buckets = num_experts + 1;
    for (int b = threadIdx.x; b < num_buckets; b += kThreads) smem_counts[b] = 0;
    __syncthreads();
    const int begin = static_cast<int>(blockIdx.x) * chunk_slots;
    const int end = min(begin + chunk_slots, num_slots);
    for (int base = begin; base < end; base += kHeld * kThreads) {
      // PERF: all ids, then all map entries, before the first atomic: kHeld round trips in flight.
      long long ids[kHeld];
      int mapped[kHeld];
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int f = base + j * kThreads + static_cast<int>(threadIdx.x);
        ids[j] = f < end ? moeq_dev::load_topk_id<RoutingCfg::kIdsInt64>(topk_ids, f) : -1;
      }
#pragma unroll
      for (int j = 0; j < kHeld; ++j) mapped[j] = moeq_dev::lookup_local(ids[j], expert_map, num_global_experts);
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int f = base + j * kThreads + static_cast<int>(threadIdx.x);
        if (f >= end) continue;
        const int local = moeq_dev::checked_local(ids[j], mapped[j], num_global_experts, num_experts, error_flags);
        local_ids[f] = local;
        // NOTE: shared atomics in any order: only the counts are kept, so the result is deterministic.
        atomicAdd(&smem_counts[local >= 0 ? local : num_experts], 1);
      }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < num_buckets; b += kThreads)
      chunk_counts[static_cast<long long>(blockIdx.x) * num_buckets + b] = smem_counts[b];
  }
}

// After route_chunk_count, on the same grid and chunks. Thread b <= E owns bucket b: its slots in
// the chunks before this CTA's and in all of them give, after the CTA-wide scan of the padded
// totals, where this chunk's slots of the bucket start; they are placed in increasing f:
//   indexed:    sorted_ids[segment(e) + rank] = f (segments padded to block_m)
//   contiguous: row = offsets[e] + rank: inv_permuted_idx[f] = row, permuted_src[row] = f; the
//               non-local slots from offsets[E] (src num_slots)
//   batched:    e*T + rank: batched_rows[f] (-1 past T and for non-local slots), slot_of_row
//               (optional)
// The outputs of no one chunk are split across the CTAs: indexed expert_ids, the padding of
// expert e (CTA e % C) and of sorted_ids past num_tokens_padded, num_tokens_padded (CTA 0);
// contiguous offsets [E + 1] (CTA 0); batched counts [E] = min(count, T) with the overflow flag
// (CTA 0) and slot_of_row's -1 past each expert's rows (CTA e % C).
// Needs E + 1 <= kThreads. Dynamic shared memory: (E + 1 + 32 + kWarps * (E + 1)) ints.
extern "C" __global__ void __launch_bounds__(RoutingCfg::kThreads)
moeq_route_chunk_place(const int* local_ids, const int* chunk_counts, int num_slots, int num_experts, int layout,
                       int block_m, int capacity, int chunk_slots, int max_tokens_per_expert, int* error_flags,
                       int* sorted_ids, int* expert_ids, int* num_tokens_padded, long long* offsets,
                       int* inv_permuted_idx, int* permuted_src, int* batched_rows, int* slot_of_row,
                       int* counts) {
  moeq_dev::begin_dependent_grid();
  if constexpr (RoutingCfg::kKernel == moeq_dev::RoutingKernel::kRouteChunkPlace) {
    constexpr int kThreads = RoutingCfg::kThreads;
    constexpr int kWarps = kThreads / 32;
    const int chunk = static_cast<int>(blockIdx.x);
    const int num_chunks = static_cast<int>(gridDim.x);
    const int bucket_of_thread = threadIdx.x;
    const int num_buckets = num_experts + 1;
    const bool indexed = layout == moeq_dev::kLayoutIndexed;
    const bool contiguous = layout == moeq_dev::kLayoutContiguous;
    const int max_tokens = max_tokens_per_expert;
    extern __shared__ int smem[];
    int* smem_offsets = smem;                        // (E + 1), padded to block_m (indexed)
    int* smem_warp_sums = smem_offsets + num_buckets;  // (32)
    int* smem_table = smem_warp_sums + 32;           // (kWarps, E + 1)
    for (int i = threadIdx.x; i < kWarps * num_buckets; i += kThreads) smem_table[i] = 0;

    int before = 0, total = 0;
    if (bucket_of_thread < num_buckets) {
      // PERF: four loads in flight per step; the chunks are few (<= kMaxRouteChunks on the host).
      int c = 0;
      for (; c + 4 <= num_chunks; c += 4) {
        int n[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) n[u] = chunk_counts[static_cast<long long>(c + u) * num_buckets + bucket_of_thread];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          before += c + u < chunk ? n[u] : 0;
          total += n[u];
        }
      }
      for (; c < num_chunks; ++c) {
        const int n = chunk_counts[static_cast<long long>(c) * num_buckets + bucket_of_thread];
        before += c < chunk ? n : 0;
        total += n;
      }
    }
    // Bucket E counts 0 in the scan, so its offset is the padded total (contiguous: where the
    // non-local rows start).
    const int pad_to = indexed ? block_m : 1;
    const int count = bucket_of_thread < num_experts ? total : 0;
    const int padded = (count + pad_to - 1) / pad_to * pad_to;
    const int offset = moeq_dev::cta_exclusive_sum<kThreads>(padded, smem_warp_sums);
    if (bucket_of_thread < num_buckets) smem_offsets[bucket_of_thread] = offset;
    int next = indexed || contiguous ? offset + before
               : bucket_of_thread < num_experts ? bucket_of_thread * max_tokens + before : 0;
    if (chunk == 0) {
      if (indexed && bucket_of_thread == num_experts) *num_tokens_padded = offset;
      if (contiguous && bucket_of_thread < num_buckets) offsets[bucket_of_thread] = offset;
      if (!indexed && !contiguous && bucket_of_thread < num_experts) {
        if (total > max_tokens && error_flags != nullptr) atomicOr(error_flags, moeq_dev::kErrorBatchedOverflow);
        counts[bucket_of_thread] = min(total, max_tokens);
      }
    }

    const int begin = chunk * chunk_slots;
    const int end = min(begin + chunk_slots, num_slots);
    for (int base = begin; base < end; base += kThreads) {
      const int f = base + static_cast<int>(threadIdx.x);
      const int local = f < end ? local_ids[f] : -1;
      const int bucket = f >= end ? -1 : local >= 0 ? local : contiguous ? num_experts : -1;
      const int position = moeq_dev::place_chunk_slots<kThreads>(bucket, num_buckets, smem_table, num_buckets, next);
      if (f >= end) continue;
      if (indexed) {
        if (bucket >= 0) sorted_ids[position] = f;
      } else if (contiguous) {
        inv_permuted_idx[f] = position;
        permuted_src[position] = local >= 0 ? f : num_slots;
      } else {
        // Past T the expert overflowed (flagged above): the slot is dropped.
        const bool fits = bucket >= 0 && position - bucket * max_tokens < max_tokens;
        batched_rows[f] = fits ? position : -1;
        if (fits && slot_of_row != nullptr) slot_of_row[position] = f;
      }
    }

    __syncthreads();  // smem_offsets, when this chunk placed nothing
    const bool owns_expert = bucket_of_thread < num_experts && bucket_of_thread % num_chunks == chunk;
    if (indexed) {
      // Block b starts at entry b*BM; the expert whose padded segment holds it owns the block.
      const int padded_total = smem_offsets[num_experts];
      for (int b = chunk * kThreads + threadIdx.x; b < capacity / block_m; b += num_chunks * kThreads) {
        const int entry = b * block_m;
        expert_ids[b] = entry < padded_total ? moeq_dev::last_at_most(smem_offsets, num_experts, entry) : -1;
      }
      moeq_dev::warp_fill_runs(owns_expert, offset + count, offset + padded, num_slots, sorted_ids);
      for (int i = padded_total + chunk * kThreads + threadIdx.x; i < capacity; i += num_chunks * kThreads)
        sorted_ids[i] = num_slots;
    } else if (!contiguous && slot_of_row != nullptr) {
      const int slab = owns_expert ? bucket_of_thread * max_tokens : 0;
      moeq_dev::warp_fill_runs(owns_expert, slab + min(total, max_tokens), slab + max_tokens, -1, slot_of_row);
    }
  }
}
