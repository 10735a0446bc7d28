#pragma once
// One ring stage's products in the mma.sync body (kernels/moe_gemm_sync.cuh): this warp's codes of the
// stage dequantized straight into A fragments (format/weights_fragment.cuh) and multiplied by the
// block's tokens, for prepared or canonical codes. The body passes its lane geometry and its two
// operand steps: lane_channel(nt, r) (the channel of fragment rows g + 8 r of channel tile nt),
// load_token_fragments(base, h, tok) (the token B fragments of k16 steps 2h and 2h + 1; nothing with
// wgmma) and multiply(dst, a, base, step, tok, q) (mma.sync per token tile, or one wgmma).
// NOTE: the three by reference: taken by value, 14 of the 797 kernels of scripts/dev/lists/sync_tiles.txt (the
// 64-row wgmma tiles) changed, as many instructions but most placed otherwise; by reference the machine code is
// that of the body's own lambdas (session 44).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights_fragment.cuh"
#include "moeq_dev/ptx/cp_async.cuh"

namespace moeq_dev {

// Prepared codes: per 16-channel tile one (4-bit) or two (8-bit) 16-byte loads give this lane's
// words; word pairs are A-fragment registers as they are. Canonical codes: per fragment row (channel)
// one 8-byte (4-bit) or 16-byte (8-bit) load of the lane's 16 codes at b_lane (the stage's code rows,
// this lane's quarter).
// PERF: `path` is a constant at each call site in the body, so the inlined copies have no branch
// per pair: a run-time flag there split the dequantization into small blocks the scheduler
// could not interleave with the MMAs (INT4 5-7% slower than canonical codes, run 10).
// DequantPath::kFolded: every MX scale of this warp's tile is at most 2, so the e2m1 bias
// 2^126 and the scale are one bf16 multiplier (FragmentScale::scale2_folded): one multiply per
// pair, same exact values.
template <class Cfg, class S, class LaneChannel, class LoadTokens, class Multiply>
__device__ __forceinline__ void multiply_stage(DequantPath path, unsigned base, int lane, unsigned b_lane,
                                               const FragmentScale (&decoded)[S::kTilesN][2],
                                               float (&dst)[S::kTilesN][S::kTilesM][4], const LaneChannel& lane_channel,
                                               const LoadTokens& load_token_fragments, const Multiply& multiply) {
  constexpr int kTilesN = S::kTilesN, kTilesM = S::kTilesM;
  constexpr bool kFourBit = S::kCodeBits == 4;
  if constexpr (Cfg::kPreparedCodes) {
    constexpr int kPreparedBlockBytes = S::kCodeBits * 128;  // 16 channels x 64 k
    constexpr int kWords = kFourBit ? 4 : 8;
    unsigned words[kTilesN][kWords];
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) {
      const unsigned block = base + S::kAStageBytes + (lane_channel(nt, 0) / 16) * kPreparedBlockBytes + lane * 16;
      const uint4 v = lds_128(block);
      words[nt][0] = v.x;
      words[nt][1] = v.y;
      words[nt][2] = v.z;
      words[nt][3] = v.w;
      if constexpr (!kFourBit) {
        const uint4 u = lds_128(block + 512);
        words[nt][4] = u.x;
        words[nt][5] = u.y;
        words[nt][6] = u.z;
        words[nt][7] = u.w;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned tok[kTilesM][4];
      load_token_fragments(base, h, tok);
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          unsigned a[4];
          prepared_a_fragment<Cfg>(words[nt], 2 * h + q, decoded[nt], path, a);
          multiply(dst[nt], a, base, 2 * h + q, tok, q);
        }
      }
    }
  } else {
    constexpr int kWords = kFourBit ? 2 : 4;
    unsigned code_words[kTilesN][2][kWords];
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const unsigned address = base + b_lane + lane_channel(nt, r) * S::kCodeRowBytes;
        if constexpr (kFourBit) {
          const uint2 v = lds_64(address);
          code_words[nt][r][0] = v.x;
          code_words[nt][r][1] = v.y;
        } else {
          const uint4 v = lds_128(address);
          code_words[nt][r][0] = v.x;
          code_words[nt][r][1] = v.y;
          code_words[nt][r][2] = v.z;
          code_words[nt][r][3] = v.w;
        }
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned tok[kTilesM][4];
      load_token_fragments(base, h, tok);
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt) {
        unsigned a[2][4];
        canonical_a_fragments<Cfg>(code_words[nt][0], code_words[nt][1], h, decoded[nt], path, a);
        multiply(dst[nt], a[0], base, 2 * h, tok, 0);
        multiply(dst[nt], a[1], base, 2 * h + 1, tok, 1);
      }
    }
  }
}

}  // namespace moeq_dev
