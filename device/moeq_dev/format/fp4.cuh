#pragma once
// e2m1 (bias 1, values {0, .5, 1, 1.5, 2, 3, 4, 6}, no inf, no NaN) encode and decode, bit-exact
// with reference/formats.cpp: RNE, |x| > 6 and +-inf -> +-6, NaN -> +6 (0x7, sign dropped).
// NOTE: cvt.rn.satfinite.e2m1x2.f32 exists only from sm_100a / sm_120a (PTX ISA 8.6), none of
// moeq's targets (sm_80, sm_89, sm_90a), and its NaN result is not the reference's +6; the
// software encoders below are exact on every arch.
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/ptx/simd16.cuh"

namespace moeq_dev {

constexpr unsigned kE2m1MaxMagnitude = 0x7u;

// Returns the 4-bit code (0..15).
// PERF: seven compares against the midpoints between neighbouring values instead of the generic
// integer rounding (about half the instructions; MXFP4 quantization is ALU-heavy). Ties go to
// the even code: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, so
// the bound is `>` above an even code and `>=` above an odd one. fp32 subnormals compare exactly
// (no FTZ), +-inf passes every bound (saturates to 6); NaN is caught first.
__device__ __forceinline__ unsigned f32_to_e2m1(float x) {
  const float a = fabsf(x);
  if (a != a) return kE2m1MaxMagnitude;
  const unsigned magnitude = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                             (a >= 3.5f) + (a > 5.0f);
  return ((__float_as_uint(x) >> 28) & 0x8u) | magnitude;
}

// The generic integer path, kept as the readable statement of the rule (and tested against it).
__device__ __forceinline__ unsigned f32_to_e2m1_sw(float x) {
  const unsigned bits = __float_as_uint(x);
  const unsigned abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return kE2m1MaxMagnitude;
  return ((bits >> 28) & 0x8u) | round_minifloat_magnitude<2, 1, kE2m1MaxMagnitude>(abs_bits);
}

// Two values -> one byte, `lo` in the low nibble (element 2j of a packed row).
__device__ __forceinline__ unsigned f32x2_to_e2m1x2(float lo, float hi) {
  return f32_to_e2m1(lo) | (f32_to_e2m1(hi) << 4);
}

// Eight bf16 values (two per 32-bit word, element 2j in the low half) times 2^(127 - code) ->
// eight e2m1 codes (nibble j = element j), for a 32-element MX block whose amax is finite with
// code in [8, 253] (every |x| * 2^(127 - code) <= 6; inv2 = 2^(127 - code) as bf16 in both lanes).
// Bit-exact with f32x2_to_e2m1x2(x * inv, ...) under those conditions:
//   y = |x| * inv is exact in bf16 (a power-of-two scaling of a bf16; a result below 2^-126 may
//   lose bits but its code is 0 either way, and a subnormal x gives y <= 2^-7 at code >= 8);
//   RNE to the e2m1 grid is one bf16 addition of a magic M = 2^(6 + binade): quantum 0.5 below 2,
//   1 in [2, 4), 2 in [4, 6] (M = 64, 128, 256, the bf16 ulp at M is the e2m1 quantum), so
//   r = RN(y + M) = M + k * quantum with k = RNE(y / quantum), ties to even k = even code;
//   code = k + 2 * binade, read off the bits: r - E + (E >> 6) - 0x3FE per 16-bit lane, with
//   E = exponent bits of max(y, 1) and M = E + (6 << 7).
// PERF: 16-bit lanes, two elements per instruction: 58 SASS instructions per 8 elements (sm_90a),
// scale and stores included, against about 20 per element for the compare ladder with NaN checks;
// MXFP4 went from 31% to 81-86% of copy bandwidth at M = 4096 (docs/perf-notes.md).
__device__ __forceinline__ unsigned bf16x8_to_e2m1x8(const uint4& w, unsigned inv2) {
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  unsigned c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned y = fma_rn_bf16x2(words[i] & 0x7FFF7FFFu, inv2, 0x80008000u);  // + (-0): exact
    const unsigned e = max_bf16x2(y, 0x3F803F80u) & 0x7F807F80u;
    const unsigned r = fma_rn_bf16x2(y, 0x3F803F80u, e + 0x03000300u);
    // Lanes: 0x3FE + magnitude code, plus the sign at bit 3 (lanes stay below 2^16).
    c[i] = r - e + (e >> 6) + ((words[i] >> 12) & 0x00080008u);
  }
  // Bytes [e0, e2, e1, e3] after removing the 0x3FE offsets (exact modulo 2^32), then
  // p | p >> 12 brings e1, e3 next to e0, e2: the low 16 bits are nibbles e0 e1 e2 e3.
  constexpr unsigned kOffset = 0x03FE03FEu + (0x03FE03FEu << 8);
  unsigned p01 = c[0] + (c[1] << 8) - kOffset;
  unsigned p23 = c[2] + (c[3] << 8) - kOffset;
  p01 |= p01 >> 12;
  p23 |= p23 >> 12;
  return __byte_perm(p01, p23, 0x5410u);
}

// Eight e2m1 codes (nibble i = element i) -> eight e4m3 codes (byte i of {.x, .y} = element i) of
// the values times 2^-6, exactly: the magnitude bits e1 e0 m moved to e4m3 bits 4..2 and the sign
// to bit 7 read as e4m3 give 2^(e - 7) (1 + m / 2) = 2^-6 x 2^(e - 1) (1 + m / 2) for e >= 1, and
// the subnormal m 2^-7 = 2^-6 x 0.5 m for e = 0. The FP8 MMAs take MXFP4 weights this way, the
// 2^6 joining the block scale.
__device__ __forceinline__ uint2 e2m1x8_to_e4m3x8_scaled(unsigned w) {
  const unsigned even = w & 0x0F0F0F0Fu;         // elements 0, 2, 4, 6 in bytes 0..3
  const unsigned odd = (w >> 4) & 0x0F0F0F0Fu;   // elements 1, 3, 5, 7
  const unsigned even8 = ((even & 0x08080808u) << 4) | ((even & 0x07070707u) << 2);
  const unsigned odd8 = ((odd & 0x08080808u) << 4) | ((odd & 0x07070707u) << 2);
  return make_uint2(__byte_perm(even8, odd8, 0x5140u), __byte_perm(even8, odd8, 0x7362u));
}

// Exact decode of the low 4 bits.
__device__ __forceinline__ float e2m1_to_f32(unsigned code) {
  const unsigned exp_field = (code >> 1) & 3u;
  const unsigned mantissa = code & 1u;
  // exp 0: 0 or 0.5; else (2 + m) * 2^(e - 2).
  const float magnitude = exp_field == 0 ? 0.5f * static_cast<float>(mantissa)
                                         : static_cast<float>(2u + mantissa) *
                                               __uint_as_float((exp_field + 125u) << 23);
  return (code & 8u) ? -magnitude : magnitude;
}

}  // namespace moeq_dev
