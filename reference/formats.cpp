#include "reference/formats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace moeq::ref {
namespace {

enum class SpecialValues {
  kIeee,         // all-ones exponent: zero mantissa = inf, otherwise NaN
  kAllOnesNan,   // only the all-ones code is NaN, no inf (OCP e4m3 "fn")
  kNone,         // every code is finite (e2m1)
};

enum class Overflow { kToInf, kSaturate };

struct MinifloatFormat {
  int exp_bits;
  int man_bits;
  int bias;
  SpecialValues specials;
  Overflow overflow;
  uint32_t nan_magnitude;  // code an encoded NaN gets, before its sign is applied
  bool nan_keeps_sign;

  int total_bits() const { return exp_bits + man_bits; }
  uint32_t sign_bit() const { return 1u << total_bits(); }
  uint32_t magnitude_mask() const { return sign_bit() - 1; }
  uint32_t exp_all_ones() const { return (1u << exp_bits) - 1; }
  uint32_t mantissa_mask() const { return (1u << man_bits) - 1; }
  int min_normal_exponent() const { return 1 - bias; }

  uint32_t max_finite_magnitude() const {
    switch (specials) {
      case SpecialValues::kIeee:
        return (exp_all_ones() << man_bits) - 1;
      case SpecialValues::kAllOnesNan:
        return magnitude_mask() - 1;
      case SpecialValues::kNone:
        break;
    }
    return magnitude_mask();
  }
  uint32_t inf_magnitude() const { return exp_all_ones() << man_bits; }
};

// NOTE: NaN encodes to 0x7FFF, sign dropped, for both: what cvt.rn.{bf16,f16}.f32 produce on
// sm_90 (measured on the H200), so GPU outputs can be compared with the reference bit for bit.
constexpr MinifloatFormat kBf16{8, 7, 127, SpecialValues::kIeee, Overflow::kToInf, 0x7FFF, false};
constexpr MinifloatFormat kF16{5, 10, 15, SpecialValues::kIeee, Overflow::kToInf, 0x7FFF, false};
constexpr MinifloatFormat kE4m3{4, 3, 7, SpecialValues::kAllOnesNan, Overflow::kSaturate, 0x7F, true};
constexpr MinifloatFormat kE5m2{5, 2, 15, SpecialValues::kIeee, Overflow::kSaturate, 0x7F, true};
constexpr MinifloatFormat kE2m1{2, 1, 1, SpecialValues::kNone, Overflow::kSaturate, 0x7, false};

constexpr uint32_t kF32SignBit = 0x80000000u;
constexpr uint32_t kF32ExpMask = 0x7F800000u;
constexpr uint32_t kF32ManMask = 0x007FFFFFu;
constexpr uint32_t kF32CanonicalNan = 0x7FC00000u;
constexpr int kF32ManBits = 23;
constexpr int kF32Bias = 127;

bool is_nan_code(const MinifloatFormat& f, uint32_t magnitude) {
  switch (f.specials) {
    case SpecialValues::kIeee:
      return (magnitude >> f.man_bits) == f.exp_all_ones() && (magnitude & f.mantissa_mask()) != 0;
    case SpecialValues::kAllOnesNan:
      return magnitude == f.magnitude_mask();
    case SpecialValues::kNone:
      break;
  }
  return false;
}

bool is_inf_code(const MinifloatFormat& f, uint32_t magnitude) {
  return f.specials == SpecialValues::kIeee && magnitude == f.inf_magnitude();
}

float decode(const MinifloatFormat& f, uint32_t code) {
  const bool negative = (code & f.sign_bit()) != 0;
  const uint32_t magnitude = code & f.magnitude_mask();
  const uint32_t mantissa = magnitude & f.mantissa_mask();
  if (is_nan_code(f, magnitude)) {
    return std::bit_cast<float>((negative ? kF32SignBit : 0u) | kF32CanonicalNan);
  }
  float value;
  if (is_inf_code(f, magnitude)) {
    value = std::numeric_limits<float>::infinity();
  } else {
    const uint32_t biased_exp = magnitude >> f.man_bits;
    // NOTE: every value of these formats is representable in fp32, so ldexp is exact.
    value = biased_exp == 0
                ? std::ldexp(static_cast<float>(mantissa), f.min_normal_exponent() - f.man_bits)
                : std::ldexp(static_cast<float>(mantissa | (1u << f.man_bits)),
                             static_cast<int>(biased_exp) - f.bias - f.man_bits);
  }
  return negative ? -value : value;
}

uint64_t shift_right_rne(uint64_t value, int shift) {
  if (shift == 0) return value;
  shift = std::min(shift, 62);
  const uint64_t kept = value >> shift;
  const uint64_t remainder = value & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  const bool round_up = remainder > half || (remainder == half && (kept & 1) != 0);
  return kept + (round_up ? 1 : 0);
}

uint32_t encode(const MinifloatFormat& f, float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits & kF32SignBit) ? f.sign_bit() : 0u;
  const uint32_t abs_bits = bits & ~kF32SignBit;

  if (abs_bits > kF32ExpMask) return (f.nan_keeps_sign ? sign : 0u) | f.nan_magnitude;

  const uint32_t overflow_magnitude =
      f.overflow == Overflow::kSaturate ? f.max_finite_magnitude() : f.inf_magnitude();
  if (abs_bits == kF32ExpMask) return sign | overflow_magnitude;

  const int f32_biased_exp = static_cast<int>(abs_bits >> kF32ManBits);
  const uint32_t f32_mantissa = abs_bits & kF32ManMask;
  // |x| = significand * 2^(exponent - 23); fp32 subnormals have exponent -126 and no implicit bit.
  const int exponent = std::max(f32_biased_exp, 1) - kF32Bias;
  const uint64_t significand = f32_mantissa | (f32_biased_exp != 0 ? (1u << kF32ManBits) : 0u);

  // Quantum of the target format at this magnitude: 2^(max(exponent, emin) - man_bits).
  const int emin = f.min_normal_exponent();
  const int shift = kF32ManBits - f.man_bits + std::max(emin - exponent, 0);
  const uint64_t rounded = shift_right_rne(significand, shift);
  // NOTE: rounded keeps the implicit bit for normals, so adding it to the exponent field
  // (emin-relative) yields the biased code; a carry out of the mantissa bumps the exponent,
  // and a subnormal rounding up to 2^man_bits lands exactly on the smallest normal.
  const uint64_t magnitude =
      (static_cast<uint64_t>(std::max(exponent - emin, 0)) << f.man_bits) + rounded;

  if (magnitude > f.max_finite_magnitude()) return sign | overflow_magnitude;
  return sign | static_cast<uint32_t>(magnitude);
}

}  // namespace

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
uint16_t f32_to_bf16(float x) { return static_cast<uint16_t>(encode(kBf16, x)); }

float f16_to_f32(uint16_t bits) { return decode(kF16, bits); }
uint16_t f32_to_f16(float x) { return static_cast<uint16_t>(encode(kF16, x)); }

float e4m3_to_f32(uint8_t code) { return decode(kE4m3, code); }
uint8_t f32_to_e4m3(float x) { return static_cast<uint8_t>(encode(kE4m3, x)); }

float e5m2_to_f32(uint8_t code) { return decode(kE5m2, code); }
uint8_t f32_to_e5m2(float x) { return static_cast<uint8_t>(encode(kE5m2, x)); }

float e2m1_to_f32(uint8_t code) { return decode(kE2m1, code & 0xFu); }
uint8_t f32_to_e2m1(float x) { return static_cast<uint8_t>(encode(kE2m1, x)); }

float ue8m0_to_f32(uint8_t code) {
  if (code == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

uint8_t ue8m0_scale_for(float amax, float max_elem) {
  constexpr int kBias = 127;
  constexpr int kMaxCode = 254;
  if (std::isnan(amax)) return 255;
  if (amax == 0.0f) return 0;
  const float ratio = amax / max_elem;
  if (std::isnan(ratio)) return 255;
  if (!(ratio > 0.0f)) return 0;
  if (std::isinf(ratio)) return kMaxCode;
  int exponent = 0;
  const float fraction = std::frexp(ratio, &exponent);  // ratio = fraction * 2^exponent, fraction in [0.5, 1)
  const int ceil_log2 = fraction == 0.5f ? exponent - 1 : exponent;
  return static_cast<uint8_t>(std::clamp(ceil_log2 + kBias, 0, kMaxCode));
}

}  // namespace moeq::ref
