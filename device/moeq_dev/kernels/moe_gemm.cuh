#pragma once
// Entry point of the quantized MoE GEMM, version 1 (mma.sync m16n8k16, 16-bit activations):
//   C[dst(r), n] = round(sum_k A[src(r), k] * W_e[n, k] + bias_e[n])
// for the rows r of each M block, whose expert e and row mapping come from the layout:
//   gather (indexed): block b has expert expert_ids[b] and slots sorted_ids[b*BM + i];
//                     src = slot / src_row_divisor, dst = slot; slots >= num_slots are padding.
//   segment (contiguous, masked): block_table[b] = {expert, first row, rows}; src = dst = row.
// W_e is read in the canonical layout (CONTRACT §4), dequantized by 16-byte chunks of codes
// into a bf16/f16 tile in shared memory, then fed to the tensor cores with ldmatrix.
// The generated source defines, before including this file:
//   struct MoeGemmCfg {
//     static constexpr moeq_dev::WeightFormatId kFormat = moeq_dev::WeightFormatId::kInt4;
//     static constexpr bool kActBf16 = true;      // else f16 (A, C and the MMA type)
//     static constexpr int kBlockM = 16, kBlockN = 128, kBlockK = 64, kThreads = 128;
//   };
// Group size, scale dtype, zero points, global scales, bias and the layout are run-time
// parameters (MoeGemmParams): they cost a few uniform branches per 16-byte chunk, and keep the
// number of compiled configs small enough for CI to compile every one for every arch.
// Host preconditions (src/cuda/moe_gemm.cpp): K % 32 == 0, N % 2 == 0, 16-byte aligned A rows
// and code rows, grid = (the largest possible number of M blocks, ceil(N / BN)): blocks past
// the device-side count exit at once, so a captured graph stays valid for any routing.
#include "moeq_dev/format/weights.cuh"
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
__device__ __forceinline__ void moe_gemm_block(const MoeGemmParams& p) {
  constexpr int BM = Cfg::kBlockM, BN = Cfg::kBlockN, BK = Cfg::kBlockK, T = Cfg::kThreads;
  // NOTE: 8 elements of padding per row make the 8 rows an ldmatrix reads start 16 bytes apart
  // modulo 128: conflict-free.
  constexpr int kStride = BK + 8;
  using Traits = WeightFormatTraits<Cfg::kFormat>;
  constexpr int kElems = Traits::kElemsPerChunk;
  constexpr int kChunksPerRowW = BK / kElems;
  constexpr int kChunksW = BN * kChunksPerRowW;
  constexpr int kChunksPerRowA = BK / 8;
  constexpr int kChunksA = BM * kChunksPerRowA;
  constexpr int kPerThreadW = (kChunksW + T - 1) / T;
  constexpr int kPerThreadA = (kChunksA + T - 1) / T;
  constexpr int kWarpsN = T / 32;
  constexpr int WN = BN / kWarpsN;
  constexpr int kTilesM = BM / 16, kTilesN = WN / 8;
  static_assert(BM % 16 == 0 && BK % 16 == 0 && T % 32 == 0, "tile shape");
  static_assert(WN % 16 == 0, "each warp covers a multiple of 16 output channels");
  static_assert(BK % kElems == 0, "a K tile holds whole 16-byte chunks of codes");

  __shared__ __align__(16) unsigned short smem_a[BM * kStride];  // (BLOCK_M, BLOCK_K)
  __shared__ __align__(16) unsigned short smem_w[BN * kStride];  // (BLOCK_N, BLOCK_K), dequantized
  __shared__ int row_src[BM];
  __shared__ int row_dst[BM];
  __shared__ int block_expert;

  const int tid = threadIdx.x;
  // NOTE: M blocks along x (up to 2^31 - 1 of them); consecutive CTAs then share a weight tile
  // (same expert, same n0) while it is hot in L2.
  const int m_block = blockIdx.x;
  const int n0 = blockIdx.y * BN;
  int num_m_blocks;
  if (p.gather) {
    num_m_blocks = *p.num_tokens_padded / BM;
  } else {
    num_m_blocks = *p.num_blocks;
  }
  if (m_block >= num_m_blocks) return;
  if (tid < BM) {
    int src = -1, dst = -1;
    if (p.gather) {
      const int slot = p.sorted_ids[m_block * BM + tid];
      if (slot < p.num_slots) {
        src = slot / p.src_row_divisor;
        dst = slot;
      }
    } else {
      const int* entry = p.block_table + 3 * m_block;
      if (tid < entry[2]) src = dst = entry[1] + tid;
    }
    row_src[tid] = src;
    row_dst[tid] = dst;
  }
  if (tid == 0) block_expert = p.gather ? p.expert_ids[m_block] : p.block_table[3 * m_block];
  __syncthreads();

  const int e = block_expert, N = p.n, K = p.k;
  const long long row_bytes = static_cast<long long>(K) * Traits::kCodeBits / 8;
  const unsigned char* codes_e = p.codes + static_cast<long long>(e) * N * row_bytes;

  uint4 a_regs[kPerThreadA];
  uint4 w_regs[kPerThreadW];
  ChunkScales w_scales[kPerThreadW];
  const uint4 zero = make_uint4(0, 0, 0, 0);

  // Global -> registers for K tile k0 (issued before the previous tile's math: the loads fly
  // while the tensor cores work).
  auto load_tile = [&](int k0) {
#pragma unroll
    for (int j = 0; j < kPerThreadA; ++j) {
      const int c = tid + j * T;
      a_regs[j] = zero;
      if (c < kChunksA) {
        const int r = c / kChunksPerRowA, k = k0 + (c % kChunksPerRowA) * 8;
        const int src = row_src[r];
        if (src >= 0 && k < K) a_regs[j] = *reinterpret_cast<const uint4*>(p.a + src * p.a_row_stride + k);
      }
    }
#pragma unroll
    for (int j = 0; j < kPerThreadW; ++j) {
      const int c = tid + j * T;
      w_regs[j] = zero;
      if (c < kChunksW) {
        const int n = n0 + c / kChunksPerRowW, k = k0 + (c % kChunksPerRowW) * kElems;
        if (n < N && k < K) {
          w_regs[j] = *reinterpret_cast<const uint4*>(codes_e + n * row_bytes + k * Traits::kCodeBits / 8);
          w_scales[j] = load_chunk_scales<Cfg>(p.scaling, e, n, k, N, K);
        }
      }
    }
  };

  // Registers -> shared memory; weights dequantized on the way.
  auto store_tile = [&](int k0) {
#pragma unroll
    for (int j = 0; j < kPerThreadA; ++j) {
      const int c = tid + j * T;
      if (c < kChunksA)
        *reinterpret_cast<uint4*>(&smem_a[(c / kChunksPerRowA) * kStride + (c % kChunksPerRowA) * 8]) = a_regs[j];
    }
#pragma unroll
    for (int j = 0; j < kPerThreadW; ++j) {
      const int c = tid + j * T;
      if (c >= kChunksW) continue;
      const int r = c / kChunksPerRowW, kc = c % kChunksPerRowW;
      const bool valid = n0 + r < N && k0 + kc * kElems < K;
      const unsigned words[4] = {w_regs[j].x, w_regs[j].y, w_regs[j].z, w_regs[j].w};
      unsigned short* dst = &smem_w[r * kStride + kc * kElems];
      if constexpr (FastBf16Dequant<Cfg>::value) {
        if (Cfg::kFormat != WeightFormatId::kInt4 || p.scaling.scale_dtype == ScaleDtypeId::kBf16) {
          dequant_chunk_bf16_fast<Cfg>(words, w_scales[j], valid, dst);
          continue;
        }
      }
#pragma unroll
      for (int q = 0; q < kElems / 8; ++q) {
        unsigned packed[4];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          float v[2];
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int i = q * 8 + h * 2 + b;
            const unsigned code = Traits::kCodeBits == 4 ? (words[i / 8] >> ((i % 8) * 4)) & 0xFu
                                                         : (words[i / 4] >> ((i % 4) * 8)) & 0xFFu;
            v[b] = valid ? dequant_code<Cfg>(code, i, w_scales[j]) : 0.0f;
          }
          packed[h] = pack_half2<Cfg::kActBf16>(v[0], v[1]);
        }
        *reinterpret_cast<uint4*>(dst + q * 8) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      }
    }
  };

  const int warp = tid / 32, lane = tid % 32;
  float acc[kTilesM][kTilesN][4];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  auto compute_tile = [&]() {
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a_frag[kTilesM][4];
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt)
        ldmatrix_x4(a_frag[mt], &smem_a[(mt * 16 + lane % 16) * kStride + kk + (lane / 16) * 8]);
#pragma unroll
      for (int np = 0; np < kTilesN / 2; ++np) {
        unsigned b[4];  // b[0], b[1]: n tile 2np (k 0-7, 8-15); b[2], b[3]: n tile 2np + 1
        ldmatrix_x4(b, &smem_w[(warp * WN + np * 16 + lane % 8 + (lane / 16) * 8) * kStride + kk + ((lane / 8) % 2) * 8]);
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt) {
          if constexpr (Cfg::kActBf16) {
            mma_m16n8k16_bf16(acc[mt][2 * np], a_frag[mt], b[0], b[1]);
            mma_m16n8k16_bf16(acc[mt][2 * np + 1], a_frag[mt], b[2], b[3]);
          } else {
            mma_m16n8k16_f16(acc[mt][2 * np], a_frag[mt], b[0], b[1]);
            mma_m16n8k16_f16(acc[mt][2 * np + 1], a_frag[mt], b[2], b[3]);
          }
        }
      }
    }
  };

  const int num_k_tiles = (K + BK - 1) / BK;
  load_tile(0);
  store_tile(0);
  __syncthreads();
  for (int kt = 0; kt < num_k_tiles; ++kt) {
    const bool more = kt + 1 < num_k_tiles;
    if (more) load_tile((kt + 1) * BK);
    compute_tile();
    __syncthreads();
    if (more) {
      store_tile((kt + 1) * BK);
      __syncthreads();
    }
  }

  // Epilogue: + bias, one rounding, 32-bit stores of channel pairs to the destination rows.
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) {
      const int n = n0 + warp * WN + nt * 8 + (lane % 4) * 2;
      if (n >= N) continue;
      float scale0 = 1.0f, scale1 = 1.0f;
      if constexpr (ScaleOnAccumulator<Cfg>::value) {
        const float* channel_scales = static_cast<const float*>(p.scaling.scales) + static_cast<long long>(e) * N;
        scale0 = channel_scales[n];
        scale1 = channel_scales[n + 1];
      }
      float bias0 = 0.0f, bias1 = 0.0f;
      if (p.bias_dtype != 0) {
        bias0 = load_bias_value(p.bias, static_cast<long long>(e) * N + n, p.bias_dtype);
        bias1 = load_bias_value(p.bias, static_cast<long long>(e) * N + n + 1, p.bias_dtype);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int dst = row_dst[mt * 16 + lane / 4 + half * 8];
        if (dst < 0) continue;
        const unsigned packed =
            pack_half2<Cfg::kActBf16>(acc[mt][nt][2 * half] * scale0 + bias0, acc[mt][nt][2 * half + 1] * scale1 + bias1);
        *reinterpret_cast<unsigned*>(p.c + dst * p.c_row_stride + n) = packed;
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

extern "C" __global__ void __launch_bounds__(MoeGemmCfg::kThreads) moeq_moe_gemm(moeq_dev::MoeGemmParams params) {
  moeq_dev::moe_gemm_block<MoeGemmCfg>(params);
}

extern "C" __global__ void moeq_moe_gemm_segments(const long long* offsets, const void* counts, int counts_int64,
                                                  long long rows_per_expert, int num_experts, int* block_table,
                                                  int* num_blocks) {
  moeq_dev::moe_gemm_segments<MoeGemmCfg>(offsets, counts, counts_int64, rows_per_expert, num_experts, block_table,
                                          num_blocks);
}
