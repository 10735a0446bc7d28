#pragma once
// Routing building blocks for the three layouts (CONTRACT §3): id mapping, per-expert counts and
// their padded scan, the ordered per-expert slot ranking (align, permute, batched), row copies and
// the weighted top-k reduction. Every function is deterministic and reproduces
// reference/routing.cpp bit for bit. Composed by kernels/routing.cuh.
// NOTE: NVRTC-safe on purpose: no standard headers and no <cuda_bf16.h>.
#include "moeq_dev/moe/errors.cuh"
#include "moeq_dev/ptx/cvt.cuh"

namespace moeq_dev {

// Which entry point a generated routing module holds (RoutingCfg::kKernel).
enum class RoutingKernel : int {
  kRouteCount, kRouteScatter, kPermuteRows, kTopkReduce, kRouteFused, kRouteChunkCount, kRouteChunkPlace
};
// Runtime layout argument of the count and scatter kernels (values mirrored by src/cuda/routing.cpp).
enum RouteLayout : int { kLayoutIndexed = 0, kLayoutContiguous = 1, kLayoutBatched = 2 };
enum class FloatType : int { kF32, kBf16, kF16 };

// ---- id mapping ----
// Global id of slot f.
template <bool kIdsInt64>
__device__ __forceinline__ long long load_topk_id(const void* topk_ids, int f) {
  return kIdsInt64 ? static_cast<const long long*>(topk_ids)[f]
                   : static_cast<long long>(static_cast<const int*>(topk_ids)[f]);
}

// expert_map[id] (or id without a map) for an id in [0, E_g); -1 for any other id, not read.
__device__ __forceinline__ int lookup_local(long long id, const int* expert_map, int num_global_experts) {
  if (id < 0 || id >= num_global_experts) return -1;
  return expert_map != nullptr ? expert_map[id] : static_cast<int>(id);
}

// The local expert of a global id given its lookup_local value: out-of-range values become -1
// and flag the error word.
__device__ __forceinline__ int checked_local(long long id, int local, int num_global_experts, int num_experts,
                                             int* error_flags) {
  if (id < -1 || id >= num_global_experts) {
    if (error_flags != nullptr) atomicOr(error_flags, kErrorBadTopkId);
    return -1;
  }
  if (id == -1) return -1;
  if (local < -1 || local >= num_experts) {
    if (error_flags != nullptr) atomicOr(error_flags, kErrorBadExpertMap);
    return -1;
  }
  return local;
}

// Local expert of slot f, or -1 (id -1, or not on this rank). Out-of-range values become -1 and
// flag the error word. Without expert_map, num_global_experts == num_experts.
template <bool kIdsInt64>
__device__ __forceinline__ int map_to_local(const void* topk_ids, int f, const int* expert_map,
                                            int num_global_experts, int num_experts, int* error_flags) {
  const long long id = load_topk_id<kIdsInt64>(topk_ids, f);
  return checked_local(id, lookup_local(id, expert_map, num_global_experts), num_global_experts, num_experts,
                       error_flags);
}

// ---- scans ----
__device__ __forceinline__ int warp_inclusive_sum(int value) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int delta = 1; delta < 32; delta *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, value, delta);
    if (lane >= delta) value += other;
  }
  return value;
}

// Run by one full warp: offsets[e] = sum over e' < e of round_up(counts[e'], block_m), for
// e <= num_experts (offsets has num_experts + 1 entries). Both arrays in shared memory.
__device__ __forceinline__ void warp_padded_exclusive_scan(const int* counts, int num_experts,
                                                           int block_m, int* offsets) {
  const int lane = threadIdx.x % 32;
  const int per_lane = (num_experts + 31) / 32;
  const int begin = min(lane * per_lane, num_experts);
  const int end = min(begin + per_lane, num_experts);
  int sum = 0;
  for (int e = begin; e < end; ++e) sum += (counts[e] + block_m - 1) / block_m * block_m;
  const int inclusive = warp_inclusive_sum(sum);
  int running = inclusive - sum;
  for (int e = begin; e < end; ++e) {
    offsets[e] = running;
    running += (counts[e] + block_m - 1) / block_m * block_m;
  }
  if (lane == 31) offsets[num_experts] = inclusive;
}

// Exclusive prefix sum of one value per thread in threadIdx order, across the whole CTA (every
// thread calls it); one __syncthreads. smem_warp_sums: 32 ints, not reused before another barrier.
template <int kThreads>
__device__ __forceinline__ int cta_exclusive_sum(int value, int* smem_warp_sums) {
  constexpr int kWarps = kThreads / 32;
  static_assert(kThreads % 32 == 0 && kWarps <= 32, "kThreads must be a multiple of 32, at most 1024");
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int inclusive = warp_inclusive_sum(value);
  if (lane == 31) smem_warp_sums[warp] = inclusive;
  __syncthreads();
  const int warp_sum = lane < kWarps ? smem_warp_sums[lane] : 0;
  const int warp_before = __shfl_sync(0xffffffffu, warp_inclusive_sum(warp_sum) - warp_sum, warp);
  return warp_before + inclusive - value;
}

// Each lane may own a run [first, end) of `out` to set to `value`; the warp writes the runs one
// after another, 32 consecutive entries at a time (coalesced). The whole warp calls it.
__device__ __forceinline__ void warp_fill_runs(bool has_run, int first, int end, int value, int* out) {
  const int lane = threadIdx.x % 32;
  unsigned pending = __ballot_sync(0xffffffffu, has_run && first < end);
  while (pending != 0) {
    const int owner = __ffs(pending) - 1;
    pending &= pending - 1;
    const int run_first = __shfl_sync(0xffffffffu, first, owner);
    const int run_end = __shfl_sync(0xffffffffu, end, owner);
    for (int i = run_first + lane; i < run_end; i += 32) out[i] = value;
  }
}

// Last index i in [0, n) with values[i] <= x (values ascending, values[0] <= x).
__device__ __forceinline__ int last_at_most(const int* values, int n, int x) {
  int lo = 0, hi = n;  // invariant: values[lo] <= x, answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (values[mid] <= x) lo = mid;
    else hi = mid;
  }
  return lo;
}

// ---- ordered ranking of one expert's slots ----
// Calls visit(f, rank) for every slot f with local_ids[f] == expert, rank = its position among
// that expert's slots in increasing f; returns the count (the same in every thread).
// The whole CTA must call it. smem: 2 * 32 ints.
// Each chunk is 1024 slots: kItems = 32 / kWarps items per thread, slot
// f = base + j*kThreads + warp*32 + lane, so the 32 (j, warp) groups in order j-major are the
// 32 consecutive runs of 32 slots. One warp-wide scan of the 32 group counts gives every group's
// offset: a single __syncthreads per chunk.
// NOTE: the group counts are double-buffered, so the next chunk's writes never race this
// chunk's reads without a second __syncthreads.
template <int kThreads, typename Visit>
__device__ __forceinline__ int rank_expert_slots(const int* local_ids, int num_slots, int expert,
                                                 int* smem_groups, Visit visit) {
  constexpr int kWarps = kThreads / 32;
  constexpr int kItems = 32 / kWarps;
  static_assert(kThreads % 32 == 0 && 32 % kWarps == 0, "kThreads must be 32 * a power of two <= 1024");
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const unsigned lanes_below = (1u << lane) - 1u;
  int running = 0;
  int buffer = 0;
  for (int base = 0; base < num_slots; base += kThreads * kItems) {
    unsigned masks[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int f = base + j * kThreads + threadIdx.x;
      masks[j] = __ballot_sync(0xffffffffu, f < num_slots && local_ids[f] == expert);
      if (lane == 0) smem_groups[buffer * 32 + j * kWarps + warp] = __popc(masks[j]);
    }
    __syncthreads();
    const int group_count = smem_groups[buffer * 32 + lane];
    const int inclusive = warp_inclusive_sum(group_count);
    const int exclusive = inclusive - group_count;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int group_offset = __shfl_sync(0xffffffffu, exclusive, j * kWarps + warp);
      if (masks[j] & (1u << lane))
        visit(base + j * kThreads + threadIdx.x, running + group_offset + __popc(masks[j] & lanes_below));
    }
    running += __shfl_sync(0xffffffffu, inclusive, 31);
    buffer ^= 1;
  }
  return running;
}

// The lanes of the warp whose key equals this lane's (all 32 lanes call it; 0 <= key < 2^key_bits, the
// same key_bits in every lane): __match_any_sync's result from one ballot per key bit.
__device__ __forceinline__ unsigned warp_peers(int key, int key_bits) {
  unsigned peers = 0xffffffffu;
  for (int bit = 0; bit < key_bits; ++bit) {
    const bool set = ((key >> bit) & 1) != 0;
    const unsigned ones = __ballot_sync(0xffffffffu, set);
    peers &= set ? ones : ~ones;
  }
  return peers;
}

// ---- ordered ranking of one chunk of slots in one CTA (the fused small-M path) ----
// One slot per thread: slot f = base + threadIdx.x, in bucket `bucket` (>= 0; -1 = not placed).
// Returns the slot's position: next[bucket] + its rank among this chunk's slots of the bucket in
// increasing f. Thread b < num_buckets owns bucket b: `next` is its next free position (advanced
// here past this chunk's slots). The whole CTA calls it, chunks in increasing base; 2 barriers.
// table: kWarps rows of `stride` ints (row w: warp w's slots per bucket), zero on entry and on
// return. Within a warp, warp_peers groups the lanes of one bucket; the group's leader writes its
// size, the owner of each bucket turns its column into first positions.
// PERF: the owner reads its column with kWarps independent loads (consecutive buckets across
// lanes: no bank conflicts), no shuffle chains. Measured ~2.6 us per full chunk on an H200 with
// __match_any_sync (graph replay, M = 4096 top_k 8: 32 chunks, 86 us), whose cost grows with the
// distinct values in the warp (32 experts here); warp_peers costs one ballot per key bit.
template <int kThreads>
__device__ __forceinline__ int place_chunk_slots(int bucket, int num_buckets, int* table, int stride, int& next) {
  constexpr int kWarps = kThreads / 32;
  static_assert(kThreads % 32 == 0 && kWarps <= 32, "kThreads must be a multiple of 32, at most 1024");
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  // Keys bucket + 1 in [0, num_buckets]: the unplaced lanes (-1) form a group of their own.
  const unsigned peers = warp_peers(bucket + 1, 32 - __clz(num_buckets));
  const int rank_in_warp = __popc(peers & ((1u << lane) - 1u));
  const bool leader = bucket >= 0 && rank_in_warp == 0;
  int* row = table + warp * stride;
  if (leader) row[bucket] = __popc(peers);
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < num_buckets) {
    // NOTE: two halves of kWarps / 2 loads in flight: the whole column would spill at 1024 threads.
    constexpr int kHalf = kWarps % 2 == 0 ? kWarps / 2 : kWarps;
#pragma unroll
    for (int w0 = 0; w0 < kWarps; w0 += kHalf) {
      int count[kHalf];
#pragma unroll
      for (int w = 0; w < kHalf; ++w) count[w] = table[(w0 + w) * stride + threadIdx.x];
      // NOTE: only the cells of present groups are rewritten; their leaders zero them below.
#pragma unroll
      for (int w = 0; w < kHalf; ++w)
        if (count[w] != 0) {
          table[(w0 + w) * stride + threadIdx.x] = next;
          next += count[w];
        }
    }
  }
  __syncthreads();
  const int position = bucket >= 0 ? row[bucket] + rank_in_warp : -1;
  __syncwarp();
  if (leader) row[bucket] = 0;
  __syncwarp();
  return position;
}

// ---- 16-bit and fp32 values ----
template <FloatType kType>
__device__ __forceinline__ float load_float(const void* base, long long i) {
  if constexpr (kType == FloatType::kF32) return static_cast<const float*>(base)[i];
  else if constexpr (kType == FloatType::kBf16) return bf16_to_f32(static_cast<const unsigned short*>(base)[i]);
  else return f16_to_f32(static_cast<const unsigned short*>(base)[i]);
}

template <FloatType kType>
__device__ __forceinline__ unsigned short f32_to_half_rn(float x) {
  static_assert(kType != FloatType::kF32, "16-bit output types only");
  if constexpr (kType == FloatType::kBf16) return f32_to_bf16_rn(x);
  else return f32_to_f16_rn(x);
}

// Two packed 16-bit values (element 0 in the low half) -> fp32, exactly.
template <FloatType kType>
__device__ __forceinline__ void unpack_half2(unsigned word, float& lo, float& hi) {
  if constexpr (kType == FloatType::kBf16) {
    // NOTE: a bf16 is the top half of the fp32 of the same value: a shift or a mask is exact.
    lo = __uint_as_float(word << 16);
    hi = __uint_as_float(word & 0xffff0000u);
  } else {
    lo = f16_to_f32(static_cast<unsigned short>(word & 0xffffu));
    hi = f16_to_f32(static_cast<unsigned short>(word >> 16));
  }
}

// ---- weighted top-k reduction ----
// acc[0..8) = fma(weight, values of 8 packed 16-bit elements, acc): one fp32 fma per element,
// the exact operation order of ref::topk_reduce.
template <FloatType kType>
__device__ __forceinline__ void fma_half8(float (&acc)[8], float weight, const uint4& packed) {
  const unsigned words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float lo, hi;
    unpack_half2<kType>(words[i], lo, hi);
    acc[2 * i] = __fmaf_rn(weight, lo, acc[2 * i]);
    acc[2 * i + 1] = __fmaf_rn(weight, hi, acc[2 * i + 1]);
  }
}

template <FloatType kType>
__device__ __forceinline__ uint4 pack_half8(const float (&acc)[8]) {
  unsigned words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    words[i] = static_cast<unsigned>(f32_to_half_rn<kType>(acc[2 * i])) |
               (static_cast<unsigned>(f32_to_half_rn<kType>(acc[2 * i + 1])) << 16);
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// One output vector of 8 columns (col8 = column / 8) of one token: the sum over k in increasing
// order of weights[k] * down[rows[k], col8*8 + 0..8), skipping rows[k] < 0 (never read).
// PERF: 4 row loads are issued before their fmas, so each thread keeps 4 x 16 B in flight
// (top_k 8: two batches); measured 3.7 TB/s (K 2048) and 4.1 TB/s (K 7168) read + write at
// M 4096 on an H200, against ~4.3 TB/s for a device copy. __ldg: down is read-only here.
template <FloatType kType>
__device__ __forceinline__ uint4 reduce_vector(const uint4* down, long long down_row_vecs, int col8,
                                               const int* rows, const float* weights, int top_k) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int k = 0;
  for (; k + 4 <= top_k; k += 4) {
    uint4 packed[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int row = rows[k + u];
      packed[u] = row >= 0 ? __ldg(down + row * down_row_vecs + col8) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (rows[k + u] >= 0) fma_half8<kType>(acc, weights[k + u], packed[u]);
  }
  for (; k < top_k; ++k)
    if (rows[k] >= 0) fma_half8<kType>(acc, weights[k], __ldg(down + rows[k] * down_row_vecs + col8));
  return pack_half8<kType>(acc);
}

// The scalar form of reduce_vector for the columns past the last whole 16-byte vector.
template <FloatType kType>
__device__ __forceinline__ unsigned short reduce_scalar(const unsigned short* down, long long down_row_stride,
                                                        int col, const int* rows, const float* weights,
                                                        int top_k) {
  float acc = 0.f;
  for (int k = 0; k < top_k; ++k)
    if (rows[k] >= 0) acc = __fmaf_rn(weights[k], load_float<kType>(down, rows[k] * down_row_stride + col), acc);
  return f32_to_half_rn<kType>(acc);
}

// Source row of slot f for the reduction: -1 when the slot is not local; else row_map[f] when a
// map is given (contiguous: inv_permuted_idx; batched: e*T + rank, -1 on overflow), else f
// (indexed). Its weight is read only for a row that is read.
template <FloatType kWeightsType>
__device__ __forceinline__ void reduce_source(const int* local_ids, const int* row_map, const void* weights,
                                              int f, int& row, float& weight) {
  row = local_ids[f] < 0 ? -1 : (row_map != nullptr ? row_map[f] : f);
  weight = row >= 0 ? load_float<kWeightsType>(weights, f) : 0.f;
}

}  // namespace moeq_dev
