#pragma once
// e4m3 ("fn": bias 7, no inf, NaN = S.1111.111) encode and decode, bit-exact with
// reference/formats.cpp: round to nearest even, |x| >= 448 after rounding and +-inf -> +-448,
// NaN -> 0x7F with the input's sign (0xFF for a negative NaN).
// Also the generic software minifloat rounding that fp4.cuh reuses.
#include "moeq_dev/ptx/cvt_f8.cuh"

namespace moeq_dev {

// RNE-satfinite rounding of a non-NaN |x| (fp32 bits, inf allowed) to the magnitude code of a
// minifloat with kExpBits / kManBits (IEEE-style bias, subnormals), clamped to kMaxMagnitude.
// Same algorithm as the reference encoder: exact integer rounding of the fp32 significand at the
// target's quantum, carry into the exponent field included.
template <int kExpBits, int kManBits, unsigned kMaxMagnitude>
__device__ __forceinline__ unsigned round_minifloat_magnitude(unsigned abs_bits) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr int kEmin = 1 - kBias;  // exponent of the smallest normal
  const int biased = static_cast<int>(abs_bits >> 23);
  const int exponent = (biased > 1 ? biased : 1) - 127;  // fp32 subnormals share exponent -126
  const unsigned significand = (abs_bits & 0x7FFFFFu) | (biased != 0 ? 0x800000u : 0u);
  const int below_emin = kEmin - exponent > 0 ? kEmin - exponent : 0;
  const int shift = 23 - kManBits + below_emin;  // >= 20 for every format used here
  unsigned rounded = 0;
  // NOTE: significand < 2^24, so a shift above 24 leaves less than half a quantum: rounds to 0.
  if (shift <= 24) {
    const unsigned kept = significand >> shift;
    const unsigned remainder = significand & ((1u << shift) - 1u);
    const unsigned half = 1u << (shift - 1);
    rounded = kept + ((remainder > half || (remainder == half && (kept & 1u))) ? 1u : 0u);
  }
  // `rounded` keeps the implicit bit of normals, so adding the emin-relative exponent field gives
  // the code; the inf input lands far above kMaxMagnitude and saturates like any overflow.
  const unsigned exp_field = static_cast<unsigned>(exponent - kEmin > 0 ? exponent - kEmin : 0);
  const unsigned magnitude = (exp_field << kManBits) + rounded;
  return magnitude > kMaxMagnitude ? kMaxMagnitude : magnitude;
}

constexpr unsigned kE4m3MaxMagnitude = 0x7Eu;  // 448 = 1.75 * 2^8
constexpr unsigned kE4m3NanMagnitude = 0x7Fu;

// Software encoder: any arch; the reference's algorithm in integer arithmetic.
__device__ __forceinline__ unsigned f32_to_e4m3_sw(float x) {
  const unsigned bits = __float_as_uint(x);
  const unsigned sign = (bits >> 24) & 0x80u;
  const unsigned abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return sign | kE4m3NanMagnitude;
  return sign | round_minifloat_magnitude<4, 3, kE4m3MaxMagnitude>(abs_bits);
}

// Two values -> two codes, `lo` in bits [7:0] and `hi` in bits [15:8].
__device__ __forceinline__ unsigned f32x2_to_e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned codes = cvt_rn_satfinite_e4m3x2_f32(hi, lo);
  // NOTE: the instruction's NaN code is not specified to keep the sign; the reference keeps it,
  // so NaN inputs are re-encoded here (two selects, off the memory-bound critical path).
  if (lo != lo) codes = (codes & 0xFF00u) | ((__float_as_uint(lo) >> 24) & 0x80u) | kE4m3NanMagnitude;
  if (hi != hi) codes = (codes & 0x00FFu) | ((((__float_as_uint(hi) >> 24) & 0x80u) | kE4m3NanMagnitude) << 8);
  return codes;
#else
  return f32_to_e4m3_sw(lo) | (f32_to_e4m3_sw(hi) << 8);
#endif
}

// As f32x2_to_e4m3x2 for inputs that are not NaN (+-inf allowed: it saturates to +-448).
// PERF: the NaN re-encoding (two compares and two selects per pair) is left out; the MX and FP8
// token quantizers take this path only for blocks / rows their amax pass proved NaN-free.
__device__ __forceinline__ unsigned f32x2_to_e4m3x2_no_nan(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return cvt_rn_satfinite_e4m3x2_f32(hi, lo);
#else
  return f32_to_e4m3_sw(lo) | (f32_to_e4m3_sw(hi) << 8);
#endif
}

__device__ __forceinline__ unsigned f32_to_e4m3(float x) { return f32x2_to_e4m3x2(x, 0.0f) & 0xFFu; }

// Exact decode; NaN codes give a quiet NaN of the code's sign.
__device__ __forceinline__ float e4m3_to_f32(unsigned code) {
  const unsigned sign = (code & 0x80u) << 24;
  const unsigned magnitude = code & 0x7Fu;
  if (magnitude == kE4m3NanMagnitude) return __uint_as_float(sign | 0x7FC00000u);
  const unsigned exp_field = magnitude >> 3;
  const unsigned mantissa = magnitude & 7u;
  // Subnormals: mantissa * 2^-9 (exact); normals: rebias 7 -> 127 and widen the mantissa.
  const float value = exp_field == 0 ? static_cast<float>(mantissa) * 0.001953125f
                                     : __uint_as_float(((exp_field + 120u) << 23) | (mantissa << 20));
  return __uint_as_float(__float_as_uint(value) | sign);
}

}  // namespace moeq_dev
