#pragma once
// A lane's group scales for a pass of 4 K tiles (256 k) in one load per row, for the direct-load
// body (kernels/moe_gemm_direct.cuh), instead of one load per row and K tile.
// PERF: GEMM v18 (docs/perf-notes.md, bench/results/2026-12-01-h200-gemm-v18.md): with them INT4
// Qwen3-30B-A3B GEMM1 M = 16 / 64 runs 40.7-41.1 / 58.6-58.9 us against 45.4-45.5 / 65.5-65.6
// (77 / 81% of copy), DeepSeek-V3 M = 16 94% against 85%. MXFP4 read the same way (8 bytes per
// row and pass, each lane's byte picked per tile) was 7-17% slower and keeps its per-tile loads;
// not profiled why (its 8-tile loop, with both the folded and the weights paths, is 2659
// instructions against 688 for the per-tile ring's 2 tiles).
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights_fragment.cuh"

namespace moeq_dev {

// Formats whose direct tiles read scales per pass: INT4 with 16-bit scales and no zero points, in
// groups of 128 (checked at run time), passes of 4 K tiles: a row's 2 groups of a pass are one 4-byte
// word. (INT8 could too; not measured, so it keeps the per-tile loads.) MX formats on the 4-deep ring,
// passes of 2 K tiles (one per group of 2 tiles): a row's groups 2 kt0 .. 2 kt0 + 3 are one 4-byte
// word, each lane's byte picked per tile. The MX 2-deep ring keeps per-tile loads: there each pass
// word's first use came after the next tile's loads and waited for them too (GEMM v19, call 1: 3-7%
// slower); on the 4-deep ring the MXFP4 tile gained 7-9% (GEMM v20, call 1).
template <class Cfg>
struct PassScalable {
  static constexpr bool kMx = Cfg::kFormat == WeightFormatId::kMxfp4 || Cfg::kFormat == WeightFormatId::kMxfp8;
  static constexpr bool value = kMx || (Cfg::kFormat == WeightFormatId::kInt4 && !ScaleStorage<Cfg>::kZeroPoints &&
                                        ScaleStorage<Cfg>::kDtype != ScaleDtypeId::kF32);
  static constexpr int kTiles = kMx ? 2 : 4;  // K tiles per pass
};

// The scale words of one pass: w[nt][r] holds row (nt, r)'s two groups.
template <int kTilesN>
struct PassScaleWords {
  unsigned w[kTilesN][2];
};

// Whether this launch can take its scales per pass (uniform): groups of exactly 128 and whole
// passes (K % 256 == 0, so every row's pass is one aligned word) on 4-byte aligned scales.
template <class Cfg>
__device__ __forceinline__ bool pass_scales_fit(const WeightScaling& w, int K, int group_shift) {
  const unsigned long long base = reinterpret_cast<unsigned long long>(w.scales);
  if constexpr (PassScalable<Cfg>::kMx) return K % 128 == 0 && (base & 3) == 0;
  return group_shift == 7 && K % 256 == 0 && (base & 3) == 0;
}

// The pass starting at K tile kt0 (a multiple of 4): groups kt0 / 2 and kt0 / 2 + 1 of each row.
template <class Cfg, int kTilesN>
__device__ __forceinline__ void load_pass_scales(const LaneScaleRows<Cfg, kTilesN>& rows, int kt0,
                                                 PassScaleWords<kTilesN>& pass) {
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int offset = PassScalable<Cfg>::kMx ? 2 * kt0 : kt0;  // MX: group 2 kt0; INT g128 bf16: group kt0 / 2
      pass.w[nt][r] = __ldg(reinterpret_cast<const unsigned*>(rows.rows[nt][r].scales + offset));
    }
}

// Tile q (0-3) of the pass, as LaneScaleRows::load gives it: tiles 0-1 take the low half, 2-3 the
// high (decode_lane_scale reads only the low 16 bits).
template <class Cfg, int kTilesN>
__device__ __forceinline__ void pass_tile_scales(const PassScaleWords<kTilesN>& pass, int q, int mx_lane_shift,
                                                 LaneScale (&slot)[kTilesN][2]) {
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if constexpr (PassScalable<Cfg>::kMx) {
        slot[nt][r].bits = (pass.w[nt][r] >> (16 * q + mx_lane_shift)) & 0xFFu;  // byte 2 q + t / 2
      } else {
        slot[nt][r].bits = q < 2 ? pass.w[nt][r] : pass.w[nt][r] >> 16;
      }
    }
}

// MXFP4 with bf16 activations (MxFoldable) on a pass word: each row's folded multipliers 2^(b - 1)
// of the pass's 2 tiles (this lane's bytes t / 2 and 2 + t / 2) as the two bf16 halves of one word,
// and whether every scale of the warp's pass folds (b <= 128), voted once per pass where
// multiply_scaled_tile votes per tile. The halves are decode_lane_scale's scale2_folded bits.
template <int kTilesN>
struct PassFoldedScales {
  unsigned halves[kTilesN][2];  // tile 0 in the low half, tile 1 in the high
  bool all_foldable;
};

template <int kTilesN>
__device__ __forceinline__ PassFoldedScales<kTilesN> fold_pass_scales(const PassScaleWords<kTilesN>& pass,
                                                                      int mx_lane_shift) {
  PassFoldedScales<kTilesN> f;
  unsigned over = 0;
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const unsigned b2 = (pass.w[nt][r] >> mx_lane_shift) & 0x00FF00FFu;  // tile 0's byte low, tile 1's high
      // NOTE: b + 126 <= 381, so neither half carries into the other; bf16 exponent field b + 126.
      f.halves[nt][r] = b2 * 128u + 126u * 0x800080u;
      over |= b2 + 127u * 0x10001u;  // bit 8 of a half: b + 127 > 255, i.e. b > 128
    }
  f.all_foldable = __all_sync(0xFFFFFFFFu, (over & 0x01000100u) == 0u);
  return f;
}

// Tile q (0 or 1) of the pass: the folded multiplier splat over both halves.
template <int kTilesN>
__device__ __forceinline__ void pass_tile_folded(const PassFoldedScales<kTilesN>& f, int q,
                                                 FragmentScale (&decoded)[kTilesN][2]) {
#pragma unroll
  for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // NOTE: a 16-bit move pair rather than a byte permute, so ptxas can take the half as an
      // operand selector of the multiply (.H0_H0 / .H1_H1) instead of a PRMT per use.
      unsigned splat;
      if (q == 0) {
        asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tmov.b32 %0, {lo, lo};\n\t}" : "=r"(splat) : "r"(f.halves[nt][r]));
      } else {
        asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tmov.b32 %0, {hi, hi};\n\t}" : "=r"(splat) : "r"(f.halves[nt][r]));
      }
      decoded[nt][r].scale2_folded = splat;
    }
}

}  // namespace moeq_dev
