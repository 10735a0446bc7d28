#pragma once
// Fast dequantization to bf16 pairs for bf16 activations: a few integer and bf16x2 ops per two
// codes instead of a decode, an fp32 multiply and a conversion per code.
// PERF: GEMM v1 spent ~20 instructions per weight element and was instruction-bound at
// 18% of copy bandwidth (INT4, M = 16-64, H200); these paths take 2.5-4.5 per element.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/ptx/simd16.cuh"

namespace moeq_dev {

constexpr unsigned kBf16x2NegZero = 0x80008000u;  // fma(a, b, -0) == a * b, rounded once
constexpr unsigned kBf16x2One = 0x3F803F80u;
constexpr unsigned kF16x2One = 0x3C003C00u;

__device__ __forceinline__ unsigned bf16x2_mul(unsigned a, unsigned b) { return fma_rn_bf16x2(a, b, kBf16x2NegZero); }

__device__ __forceinline__ unsigned bf16x2_splat(unsigned short bits) { return bits | (static_cast<unsigned>(bits) << 16); }

// Pairs (e_i, e_{i+4}) of one word of eight 4-bit codes -> element order, four bf16x2 words:
// out[0] = (e0, e1), out[1] = (e2, e3), out[2] = (e4, e5), out[3] = (e6, e7).
__device__ __forceinline__ void interleave_pairs(const unsigned (&p)[4], unsigned (&out)[4]) {
  out[0] = prmt_b32(p[0], p[1], 0x5410u);
  out[1] = prmt_b32(p[2], p[3], 0x5410u);
  out[2] = prmt_b32(p[0], p[1], 0x7632u);
  out[3] = prmt_b32(p[2], p[3], 0x7632u);
}

// INT4 codes (w >> 4i) & 0x000F000F as the exact 16-bit pair (code - zp): bf16 bits 0x4300 | code
// are 128 + code and f16 bits 0x6400 | code are 1024 + code (exact), `neg_offset2` the splat of
// -(128 + zp) or -(1024 + zp) (exact), so the sum is exact too. The scale is applied by the
// caller: on the fp32 accumulators (GEMM, groups of >= 64) or one bf16 multiply (below).
template <bool kBf16>
__device__ __forceinline__ unsigned int4_pair_unscaled(unsigned shifted_word, unsigned neg_offset2) {
  const unsigned biased = and_or_b32(shifted_word, 0x000F000Fu, kBf16 ? 0x43004300u : 0x64006400u);
  return kBf16 ? fma_rn_bf16x2(biased, kBf16x2One, neg_offset2) : fma_rn_f16x2(biased, kF16x2One, neg_offset2);
}

// INT4 with the bf16 scale on the weights: one rounding in the multiply, as the fp32 path rounds
// (code - zp) * s once; `unscaled`: the scale is on the accumulators instead.
template <bool kBf16>
__device__ __forceinline__ void int4_word_to_act(unsigned w, unsigned neg_offset2, unsigned scale2, bool unscaled,
                                                 unsigned (&out)[4]) {
  unsigned p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    p[i] = int4_pair_unscaled<kBf16>(w >> (4 * i), neg_offset2);
    // NOTE: f16 pairs only come unscaled (the scale on the accumulators).
    if constexpr (kBf16) {
      if (!unscaled) p[i] = bf16x2_mul(p[i], scale2);
    }
  }
  interleave_pairs(p, out);
}

// e2m1: the three magnitude bits land on the two lowest exponent bits and the top mantissa bit
// of a bf16, which is then the e2m1 value times 2^-126 (subnormal codes included); 2^126 and
// the scale follow as two exact-or-once-rounded multiplies, or (`folded`: `scale2` is then the
// splat of scale * 2^126, FragmentScale::scale2_folded) as one, which rounds the same exact product.
__device__ __forceinline__ void e2m1_word_to_bf16(unsigned w, unsigned scale2, bool folded, unsigned (&out)[4]) {
  constexpr unsigned kTwoPow126 = 0x7E807E80u;  // bf16 2^126 in both lanes
  unsigned p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned x = (w >> (4 * i)) & 0x000F000Fu;
    const unsigned bits = ((x & 0x00070007u) << 6) | ((x & 0x00080008u) << 12);
    p[i] = folded ? bf16x2_mul(bits, scale2) : bf16x2_mul(bf16x2_mul(bits, kTwoPow126), scale2);
  }
  interleave_pairs(p, out);
}

// Two e4m3 codes (bytes lo and hi of w) -> a bf16 pair whose halves are the values times 2^-120
// (subnormals included): a sign-replicating byte permute puts each code in the low byte of its
// half with its sign above, one shift moves the magnitude to bits 10-4, one mask keeps it and
// the sign at bit 15.
// PERF: 3 integer ops per pair instead of 5-6 (two masked shifts, an or and the pair's extract).
__device__ __forceinline__ unsigned e4m3_pair_bits(unsigned w, unsigned lo, unsigned hi) {
  // NOTE: prmt selector nibble 8 + b replicates byte b's sign; the shift's spill of the low
  // half's sign copies into the high half lands on bits 3-0, which the mask clears.
  const unsigned selector = lo | ((8u + lo) << 4) | (hi << 8) | ((8u + hi) << 12);
  return (prmt_b32(w, 0u, selector) << 4) & 0x87F087F0u;
}

constexpr unsigned kBf16x2TwoPow120 = 0x7B807B80u;  // bf16 2^120 in both lanes

// e4m3: the value times 2^-120 (e4m3_pair_bits) times 2^120, exact; `scaled`: times scale2 too.
// out[0] = (e0, e1), out[1] = (e2, e3).
__device__ __forceinline__ void e4m3_word_to_bf16(unsigned w, unsigned scale2, bool scaled, unsigned (&out)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    out[i] = bf16x2_mul(e4m3_pair_bits(w, 2 * i, 2 * i + 1), kBf16x2TwoPow120);
    if (scaled) out[i] = bf16x2_mul(out[i], scale2);
  }
}

// e4m3 with the bias and the scale in one multiplier, `folded2` = splat of scale * 2^120.
__device__ __forceinline__ void e4m3_word_to_bf16_folded(unsigned w, unsigned folded2, unsigned (&out)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) out[i] = bf16x2_mul(e4m3_pair_bits(w, 2 * i, 2 * i + 1), folded2);
}

}  // namespace moeq_dev
