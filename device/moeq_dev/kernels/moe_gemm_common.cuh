#pragma once
// Pieces shared by the three MoE GEMM kernel bodies (kernels/moe_gemm_sync.cuh: one or more warps per
// tile doing everything; kernels/moe_gemm_ws.cuh: a producer warpgroup and two consumer
// warpgroups; kernels/moe_gemm_direct.cuh: warps loading their own codes into registers): the
// parameters, the M block's row maps, a K tile's A fragments and scale paths (mma.sync bodies),
// the K groups' and split K's sums and the epilogue.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights_fragment.cuh"
#include "moeq_dev/moe/activation.cuh"
#include "moeq_dev/ptx/cluster.cuh"
#include "moeq_dev/ptx/cp_async.cuh"

namespace moeq_dev {

struct MoeGemmParams {
  const unsigned short* a;
  long long a_row_stride;  // elements
  const unsigned char* codes;
  WeightScaling scaling;
  const void* bias;
  int bias_dtype;  // 0 none, 1 f32, 2 bf16, 3 f16
  int gather;      // 1: indexed layout; 0: segments (contiguous, masked)
  unsigned short* c;
  long long c_row_stride;  // elements
  int n;
  int k;
  const int* sorted_ids;         // gather
  const int* expert_ids;         // gather
  const int* num_tokens_padded;  // gather
  int num_slots;                 // gather
  int src_row_divisor;           // gather: top_k for GEMM1, 1 for GEMM2
  const int* block_table;        // segments: {expert, first row, rows} per block
  const int* num_blocks;         // segments
  const float* a_row_scales;     // Cfg::kRowScales: the scale of each A row
  const int* a_scale_rows;       // Cfg::kRowScales: A row r's scale is a_row_scales[a_scale_rows[r] / divisor];
  int a_scale_row_divisor;       // null: a_row_scales[r]
  int max_m_blocks;              // the M blocks the routing buffers hold (the launch grid's, one tile per CTA)
  // Self-routed GEMM1 (gemm_self_routed: direct tiles, gather, at most 32 slots, each expert's rows in one block): the
  // block rows come from topk_ids and expert_map (self_routed_block_rows), not from the routing's outputs.
  const void* topk_ids;
  const int* expert_map;     // null: the identity
  int topk_ids_int64;
  int num_global_experts;
  int num_local_experts;
  // GEMM1 with the activation in its epilogue (gemm_activation_epilogue, kernels/moe_gemm_activation_epilogue.cuh), or
  // GEMM2 making its input from GEMM1's rows (gemm_quantizes_rows, kernels/direct_row_quantize.cuh).
  ActivationArgs activation;
};

// Cfg::kSelfRouted where the config names it (a self-routed GEMM1's own kernel), else false.
// PERF: compile-time, not a run-time word: with the branch in every direct kernel, steps that never self-route lost
// 0.5-6 us (H200, call 2 of bench/results/2026-12-05-self-route-ring.md: Qwen3-30B-A3B M = 2 / 16, gpt-oss-120b
// M = 16, the same tiles).
template <class C, class = void>
struct CfgSelfRouted {
  static constexpr bool value = false;
};
template <class C>
struct CfgSelfRouted<C, decltype(void(C::kSelfRouted))> {
  static constexpr bool value = C::kSelfRouted;
};
template <class Cfg>
__device__ constexpr bool gemm_self_routed() {
  return CfgSelfRouted<Cfg>::value;
}

// Cfg::kQuantizesRows where the config names it (a direct GEMM that makes its FP8 per-token input itself:
// kernels/direct_row_quantize.cuh), else false. GEMM2's, from GEMM1's gate_up rows, names their activation
// (Cfg::kRowsActivation, kRowsInterleaved: gemm_rows_activated); a self-routed GEMM1's reads the caller's rows.
template <class C, class = void>
struct CfgQuantizesRows {
  static constexpr bool value = false;
};
template <class C>
struct CfgQuantizesRows<C, decltype(void(C::kQuantizesRows))> {
  static constexpr bool value = C::kQuantizesRows;
};
template <class Cfg>
__device__ constexpr bool gemm_quantizes_rows() {
  return CfgQuantizesRows<Cfg>::value;
}
template <class C, class = void>
struct CfgRowsActivated {
  static constexpr bool value = false;
};
template <class C>
struct CfgRowsActivated<C, decltype(void(C::kRowsActivation))> {
  static constexpr bool value = true;
};
template <class Cfg>
__device__ constexpr bool gemm_rows_activated() {
  return CfgRowsActivated<Cfg>::value;
}

__device__ __forceinline__ float load_bias_value(const void* bias, long long index, int dtype) {
  if (dtype == 1) return static_cast<const float*>(bias)[index];
  const unsigned short bits = static_cast<const unsigned short*>(bias)[index];
  return dtype == 2 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// Cfg::kBias, named only for weights with a bias (so the other kernels' sources stay what they were): the epilogue
// loads every channel's bias (and FP8 per-channel scale) before it uses any (write_output_tile_at).
template <class C, class = void>
struct CfgBias {
  static constexpr bool value = false;
};
template <class C>
struct CfgBias<C, decltype(void(C::kBias))> {
  static constexpr bool value = C::kBias;
};

// A bias element's value from its bits as loaded (f32: all 32; bf16, f16: the low 16; none: 0).
__device__ __forceinline__ float bias_value(unsigned bits, int dtype) {
  if (dtype == 0) return 0.0f;
  if (dtype == 1) return __uint_as_float(bits);
  return dtype == 2 ? bf16_to_f32(static_cast<unsigned short>(bits)) : f16_to_f32(static_cast<unsigned short>(bits));
}

template <bool kBf16>
__device__ __forceinline__ unsigned short to_act_bits(float x) {
  return kBf16 ? f32_to_bf16_rn(x) : f32_to_f16_rn(x);
}

template <int kTilesN, int kTilesM>
__device__ __forceinline__ void zero_accumulators(float (&acc)[kTilesN][kTilesM][4]) {
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][mt][i] = 0.0f;
}

// The A fragment of k16 step `step` of one 16-channel tile (fragment rows g and g + 8) from a
// lane's prepared code words of a K tile (format/prepared.cuh; 4-bit: one word per step, 8-bit:
// two), dequantized along `path`.
template <class Cfg, int kWords>
__device__ __forceinline__ void prepared_a_fragment(const unsigned (&words)[kWords], int step,
                                                    const FragmentScale (&decoded)[2], DequantPath path,
                                                    unsigned (&a)[4]) {
#pragma unroll
  for (int pr = 0; pr < 4; ++pr) {
    if constexpr (WeightFormatTraits<Cfg::kFormat>::kCodeBits == 4) {
      a[pr] = dequant_pair4<Cfg>(words[step], pr, decoded[pr & 1], path);
    } else {
      a[pr] = dequant_pair8<Cfg>(words[2 * step + (pr >> 1)], pr & 1, decoded[pr & 1], path);
    }
  }
}

// The A fragments of k16 steps 2h and 2h + 1 of one 16-channel tile from canonical code words:
// row g's `row0` and row g + 8's `row1` of a K tile (4-bit: 2 words per row, 8-bit: 4).
template <class Cfg, int kRowWords>
__device__ __forceinline__ void canonical_a_fragments(const unsigned (&row0)[kRowWords], const unsigned (&row1)[kRowWords],
                                                      int h, const FragmentScale (&decoded)[2], DequantPath path,
                                                      unsigned (&a)[2][4]) {
  unsigned lo[4], hi[4];  // rows g and g + 8: (e0, e1), (e2, e3) of step 2h, then of step 2h + 1
  if constexpr (kRowWords == 2) {
    dequant_word4<Cfg>(row0[h], decoded[0], path, lo);
    dequant_word4<Cfg>(row1[h], decoded[1], path, hi);
  } else {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      unsigned out0[2], out1[2];
      dequant_word8<Cfg>(row0[2 * h + q], decoded[0], path, out0);
      dequant_word8<Cfg>(row1[2 * h + q], decoded[1], path, out1);
      lo[2 * q] = out0[0], lo[2 * q + 1] = out0[1], hi[2 * q] = out1[0], hi[2 * q + 1] = out1[1];
    }
  }
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    a[q][0] = lo[2 * q], a[q][1] = hi[2 * q], a[q][2] = lo[2 * q + 1], a[q][3] = hi[2 * q + 1];
  }
}

// One K tile with its scales, for the mma.sync bodies. The scale goes on the fp32 accumulators
// where kAccScaleTile (the tile can: AccumulatorScaled formats) and `acc_scales` (it does: the
// tile's products into a zeroed tile accumulator, then acc += products x scale), else on the weights: one folded MX multiplier when
// kVoteFold (prepared codes) and every lane of the warp can fold, else the format's weights path.
// multiply(path, decoded, dst) dequantizes along `path` and adds the tile's products to dst.
// PERF: `path` is a constant at each call, so each inlined copy of the dequantization has no
// branch per pair (a run-time flag per pair cost INT4 5-7%: docs/perf-notes.md v3, runs 10-11).
template <class Cfg, bool kAccScaleTile, bool kVoteFold, int kTilesN, int kTilesM, class Multiply>
__device__ __forceinline__ void multiply_scaled_tile(const LaneScale (&scales)[kTilesN][2], const WeightScaling& scaling,
                                                     bool acc_scales, float (&acc)[kTilesN][kTilesM][4],
                                                     Multiply&& multiply) {
  FragmentScale decoded[kTilesN][2];
  if constexpr (kAccScaleTile) {
    if (acc_scales) {
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
        for (int r = 0; r < 2; ++r) decoded[nt][r] = decode_lane_scale<Cfg, true>(scales[nt][r], scaling);
      float tile_acc[kTilesN][kTilesM][4];
      zero_accumulators(tile_acc);
      multiply(DequantPath::kUnscaled, decoded, tile_acc);
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nt][mt][i] = fmaf(tile_acc[nt][mt][i], decoded[nt][i >> 1].acc_scale, acc[nt][mt][i]);
      return;
    }
  }
  bool foldable = true;
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      decoded[nt][r] = decode_lane_scale<Cfg>(scales[nt][r], scaling);
      foldable = foldable && decoded[nt][r].foldable;
    }
  if constexpr (kVoteFold) {
    // Cfg::kMxScalesAtMostTwo: the caller vouches for every scale of the layer, so no vote.
    if (Cfg::kMxScalesAtMostTwo || __all_sync(0xFFFFFFFFu, foldable)) {
      multiply(DequantPath::kFolded, decoded, acc);
      return;
    }
  }
  multiply(WeightsPath<Cfg>::value, decoded, acc);
}

// K groups (warps taking turns over the K tiles): groups 1.. hand their accumulators to group 0
// through `reduce` (shared memory), which adds them in group order, so the sums do not depend on
// timing. `slot` is the thread's place in its group (T / G threads); every thread passes one
// barrier.
template <int G, int T, int kTilesN, int kTilesM>
__device__ __forceinline__ void add_k_groups(float (&acc)[kTilesN][kTilesM][4], float* reduce, int warp_k, int slot) {
  constexpr int kGroupThreads = T / G;
  // Accumulator (nt, mt, i) of group q >= 1, for this thread's place in its group.
  auto partial = [&](int q, int nt, int mt, int i) -> float& {
    return reduce[(((q - 1) * kTilesN + nt) * kTilesM * 4 + mt * 4 + i) * kGroupThreads + slot];
  };
  if (warp_k > 0) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) partial(warp_k, nt, mt, i) = acc[nt][mt][i];
  }
  __syncthreads();
  if (warp_k == 0) {
#pragma unroll
    for (int q = 1; q < G; ++q)
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nt][mt][i] += partial(q, nt, mt, i);
  }
}

// Split K (kSplitK CTAs of a cluster along z share one output tile): ranks > 0 leave K group 0's
// sums in their shared memory (`smem`, at `smem_base`); rank 0 adds them in rank order, then every
// rank passes a second cluster barrier (a CTA's shared memory must outlive the reads of it). The
// caller lets only rank 0 go on. `slot` is the thread's place in its K group (T / G threads).
template <int kSplitK, int G, int T, int kTilesN, int kTilesM>
__device__ __forceinline__ void add_split_k_partials(float (&acc)[kTilesN][kTilesM][4], unsigned char* smem,
                                                     unsigned smem_base, int split_rank, int warp_k, int slot) {
  constexpr int kGroupThreads = T / G;
  // 16 bytes per (nt, mt) and thread: one vector store and one remote vector load each.
  auto partial_offset = [&](int nt, int mt) -> unsigned { return ((nt * kTilesM + mt) * kGroupThreads + slot) * 16; };
  if constexpr (G > 1) __syncthreads();  // group 0 has read the K-group partials this overwrites
  if (split_rank != 0 && warp_k == 0) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt)
        *reinterpret_cast<float4*>(smem + partial_offset(nt, mt)) =
            make_float4(acc[nt][mt][0], acc[nt][mt][1], acc[nt][mt][2], acc[nt][mt][3]);
  }
  cluster_sync_all();
  if (split_rank == 0 && warp_k == 0) {
#pragma unroll
    for (int rank = 1; rank < kSplitK; ++rank) {
      const unsigned remote = cluster_map_shared(smem_base, rank);
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt) {
          const float4 v = ld_cluster_f32x4(remote + partial_offset(nt, mt));
          acc[nt][mt][0] += v.x;
          acc[nt][mt][1] += v.y;
          acc[nt][mt][2] += v.z;
          acc[nt][mt][3] += v.w;
        }
    }
  }
  cluster_sync_all();
}

// M blocks of the GEMM, as the routing wrote them on the device.
template <int BM>
__device__ __forceinline__ int device_m_blocks(const MoeGemmParams& p) {
  return p.gather ? *p.num_tokens_padded / BM : *p.num_blocks;
}

// The expert of M block `m_block`.
__device__ __forceinline__ int block_expert_of(const MoeGemmParams& p, int m_block) {
  return p.gather ? p.expert_ids[m_block] : p.block_table[3 * m_block];
}

// The rows of M block `m_block` by T threads (tid in [0, T)): row_src / row_dst (-1: padding) of
// rows tid + T j, and the block's expert (tid 0). No barrier.
template <int BM, int T>
__device__ __forceinline__ void fill_block_rows(const MoeGemmParams& p, int m_block, int tid, int* row_src, int* row_dst,
                                                int* block_expert) {
  for (int r = tid; r < BM; r += T) {
    int src = -1, dst = -1;
    if (p.gather) {
      const int slot = p.sorted_ids[m_block * BM + r];
      if (slot < p.num_slots) {
        src = slot / p.src_row_divisor;
        dst = slot;
      }
    } else {
      const int* entry = p.block_table + 3 * m_block;
      if (r < entry[2]) src = dst = entry[1] + r;
    }
    row_src[r] = src;
    row_dst[r] = dst;
  }
  if (tid == 0) *block_expert = block_expert_of(p, m_block);
}

// Self-routed block rows (gemm_self_routed: at most 32 slots, M <= BM, so each local expert's slots fill
// one block): block m_block is the m_block-th distinct local expert in increasing id and its rows are that expert's
// slots in increasing f, as route_fused sorts them (its expert_ids and sorted_ids, which this CTA does not read).
// Ids route_fused flags as errors are -1 here too. Ends with a barrier; false (the whole CTA) past the experts.
template <int BM, int T>
__device__ __forceinline__ bool self_routed_block_rows(const MoeGemmParams& p, int m_block, int tid, int* row_src,
                                                       int* row_dst, int* block_expert) {
  static_assert(T >= 32, "self-routed blocks need a whole warp");
  for (int r = tid; r < BM; r += T) row_src[r] = row_dst[r] = -1;
  __syncthreads();
  if (tid < 32) {
    const int f = tid;
    int local = -1;
    if (f < p.num_slots) {
      const long long id = p.topk_ids_int64 ? static_cast<const long long*>(p.topk_ids)[f]
                                            : static_cast<long long>(static_cast<const int*>(p.topk_ids)[f]);
      if (id >= 0 && id < p.num_global_experts) {
        const int mapped = p.expert_map != nullptr ? p.expert_map[id] : static_cast<int>(id);
        local = mapped >= 0 && mapped < p.num_local_experts ? mapped : -1;
      }
    }
    bool first = local >= 0;  // the lowest slot of its expert
    for (int j = 0; j < 32; ++j) {
      const int other = __shfl_sync(0xffffffffu, local, j);
      if (j < f && other == local) first = false;
    }
    int rank = 0;  // distinct local experts below this slot's
    for (int j = 0; j < 32; ++j) {
      const int other = __shfl_sync(0xffffffffu, local, j);
      const bool other_first = __shfl_sync(0xffffffffu, first ? 1 : 0, j) != 0;
      if (other_first && other < local) ++rank;
    }
    const unsigned owner = __ballot_sync(0xffffffffu, first && rank == m_block);
    const int expert = owner != 0 ? __shfl_sync(0xffffffffu, local, __ffs(owner) - 1) : -1;
    const unsigned rows = __ballot_sync(0xffffffffu, expert >= 0 && local == expert);
    if ((rows >> f) & 1u) {
      const int r = __popc(rows & ((1u << f) - 1u));
      if (r < BM) {
        row_src[r] = f / p.src_row_divisor;
        row_dst[r] = f;
      }
    }
    if (f == 0) *block_expert = expert;
  }
  __syncthreads();
  return *block_expert >= 0;
}

// fill_block_rows by the whole CTA, then a barrier over it. False (before any barrier, so the whole
// CTA exits) for blocks past the device-side count.
template <int BM, int T>
__device__ __forceinline__ bool load_block_rows(const MoeGemmParams& p, int m_block, int tid, int* row_src, int* row_dst,
                                                int* block_expert) {
  if (m_block >= device_m_blocks<BM>(p)) return false;
  fill_block_rows<BM, T>(p, m_block, tid, row_src, row_dst, block_expert);
  __syncthreads();
  return true;
}

// This thread's accumulators, with the accumulator scales (FP8 per channel, NVFP4 global), the
// bias and one rounding, into the output tile [tokens][channels] in shared memory (rows of
// out_row_bytes). acc[nt][mt][2 r + i] is token token_base + 8 mt + 2 t + i and channel
// channel_of(nt, r) of the block (the m16n8 accumulator layout, which wgmma's matches).
// row_src: the A row of each block row (-1: padding); with Cfg::kRowScales, A row r's products are
// scaled by p.a_row_scales[r] before the bias (FP8 per-token activations: the codes go into the
// MMAs as their exact 16-bit values, the row's fp32 scale comes here).
// PERF: compile-time, not a null test of p.a_row_scales: the run-time test cost the 128-row wgmma
// tile 1.5-3% at Qwen3 M = 4096 (bench/results/2026-12-02-h200-quant-activations.md).
// The A-row scale of block row r (Cfg::kRowScales; 1 for padding rows, src < 0).
__device__ __forceinline__ float a_row_scale(const MoeGemmParams& p, int src) {
  if (src < 0) return 1.0f;
  return p.a_row_scales[p.a_scale_rows != nullptr ? p.a_scale_rows[src] / p.a_scale_row_divisor : src];
}

// block_row_scales (optional, shared memory): every block row's a_row_scale, fetched by the caller
// before its main loop (the warp-specialized body), else each thread reads its rows' here.
// weight_row(c): the weight row (output channel) of block-relative channel c; write_output_tile's is n0 + c.
template <class Cfg, int kTilesN, int kTilesM, class WeightRowOf, class ChannelOf>
__device__ __forceinline__ void write_output_tile_at(const MoeGemmParams& p, int e, WeightRowOf weight_row,
                                                     const float (&acc)[kTilesN][kTilesM][4], unsigned char* out_tile,
                                                     int out_row_bytes, int token_base, int t, ChannelOf channel_of,
                                                     const int* row_src, const float* block_row_scales = nullptr) {
  const int N = p.n;
  float row_scale[kTilesM][2];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      row_scale[mt][i] = 1.0f;
      if constexpr (Cfg::kRowScales) {
        const int r = token_base + mt * 8 + 2 * t + i;
        row_scale[mt][i] = block_row_scales != nullptr ? block_row_scales[r] : a_row_scale(p, row_src[r]);
      }
    }
  if constexpr (CfgBias<Cfg>::value || Cfg::kFormat == WeightFormatId::kFp8Channel) {
    // PERF: loaded and used pair by pair (below), ptxas keeps the loads in order, each in the region of its branch on
    // the bias dtype: one global-load latency per (nt, r). On gpt-oss-120b's GEMM2 (f32 bias) at M = 640,
    // 32x512/1x8x1/8/p/t, the uses of those 8 loads took ~6% of the consumer warps' stall samples (ncu source
    // counters, H100, session 53); loaded first, gpt-oss-120b's GEMMs on its shipped table's tiles ran 0.3-2.9% faster
    // and its steps 0.3-2.3%. FP8 per-channel scales are loaded the same way: Qwen3-30B-A3B fp8-channel GEMMs -0.1% to
    // -3.8%, steps -0.2% to -2.6% (bench/results/2026-12-06-h100-bias-epilogue.md, calls 7 and 8).
    float scale[kTilesN][2];
    unsigned bias_bits[kTilesN][2];
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int n = weight_row(channel_of(nt, r));
        scale[nt][r] = 1.0f;
        bias_bits[nt][r] = 0;
        if (n < N) {
          if constexpr (Cfg::kFormat == WeightFormatId::kFp8Channel) {
            scale[nt][r] = static_cast<const float*>(p.scaling.scales)[static_cast<long long>(e) * N + n];
          } else if constexpr (Cfg::kFormat == WeightFormatId::kNvfp4) {
            const int halves = p.scaling.num_global_scales;
            scale[nt][r] = p.scaling.global_scales[e * halves + (halves == 2 && n >= N / 2 ? 1 : 0)];
          }
          const long long index = static_cast<long long>(e) * N + n;
          if (p.bias_dtype == 1)
            bias_bits[nt][r] = static_cast<const unsigned*>(p.bias)[index];
          else if (p.bias_dtype != 0)
            bias_bits[nt][r] = static_cast<const unsigned short*>(p.bias)[index];
        }
      }
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int n_local = channel_of(nt, r);
        const float bias = bias_value(bias_bits[nt][r], p.bias_dtype);
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int token = token_base + mt * 8 + 2 * t + i;
            *reinterpret_cast<unsigned short*>(out_tile + token * out_row_bytes + n_local * 2) = to_act_bits<Cfg::kActBf16>(
                (Cfg::kRowScales ? acc[nt][mt][2 * r + i] * row_scale[mt][i] : acc[nt][mt][2 * r + i]) * scale[nt][r] + bias);
          }
      }
    return;
  }
  // NOTE: without a bias or channel scales, the loop the kernels were tuned on: loading first changed the machine code
  // of every kernel's main loop, and Qwen3-30B-A3B MXFP4 steps (no bias) ran ~1% slower (session 53). It stays a copy:
  // sharing its scale and store code with the loop above (a helper and a lambda) changed the machine code of all 68
  // Qwen3-30B-A3B NVFP4 kernels and of 15 of the 235 gpt-oss-120b ones timed in session 53 (cuobjdump).
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int n_local = channel_of(nt, r), n = weight_row(n_local);
      float scale = 1.0f, bias = 0.0f;
      if (n < N) {
        if constexpr (Cfg::kFormat == WeightFormatId::kFp8Channel) {
          scale = static_cast<const float*>(p.scaling.scales)[static_cast<long long>(e) * N + n];
        } else if constexpr (Cfg::kFormat == WeightFormatId::kNvfp4) {
          const int halves = p.scaling.num_global_scales;
          scale = p.scaling.global_scales[e * halves + (halves == 2 && n >= N / 2 ? 1 : 0)];
        }
        if (p.bias_dtype != 0) bias = load_bias_value(p.bias, static_cast<long long>(e) * N + n, p.bias_dtype);
      }
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int token = token_base + mt * 8 + 2 * t + i;
          *reinterpret_cast<unsigned short*>(out_tile + token * out_row_bytes + n_local * 2) =
              to_act_bits<Cfg::kActBf16>((Cfg::kRowScales ? acc[nt][mt][2 * r + i] * row_scale[mt][i] : acc[nt][mt][2 * r + i]) *
                                             scale + bias);
        }
    }
}

template <class Cfg, int kTilesN, int kTilesM, class ChannelOf>
__device__ __forceinline__ void write_output_tile(const MoeGemmParams& p, int e, int n0,
                                                  const float (&acc)[kTilesN][kTilesM][4], unsigned char* out_tile,
                                                  int out_row_bytes, int token_base, int t, ChannelOf channel_of,
                                                  const int* row_src, const float* block_row_scales = nullptr) {
  write_output_tile_at<Cfg>(p, e, [n0](int c) { return n0 + c; }, acc, out_tile, out_row_bytes, token_base, t,
                            channel_of, row_src, block_row_scales);
}

// The output tile's rows to C (row_dst; padding rows skipped) by the CTA's T threads: 16-byte
// stores where the row and N allow, else 4-byte channel pairs.
template <int BM, int BN, int T>
__device__ __forceinline__ void store_output_rows(const MoeGemmParams& p, const unsigned char* out_tile, int out_row_bytes,
                                                  const int* row_dst, int n0, int tid) {
  const int N = p.n;
  const bool wide = ((reinterpret_cast<unsigned long long>(p.c) | static_cast<unsigned long long>(p.c_row_stride) * 2) & 15) == 0;
  constexpr int kChunksOut = BM * (BN / 8);
  for (int c = tid; c < kChunksOut; c += T) {
    const int token = c / (BN / 8), chunk = c % (BN / 8);
    const int dst = row_dst[token];
    const int n = n0 + chunk * 8;
    if (dst < 0 || n >= N) continue;
    const unsigned char* from = out_tile + token * out_row_bytes + chunk * 16;
    unsigned short* to = p.c + static_cast<long long>(dst) * p.c_row_stride + n;
    if (wide && n + 8 <= N) {
      *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
    } else {
      for (int i = 0; i < 8 && n + i < N; i += 2)
        *reinterpret_cast<unsigned*>(to + i) = *reinterpret_cast<const unsigned*>(from + 2 * i);
    }
  }
}

// wgmma B operand: the tokens of a K tile, copied as 16-byte chunks into rows of 128 bytes (chunk
// c of row r at c ^ (r % 8)), moved into core matrices (8 tokens x 8 logical k, 128 contiguous
// bytes) in the K order of the A fragments (kernels/moe_gemm_sync.cuh): pair P = 8t + 2s + h of a row
// belongs in core matrix (token group, step s, half h), at byte 4t of the token's 16-byte row;
// core matrix (group, s, h) sits at 1024 group + 256 s + 128 h. kThreads threads share the BM
// rows x 2 step pairs: unit u = thread + i kThreads is row u % BM, steps 2 sp, 2 sp + 1 (sp =
// u / BM): physical k [16t + 8 sp, 16t + 8 sp + 8) is chunk 2t + sp, whose word w (pair 8t +
// 4 sp + w) goes to core matrix (r / 8, 2 sp + w / 2, w % 2).
// NOTE: a quarter warp takes 8 consecutive rows of one chunk (distinct banks through the
// swizzle) and stores 8 consecutive 16-byte rows of one core matrix: no bank conflicts.
// One unit of that move: the 4 chunks of a token row that hold a step pair (loads at read[tt],
// chunk 2 tt + sp), stored as the row's 16 bytes of the 4 core matrices (steps 2 sp, 2 sp + 1;
// halves 0, 1) of its token group; `write` is that row in core matrix (group, 2 sp, half 0).
__device__ __forceinline__ void move_token_unit(const unsigned (&read)[4], unsigned write) {
  unsigned words[4][4];
#pragma unroll
  for (int tt = 0; tt < 4; ++tt) {
    const uint4 v = lds_128(read[tt]);
    words[tt][0] = v.x;
    words[tt][1] = v.y;
    words[tt][2] = v.z;
    words[tt][3] = v.w;
  }
#pragma unroll
  for (int w = 0; w < 4; ++w)
    sts_128(write + (w / 2) * 256 + (w % 2) * 128, make_uint4(words[0][w], words[1][w], words[2][w], words[3][w]));
}

template <int BM, int kThreads>
__device__ __forceinline__ void permute_token_tile(unsigned staging, unsigned perm, int thread) {
  static_assert((2 * BM) % kThreads == 0, "whole (row, step pair) units per thread");
#pragma unroll
  for (int i = 0; i < 2 * BM / kThreads; ++i) {
    const int u = thread + i * kThreads, r = u % BM, sp = u / BM;
    unsigned read[4];
#pragma unroll
    for (int tt = 0; tt < 4; ++tt) read[tt] = staging + r * 128 + (((2 * tt + sp) ^ (r % 8)) * 16);
    move_token_unit(read, perm + (r / 8) * 1024 + sp * 512 + (r % 8) * 16);
  }
}

}  // namespace moeq_dev
