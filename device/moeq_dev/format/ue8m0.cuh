#pragma once
// ue8m0 MX shared scales (exponent only, bias 127; code 255 is NaN), bit-exact with
// reference/formats.cpp ue8m0_scale_for.

namespace moeq_dev {

constexpr unsigned kUe8m0MaxCode = 254u;
constexpr unsigned kUe8m0NanCode = 255u;

// Code of 2^ceil(log2(amax / max_elem)), clamped to [0, 254]. amax 0 (or a ratio that underflows
// to 0) gives 0, NaN gives 255, an infinite ratio gives 254. The ratio is an IEEE fp32 division,
// as in the reference; ceil(log2) is then read off the exponent bits (exact, no log2f).
__device__ __forceinline__ unsigned ue8m0_scale_for(float amax, float max_elem) {
  if (amax != amax) return kUe8m0NanCode;
  if (amax == 0.0f) return 0u;
  const float ratio = __fdiv_rn(amax, max_elem);
  if (ratio != ratio) return kUe8m0NanCode;
  if (!(ratio > 0.0f)) return 0u;
  const unsigned bits = __float_as_uint(ratio);
  if (bits >= 0x7F800000u) return kUe8m0MaxCode;  // +inf
  const unsigned biased = bits >> 23;
  const unsigned mantissa = bits & 0x7FFFFFu;
  // Subnormal ratio m * 2^-149: ceil(log2) + 127 is 1 exactly when m > 2^22 (ratio > 2^-127),
  // else <= 0 and clamps to 0.
  if (biased == 0) return mantissa > 0x400000u ? 1u : 0u;
  // Normal: ratio = 1.m * 2^(biased - 127); a power of two keeps its exponent, else round up.
  const unsigned code = mantissa == 0 ? biased : biased + 1u;
  return code > kUe8m0MaxCode ? kUe8m0MaxCode : code;
}

// ue8m0_scale_for(amax, max_elem) without the division, for max_elem = 1.5 * 2^2 (e2m1, 6) or
// 1.75 * 2^8 (e4m3, 448), given amax's fp32 bits `a` (a 16-bit float widened: at most 11
// significant bits) in [0x05000000, 0x7F800000) (normal, finite: ratio normal, code in [1, 253]).
// amax / max_elem = (1.f / 1.5) * 2^(e - 2) (or / 1.75, 2^(e - 8)): ceil(log2) is e - 2 (e - 8)
// when 1.f <= 1.5 (1.75), else one more: adding 2^23 - 1 - 0x400000 (0x600000) carries into the
// exponent exactly when the mantissa field exceeds 0x400000 (0x600000). The IEEE ratio rounds to a
// power of two only when it is one: 1.f / 1.5 within 2^-24 of 1 needs more than 11 bits.
// PERF: 3 integer instructions instead of the fp32 division subroutine (MX quantizers).
template <bool kE2m1>
__device__ __forceinline__ unsigned ue8m0_scale_for_narrow(unsigned a) {
  return kE2m1 ? ((a + 0x3FFFFFu) >> 23) - 2u : ((a + 0x1FFFFFu) >> 23) - 8u;
}
constexpr unsigned kUe8m0NarrowMinBits = 0x05000000u;
constexpr unsigned kUe8m0NarrowEndBits = 0x7F800000u;

// 2^(code - 127); code 255 -> NaN. Code 0 is the fp32 subnormal 2^-127.
__device__ __forceinline__ float ue8m0_to_f32(unsigned code) {
  if (code == kUe8m0NanCode) return __uint_as_float(0x7FC00000u);
  return code == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(code << 23);
}

// 2^(127 - code), the exact multiplier that divides by the scale; code 254 -> subnormal 2^-127.
__device__ __forceinline__ float ue8m0_inverse_scale(unsigned code) {
  if (code == kUe8m0NanCode) return __uint_as_float(0x7FC00000u);
  return code == kUe8m0MaxCode ? __uint_as_float(0x00400000u) : __uint_as_float((254u - code) << 23);
}

}  // namespace moeq_dev
