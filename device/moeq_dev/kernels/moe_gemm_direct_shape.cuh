#pragma once
// The direct-load MoE GEMM tile's shape (kernels/moe_gemm_direct.cuh): warps, register ring depth and the
// epilogue's shared memory per Cfg with the static_asserts that bound the configs, and the e4m3 A fragment of its
// FP8-activation form.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights_fragment.cuh"

namespace moeq_dev {

template <class Cfg>
struct MoeGemmDirectShape {
  static constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = 64;
  static constexpr int kWarpsN = Cfg::kWarpsN, kWarpsK = Cfg::kWarpsK;
  static constexpr int kDepth = Cfg::kStages;  // K tiles of codes in each lane's register ring
  static constexpr int kMinCtasPerSm = Cfg::kMinCtasPerSm;
  static constexpr int kThreads = 32 * kWarpsN * kWarpsK;
  static constexpr int kTilesM = kBlockM / 8, kTilesN = kBlockN / (16 * kWarpsN);
  static constexpr int kCodeBits = WeightFormatTraits<Cfg::kFormat>::kCodeBits;
  static constexpr int kWords = kCodeBits == 4 ? 4 : 8;  // a lane's code words per 16-channel tile and K tile
  static constexpr int kAccPerThread = kTilesN * kTilesM * 4;
  static constexpr int kReduceBytes = kWarpsK > 1 ? (kThreads - kThreads / kWarpsK) * kAccPerThread * 4 : 0;
  static constexpr int kOutRowBytes = kBlockN * 2 + 16;
  static constexpr int kSmemBytes = kReduceBytes + kBlockM * kOutRowBytes;  // the epilogue only
  static_assert(Cfg::kWarpsM == 1 && Cfg::kSplitK == 1 && !Cfg::kWgmma && !Cfg::kProducer,
                "direct tiles: warps along N (and K groups) only, mma.sync, no split K, no producer");
  static_assert(kBlockM % 8 == 0 && kBlockM <= 32, "direct tiles: 8, 16, 24 or 32 tokens");
  static_assert(kBlockN % (16 * kWarpsN) == 0, "whole 16-channel tiles per warp");
  static_assert(kDepth == 2 || kDepth == 4 || kDepth == 6 || kDepth == 8, "an even ring depth of 2 to 8 K tiles");
  static_assert(!Cfg::kActE4m3 || (Cfg::kFormat == WeightFormatId::kFp8Channel && Cfg::kRowScales),
                "e4m3 activations: FP8 per-channel weights, row scales");
  // 16-byte token loads per token row and K tile: 64 k of e4m3, or 2 x 32 k of 16-bit.
  static constexpr int kTokenLoads = Cfg::kActE4m3 ? 1 : 2;
};

// The A fragment (m16n8k32 e4m3) of MMA q of a K tile from a lane's 8 code words of one 16-channel
// tile (8-bit codes as load_codes reads them): a[0] / a[2] row g, a[1] / a[3] row g + 8, at the
// physical k 16t + 8q + [0, 4) and 16t + 8q + 4 + [0, 4) (the K order of kernels/moe_gemm_direct.cuh).
// Canonical words: row g's four (physical 16t + 4j + [0, 4)), then row g + 8's. Prepared words
// (format/prepared.cuh, 8-bit): word 2s + h holds bytes (row g, k), (row g + 8, k), (row g, k + 1),
// (row g + 8, k + 1) at k = 16t + 4s + 2h, so one byte permute of words 2s and 2s + 1 gives a row's
// four bytes at 16t + 4s + [0, 4).
template <bool kPrepared>
__device__ __forceinline__ void e4m3_a_fragment(const unsigned (&words)[8], int q, unsigned (&a)[4]) {
  if constexpr (kPrepared) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // steps s = 2q + half
      const unsigned lo = words[2 * (2 * q + half)], hi = words[2 * (2 * q + half) + 1];
      a[2 * half] = __byte_perm(lo, hi, 0x6420);
      a[2 * half + 1] = __byte_perm(lo, hi, 0x7531);
    }
  } else {
    a[0] = words[2 * q];
    a[1] = words[4 + 2 * q];
    a[2] = words[2 * q + 1];
    a[3] = words[4 + 2 * q + 1];
  }
}

}  // namespace moeq_dev
