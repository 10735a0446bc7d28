#pragma once
// Entry point of the quantized MoE GEMM, version 8 (mma.sync m16n8k16, or wgmma for kWgmma
// tiles; kProducer tiles with wgmma run the warp-specialized body of kernels/moe_gemm_ws.cuh,
// kProducer tiles without it the mma.sync body of kernels/moe_gemm_sync.cuh with a copy warp
// (MoeGemmShape::kCopyWarp), kDirect
// tiles the direct-load body of kernels/moe_gemm_direct.cuh; 16-bit activations):
//   C[dst(r), n] = round(sum_k A[src(r), k] * W_e[n, k] * accumulator scale + bias_e[n])
// for the rows r of each M block, whose expert e and row mapping come from the layout:
//   gather (indexed): block b has expert expert_ids[b] and slots sorted_ids[b*BM + i];
//                     src = slot / src_row_divisor, dst = slot; slots >= num_slots are padding.
//   segment (contiguous, masked): block_table[b] = {expert, first row, rows}; src = dst = row.
// The mma.sync body (pipeline, operand roles, K order, K groups, split K, the 64-row wgmma tiles) is
// kernels/moe_gemm_sync.cuh.
// The generated source defines, before including this file:
//   struct MoeGemmCfg {
//     static constexpr moeq_dev::WeightFormatId kFormat = moeq_dev::WeightFormatId::kInt4;
//     static constexpr bool kActBf16 = true;      // else f16 (A, C and the MMA type)
//     static constexpr int kBlockM = 16, kBlockN = 64, kWarpsM = 1, kWarpsN = 4, kWarpsK = 2,
//                          kStages = 8;  // a multiple of kWarpsK: kStages / kWarpsK steps in the ring
//     static constexpr int kSplitK = 1;              // CTAs per cluster along K (1, 2 or 4; > 1 needs sm_90)
//     static constexpr int kMinCtasPerSm = 0;        // > 0: __launch_bounds__ registers for that many CTAs per SM
//     static constexpr bool kWgmma = false;          // wgmma instead of mma.sync (sm_90a, 64x{64,128,256}/1x4x1)
//     static constexpr bool kProducer = false;       // warp-specialized: with kWgmma kernels/moe_gemm_ws.cuh, else a copy warp
//     static constexpr bool kDirect = false;         // the direct-load body (kernels/moe_gemm_direct.cuh)
//     static constexpr bool kPersistent = false;     // kernels/moe_gemm_ws.cuh: one CTA per SM loops over the tiles
//     static constexpr bool kMmaOrderTokens = false; // kernels/moe_gemm_ws.cuh: A rows in the MMA's K order (mma_order_position)
//     static constexpr bool kPreparedCodes = false;  // codes in the prepared layout (format/prepared.cuh)
//     static constexpr int kScaleDtype = 0;          // INT formats: ScaleDtypeId of the scales
//     static constexpr bool kZeroPoints = false;     // INT4: zero points given
//     static constexpr bool kRowScales = false;      // output rows times MoeGemmParams::a_row_scales
//     static constexpr bool kActE4m3 = false;        // A is e4m3 codes (direct tiles, FP8 per channel, sm_89+)
//     static constexpr bool kMxScalesAtMostTwo = false;  // MXFP4 x bf16: every scale <= 2 (cuda::gemm_folds_mx_scales)
//   };
// With prepared codes a lane reads its 32 codes of a 16-channel tile (16 per fragment row) with
// one 16-byte load (4-bit) or two (8-bit), and every 32-bit word is whole fragment registers: no
// byte permutes.
// The INT scale dtype and zero points are compile-time (each changes the per-tile scale loads);
// group size, global scales, bias and the layout are run-time parameters (MoeGemmParams): a few
// uniform branches per K tile; they keep the number of compiled configs small enough for CI to
// compile every one for every arch.
// Host preconditions (src/cuda/moe_gemm.cpp, gemm_tile_rules.cpp): K % 32 == 0, N % 2 == 0, 16-byte aligned A rows
// and code rows, 4-byte aligned C rows, dynamic shared memory = MoeGemmShape::kSmemBytes, grid
// = (the largest possible number of M blocks, ceil(N / BN), kSplitK) in clusters of (1, 1,
// kSplitK): blocks past the device-side count exit at once (a cluster's CTAs share the M block,
// so they exit together), so a captured graph stays valid for any routing.
#include "moeq_dev/kernels/moe_gemm_direct.cuh"
#include "moeq_dev/kernels/moe_gemm_sync.cuh"
#include "moeq_dev/kernels/moe_gemm_ws.cuh"
#include "moeq_dev/moe/segments.cuh"
#include "moeq_dev/ptx/grid_dependency.cuh"

namespace moeq_dev {

// The kernel body and its shape for a config: 0 the mma.sync body (kernels/moe_gemm_sync.cuh), 1 the
// warp-specialized wgmma body (kernels/moe_gemm_ws.cuh), 2 the direct-load body (kernels/moe_gemm_direct.cuh).
template <class Cfg>
constexpr int moe_gemm_body() {
  return Cfg::kDirect ? 2 : Cfg::kProducer && Cfg::kWgmma ? 1 : 0;
}
template <class Cfg, int = moe_gemm_body<Cfg>()>
struct MoeGemmKernel {
  using Shape = MoeGemmShape<Cfg>;
  static __device__ __forceinline__ void run(const MoeGemmParams& p) { moe_gemm_block<Cfg>(p); }
};
template <class Cfg>
struct MoeGemmKernel<Cfg, 1> {
  using Shape = MoeGemmWsShape<Cfg>;
  static __device__ __forceinline__ void run(const MoeGemmParams& p) { moe_gemm_ws_block<Cfg>(p); }
};
template <class Cfg>
struct MoeGemmKernel<Cfg, 2> {
  using Shape = MoeGemmDirectShape<Cfg>;
  static __device__ __forceinline__ void run(const MoeGemmParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    // NOTE: no e4m3 MMA before sm_89; the host never launches this config there (gemm_takes_e4m3).
    if constexpr (Cfg::kActE4m3) {
      __trap();
      return;
    }
#endif
    moe_gemm_direct_block<Cfg>(p);
  }
};

}  // namespace moeq_dev

// NOTE: a minimum of 0 CTAs per SM, not 1, when no cap is asked: with 1 ptxas may use up to 255
// registers and did (32x128 INT4 75 -> 99 registers, MXFP4 8x128 77 -> 96), which cost 9-16% at
// M = 256 through fewer resident CTAs (GEMM v5, bench/results/2026-11-30-h200-gemm-v5.md).
// Producer tiles ask for 1 (384 threads: 168 registers at launch, then setmaxnreg).
extern "C" __global__ void __launch_bounds__(moeq_dev::MoeGemmKernel<MoeGemmCfg>::Shape::kThreads,
                                             moeq_dev::MoeGemmKernel<MoeGemmCfg>::Shape::kMinCtasPerSm)
    moeq_moe_gemm(moeq_dev::MoeGemmParams params) {
  // Self-routed (direct tiles only; the host generates it nowhere else): the wait comes later, in moe_gemm_direct_block.
  if constexpr (moeq_dev::moe_gemm_body<MoeGemmCfg>() == 2 && moeq_dev::gemm_self_routed<MoeGemmCfg>()) {
    moeq_dev::allow_dependent_grid();
  } else {
    moeq_dev::begin_dependent_grid();
  }
  moeq_dev::MoeGemmKernel<MoeGemmCfg>::run(params);
}

extern "C" __global__ void moeq_moe_gemm_segments(const long long* offsets, const void* counts, int counts_int64,
                                                  long long rows_per_expert, int num_experts, int* block_table,
                                                  int* num_blocks, int* error_flags) {
  moeq_dev::begin_dependent_grid();
  moeq_dev::moe_gemm_segments<MoeGemmCfg>(offsets, counts, counts_int64, rows_per_expert, num_experts, block_table,
                                          num_blocks, error_flags);
}
