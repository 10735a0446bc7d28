#pragma once
// e2m1 (bias 1, values {0, .5, 1, 1.5, 2, 3, 4, 6}, no inf, no NaN) encode and decode, bit-exact
// with reference/formats.cpp: RNE, |x| > 6 and +-inf -> +-6, NaN -> +6 (0x7, sign dropped).
// NOTE: cvt.rn.satfinite.e2m1x2.f32 exists only from sm_100a / sm_120a (PTX ISA 8.6), none of
// moeq's targets (sm_80, sm_89, sm_90a), and its NaN result is not the reference's +6; the
// software encoders below are exact on every arch.
#include "moeq_dev/format/fp8.cuh"

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
