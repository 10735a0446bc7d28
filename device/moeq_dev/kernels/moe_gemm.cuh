#pragma once
// Entry point of the quantized MoE GEMM, version 3 (mma.sync m16n8k16, 16-bit activations):
//   C[dst(r), n] = round(sum_k A[src(r), k] * W_e[n, k] * accumulator scale + bias_e[n])
// for the rows r of each M block, whose expert e and row mapping come from the layout:
//   gather (indexed): block b has expert expert_ids[b] and slots sorted_ids[b*BM + i];
//                     src = slot / src_row_divisor, dst = slot; slots >= num_slots are padding.
//   segment (contiguous, masked): block_table[b] = {expert, first row, rows}; src = dst = row.
// Pipeline: a ring of kStages shared-memory stages, each one K tile (64) of the gathered A rows
// and of the raw weight codes in the canonical layout (CONTRACT §4), filled by cp.async
// kStages - 1 tiles ahead; the scales of a tile are loaded into a register ring at the same
// time. Each warp reads its codes from shared memory and dequantizes them straight into B
// fragments (format/weights_fragment.cuh): no dequantized tile, one barrier per K tile.
//
// K order inside a tile. The MMA sums over k, so any one permutation of the 64 k of a tile,
// applied to A and B alike, gives the same products. Lane (g = lane / 4, t = lane % 4) takes the
// 16 consecutive k [16t, 16t + 16) of its rows: for k16 step s, the logical pairs (2t, 2t + 1)
// and (2t + 8, 2t + 9) of the fragment are the physical k 16t + 4s + {0, 1} and {2, 3}. So a lane
// loads its 16 codes with one 8-byte (4-bit) or 16-byte (8-bit) shared load, a 16-code group
// needs one scale, and A comes with two 16-byte loads per row; 8 rows x 4 lanes of a warp read
// contiguous bytes (codes) or a padded row stride (A): no bank conflicts.
// The generated source defines, before including this file:
//   struct MoeGemmCfg {
//     static constexpr moeq_dev::WeightFormatId kFormat = moeq_dev::WeightFormatId::kInt4;
//     static constexpr bool kActBf16 = true;      // else f16 (A, C and the MMA type)
//     static constexpr int kBlockM = 16, kBlockN = 128, kWarpsM = 1, kWarpsN = 4, kStages = 4;
//   };
// Group size, scale dtype, zero points, global scales, bias and the layout are run-time
// parameters (MoeGemmParams): a few uniform branches per K tile; they keep the number of
// compiled configs small enough for CI to compile every one for every arch.
// Host preconditions (src/cuda/moe_gemm.cpp): K % 32 == 0, N % 2 == 0, 16-byte aligned A rows
// and code rows, dynamic shared memory = moe_gemm_smem_bytes, grid = (the largest possible
// number of M blocks, ceil(N / BN)): blocks past the device-side count exit at once, so a
// captured graph stays valid for any routing.
#include "moeq_dev/format/weights_fragment.cuh"
#include "moeq_dev/ptx/cp_async.cuh"
#include "moeq_dev/ptx/mma.cuh"

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
};

__device__ __forceinline__ float load_bias_value(const void* bias, long long index, int dtype) {
  if (dtype == 1) return static_cast<const float*>(bias)[index];
  const unsigned short bits = static_cast<const unsigned short*>(bias)[index];
  return dtype == 2 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

template <bool kBf16>
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const unsigned l = kBf16 ? f32_to_bf16_rn(lo) : f32_to_f16_rn(lo);
  const unsigned h = kBf16 ? f32_to_bf16_rn(hi) : f32_to_f16_rn(hi);
  return l | (h << 16);
}

template <class Cfg>
struct MoeGemmShape {
  static constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = 64;
  static constexpr int kWarpsM = Cfg::kWarpsM, kWarpsN = Cfg::kWarpsN, kStages = Cfg::kStages;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpM = kBlockM / kWarpsM, kWarpN = kBlockN / kWarpsN;
  static constexpr int kTilesM = kWarpM / 16, kTilesN = kWarpN / 8;
  static constexpr int kCodeBits = WeightFormatTraits<Cfg::kFormat>::kCodeBits;
  static constexpr int kCodeRowBytes = kBlockK * kCodeBits / 8;  // 32 or 64
  static constexpr int kCodeChunksPerRow = kCodeRowBytes / 16;
  static constexpr int kCodesPerChunk = 128 / kCodeBits;
  // NOTE: 16 bytes of padding per A row: the 8 lanes of a quarter warp (rows g, g + 1) hit
  // distinct banks with 16-byte loads.
  static constexpr int kARowBytes = kBlockK * 2 + 16;
  static constexpr int kAStageBytes = kBlockM * kARowBytes;
  static constexpr int kStageBytes = kAStageBytes + kBlockN * kCodeRowBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kBlockM % (16 * kWarpsM) == 0 && kBlockN % (8 * kWarpsN) == 0, "warp tile shape");
  static_assert(kStages >= 2, "at least double buffering");
};

template <class Cfg>
__device__ __forceinline__ void moe_gemm_block(const MoeGemmParams& p) {
  using S = MoeGemmShape<Cfg>;
  constexpr int BM = S::kBlockM, BN = S::kBlockN, BK = S::kBlockK, T = S::kThreads, kStages = S::kStages;
  constexpr int kTilesM = S::kTilesM, kTilesN = S::kTilesN;
  constexpr bool kFourBit = S::kCodeBits == 4;
  constexpr int kChunksA = BM * (BK / 8), kChunksB = BN * S::kCodeChunksPerRow;
  constexpr int kPerThreadA = (kChunksA + T - 1) / T, kPerThreadB = (kChunksB + T - 1) / T;

  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int row_src[BM];
  __shared__ int row_dst[BM];
  __shared__ int block_expert;

  const int tid = threadIdx.x;
  // NOTE: M blocks along x (up to 2^31 - 1 of them); consecutive CTAs then share a weight tile
  // (same expert, same n0) while it is hot in L2.
  const int m_block = blockIdx.x;
  const int n0 = blockIdx.y * BN;
  const int num_m_blocks = p.gather ? *p.num_tokens_padded / BM : *p.num_blocks;
  if (m_block >= num_m_blocks) return;
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
  if (tid == 0) block_expert = p.gather ? p.expert_ids[m_block] : p.block_table[3 * m_block];
  __syncthreads();

  const int e = block_expert, N = p.n, K = p.k;
  const long long row_bytes = static_cast<long long>(K) * S::kCodeBits / 8;
  const unsigned char* codes_e = p.codes + static_cast<long long>(e) * N * row_bytes;
  const unsigned smem_base = smem_address(smem);

  // Copy descriptors, fixed over K: each thread's A and code chunks of a stage.
  const unsigned short* a_src[kPerThreadA];
  int a_k[kPerThreadA];
  unsigned a_dst[kPerThreadA];
#pragma unroll
  for (int j = 0; j < kPerThreadA; ++j) {
    const int c = tid + j * T;
    const int r = c / (BK / 8), cc = c % (BK / 8);
    const int src = c < kChunksA ? row_src[r] : -1;
    a_src[j] = src >= 0 ? p.a + static_cast<long long>(src) * p.a_row_stride : nullptr;
    a_k[j] = cc * 8;
    a_dst[j] = c < kChunksA ? r * S::kARowBytes + cc * 16 : 0xFFFFFFFFu;
  }
  const unsigned char* b_src[kPerThreadB];
  int b_k[kPerThreadB];
  unsigned b_dst[kPerThreadB];
#pragma unroll
  for (int j = 0; j < kPerThreadB; ++j) {
    const int c = tid + j * T;
    const int r = c / S::kCodeChunksPerRow, cc = c % S::kCodeChunksPerRow;
    const bool row_ok = c < kChunksB && n0 + r < N;
    b_src[j] = row_ok ? codes_e + static_cast<long long>(n0 + r) * row_bytes : nullptr;
    b_k[j] = cc * S::kCodesPerChunk;
    b_dst[j] = c < kChunksB ? S::kAStageBytes + r * S::kCodeRowBytes + cc * 16 : 0xFFFFFFFFu;
  }
  auto issue_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    const unsigned base = smem_base + stage * S::kStageBytes;
#pragma unroll
    for (int j = 0; j < kPerThreadA; ++j) {
      if (a_dst[j] == 0xFFFFFFFFu) continue;
      const int k = k0 + a_k[j];
      const bool valid = a_src[j] != nullptr && k < K;
      cp_async_16(base + a_dst[j], valid ? a_src[j] + k : p.a, valid);
    }
#pragma unroll
    for (int j = 0; j < kPerThreadB; ++j) {
      if (b_dst[j] == 0xFFFFFFFFu) continue;
      const int k = k0 + b_k[j];
      const bool valid = b_src[j] != nullptr && k < K;
      cp_async_16(base + b_dst[j], valid ? b_src[j] + k * S::kCodeBits / 8 : p.codes, valid);
    }
  };

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
  const int lane_n0 = n0 + warp_n * S::kWarpN + g;  // + nt * 8
  const bool int4_fast = p.scaling.scale_dtype == ScaleDtypeId::kBf16;

  LaneScaleRow scale_rows[kTilesN];
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt) scale_rows[nt] = lane_scale_row<Cfg>(p.scaling, e, lane_n0 + nt * 8, N, K);
  const int group_shift = scale_group_shift<Cfg>(p.scaling), scale_bytes = scale_elem_bytes<Cfg>(p.scaling);
  LaneScale scale_ring[kStages][kTilesN];
  auto load_scales = [&](LaneScale (&slot)[kTilesN], int kt) {
    if constexpr (Cfg::kFormat == WeightFormatId::kFp8Channel) return;  // on the accumulators
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
      slot[nt] = load_lane_scale<Cfg>(scale_rows[nt], kt * BK + 16 * t, K, group_shift, scale_bytes);
  };

  float acc[kTilesM][kTilesN][4];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  // Byte addresses (shared window) of this lane's A rows and code rows within a stage.
  const unsigned a_lane = (warp_m * S::kWarpM + g) * S::kARowBytes + t * 32;
  const unsigned b_lane = S::kAStageBytes + (warp_n * S::kWarpN + g) * S::kCodeRowBytes + t * (S::kCodeRowBytes / 4);

  auto compute_stage = [&](int stage, const LaneScale (&scales)[kTilesN]) {
    const unsigned base = smem_base + stage * S::kStageBytes;
    FragmentScale decoded[kTilesN];
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) decoded[nt] = decode_lane_scale<Cfg>(scales[nt], p.scaling);
    constexpr int kWords = kFourBit ? 2 : 4;
    unsigned code_words[kTilesN][kWords];
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) {
      const unsigned address = base + b_lane + nt * 8 * S::kCodeRowBytes;
      if constexpr (kFourBit) {
        const uint2 v = lds_64(address);
        code_words[nt][0] = v.x;
        code_words[nt][1] = v.y;
      } else {
        const uint4 v = lds_128(address);
        code_words[nt][0] = v.x;
        code_words[nt][1] = v.y;
        code_words[nt][2] = v.z;
        code_words[nt][3] = v.w;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // k16 steps 2h and 2h + 1: physical k 16t + 8h + [0, 8)
      // A fragments of steps 2h and 2h + 1, built once and reused by every n tile.
      unsigned a_frag[kTilesM][2][4];
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) {
        const uint4 lo = lds_128(base + a_lane + mt * 16 * S::kARowBytes + h * 16);
        const uint4 hi = lds_128(base + a_lane + (mt * 16 + 8) * S::kARowBytes + h * 16);
        a_frag[mt][0][0] = lo.x;
        a_frag[mt][0][1] = hi.x;
        a_frag[mt][0][2] = lo.y;
        a_frag[mt][0][3] = hi.y;
        a_frag[mt][1][0] = lo.z;
        a_frag[mt][1][1] = hi.z;
        a_frag[mt][1][2] = lo.w;
        a_frag[mt][1][3] = hi.w;
      }
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt) {
        unsigned b[4];  // b[0], b[1]: step 2h; b[2], b[3]: step 2h + 1
        if constexpr (kFourBit) {
          dequant_word4<Cfg>(code_words[nt][h], decoded[nt], int4_fast, b);
        } else {
          unsigned lo[2], hi[2];
          dequant_word8<Cfg>(code_words[nt][2 * h], decoded[nt], lo);
          dequant_word8<Cfg>(code_words[nt][2 * h + 1], decoded[nt], hi);
          b[0] = lo[0];
          b[1] = lo[1];
          b[2] = hi[0];
          b[3] = hi[1];
        }
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt) {
          if constexpr (Cfg::kActBf16) {
            mma_m16n8k16_bf16(acc[mt][nt], a_frag[mt][0], b[0], b[1]);
            mma_m16n8k16_bf16(acc[mt][nt], a_frag[mt][1], b[2], b[3]);
          } else {
            mma_m16n8k16_f16(acc[mt][nt], a_frag[mt][0], b[0], b[1]);
            mma_m16n8k16_f16(acc[mt][nt], a_frag[mt][1], b[2], b[3]);
          }
        }
      }
    }
  };

  // The ring: tile kt lives in stage kt % kStages. The loop is unrolled by kStages so every
  // stage and scale-ring index is a compile-time constant.
  const int num_k_tiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k_tiles) {
      issue_stage(s, s);
      load_scales(scale_ring[s], s);
    }
    cp_async_commit();
  }
  for (int kt0 = 0; kt0 < num_k_tiles; kt0 += kStages) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      const int kt = kt0 + s;
      if (kt < num_k_tiles) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // tile kt is visible to all; every warp is done with tile kt - 1's stage
        const int next = kt + kStages - 1;
        const int next_stage = (s + kStages - 1) % kStages;
        if (next < num_k_tiles) {
          issue_stage(next_stage, next);
          load_scales(scale_ring[next_stage], next);
        }
        cp_async_commit();
        compute_stage(s, scale_ring[s]);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: accumulator scales (FP8 per channel, NVFP4 global), + bias, one rounding, 32-bit
  // stores of channel pairs to the destination rows.
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt) {
    const int n = n0 + warp_n * S::kWarpN + nt * 8 + 2 * t;
    if (n >= N) continue;
    float scale0 = 1.0f, scale1 = 1.0f;
    if constexpr (Cfg::kFormat == WeightFormatId::kFp8Channel) {
      const float* channel_scales = static_cast<const float*>(p.scaling.scales) + static_cast<long long>(e) * N;
      scale0 = channel_scales[n];
      scale1 = channel_scales[n + 1];
    } else if constexpr (Cfg::kFormat == WeightFormatId::kNvfp4) {
      const int halves = p.scaling.num_global_scales;
      // NOTE: N is even and the halves split at N / 2, so a channel pair never straddles them
      // unless N / 2 is odd; each channel then picks its own half.
      scale0 = p.scaling.global_scales[e * halves + (halves == 2 && n >= N / 2 ? 1 : 0)];
      scale1 = p.scaling.global_scales[e * halves + (halves == 2 && n + 1 >= N / 2 ? 1 : 0)];
    }
    float bias0 = 0.0f, bias1 = 0.0f;
    if (p.bias_dtype != 0) {
      bias0 = load_bias_value(p.bias, static_cast<long long>(e) * N + n, p.bias_dtype);
      bias1 = load_bias_value(p.bias, static_cast<long long>(e) * N + n + 1, p.bias_dtype);
    }
#pragma unroll
    for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int dst = row_dst[warp_m * S::kWarpM + mt * 16 + g + half * 8];
        if (dst < 0) continue;
        const unsigned packed =
            pack_half2<Cfg::kActBf16>(acc[mt][nt][2 * half] * scale0 + bias0, acc[mt][nt][2 * half + 1] * scale1 + bias1);
        *reinterpret_cast<unsigned*>(p.c + static_cast<long long>(dst) * p.c_row_stride + n) = packed;
      }
    }
  }
}

// Segment blocks of the contiguous and masked layouts: expert e owns rows
// [first_e, first_e + n_e), split into ceil(n_e / BM) blocks {e, first row, rows}, in expert
// order. One CTA; offsets (contiguous, int64 [E+1]) or counts (masked, [E] of i32/i64, expert
// e's rows start at e * rows_per_expert).
constexpr int kMaxSegmentExperts = 4096;

template <class Cfg>
__device__ __forceinline__ void moe_gemm_segments(const long long* offsets, const void* counts, int counts_int64,
                                                  long long rows_per_expert, int num_experts, int* block_table,
                                                  int* num_blocks) {
  constexpr int BM = Cfg::kBlockM;
  __shared__ int first_block[kMaxSegmentExperts + 1];
  auto rows_of = [&](int e) -> long long {
    if (offsets != nullptr) return offsets[e + 1] - offsets[e];
    // NOTE: counts come from the caller and cannot be checked on the host without a sync: a
    // count outside [0, T] is clamped so no block reaches past the expert's slab.
    const long long n = counts_int64 ? static_cast<const long long*>(counts)[e] : static_cast<const int*>(counts)[e];
    return n < 0 ? 0 : n > rows_per_expert ? rows_per_expert : n;
  };
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x)
    first_block[e + 1] = static_cast<int>((rows_of(e) + BM - 1) / BM);
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

extern "C" __global__ void __launch_bounds__(moeq_dev::MoeGemmShape<MoeGemmCfg>::kThreads) moeq_moe_gemm(moeq_dev::MoeGemmParams params) {
  moeq_dev::moe_gemm_block<MoeGemmCfg>(params);
}

extern "C" __global__ void moeq_moe_gemm_segments(const long long* offsets, const void* counts, int counts_int64,
                                                  long long rows_per_expert, int num_experts, int* block_table,
                                                  int* num_blocks) {
  moeq_dev::moe_gemm_segments<MoeGemmCfg>(offsets, counts, counts_int64, rows_per_expert, num_experts, block_table,
                                          num_blocks);
}
