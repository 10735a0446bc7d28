#include "reference/formats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace moeq::ref {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFltMax = std::numeric_limits<float>::max();

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }
float next_up(float x) { return std::nextafter(x, kInf); }
float next_down(float x) { return std::nextafter(x, -kInf); }
float toward_zero(float x) { return std::nextafter(x, 0.0f); }

// Field layout of one format, used only by the test's own independent oracles.
struct Layout {
  int exp_bits;
  int man_bits;
  int bias;
  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
};
constexpr Layout kBf16Layout{8, 7, 127};
constexpr Layout kF16Layout{5, 10, 15};
constexpr Layout kE4m3Layout{4, 3, 7};
constexpr Layout kE5m2Layout{5, 2, 15};
constexpr Layout kE2m1Layout{2, 1, 1};

// Value of a code read as a plain sign/exponent/fraction number, ignoring inf/NaN conventions:
// (implicit + fraction / 2^m) * 2^(max(e, 1) - bias).
long double field_value(const Layout& l, uint32_t code) {
  const uint32_t magnitude = code & (l.sign_bit() - 1);
  const uint32_t exponent_field = magnitude >> l.man_bits;
  const uint32_t fraction_field = magnitude & ((1u << l.man_bits) - 1);
  const long double fraction =
      static_cast<long double>(fraction_field) / powl(2.0L, static_cast<long double>(l.man_bits));
  const long double significand = (exponent_field == 0 ? 0.0L : 1.0L) + fraction;
  const int exponent = std::max<int>(static_cast<int>(exponent_field), 1) - l.bias;
  const long double value = significand * powl(2.0L, static_cast<long double>(exponent));
  return (code & l.sign_bit()) ? -value : value;
}

// Round-to-nearest-even oracle: binary search for the bracketing pair of codes among the
// ascending non-negative magnitudes, then compare distances in long double (exact here).
// `magnitudes[i]` is the value of code i; the last entry is one step beyond the largest finite
// value, which is where the format overflows.
struct RneOracle {
  std::vector<long double> magnitudes;
  uint32_t sign_bit;
  uint32_t overflow_code;  // code written for magnitudes that round to the last entry or beyond

  RneOracle(const Layout& l, uint32_t beyond_max_code, uint32_t overflow)
      : sign_bit(l.sign_bit()), overflow_code(overflow) {
    for (uint32_t c = 0; c <= beyond_max_code; ++c) magnitudes.push_back(field_value(l, c));
  }

  uint32_t round(float x) const {
    const uint32_t sign = std::signbit(x) ? sign_bit : 0u;
    const long double a = std::fabs(static_cast<long double>(x));
    const auto above = std::upper_bound(magnitudes.begin(), magnitudes.end(), a);
    if (above == magnitudes.end()) return sign | overflow_code;
    const uint32_t lo = static_cast<uint32_t>(above - magnitudes.begin()) - 1;
    const long double below_gap = a - magnitudes[lo];
    const long double above_gap = magnitudes[lo + 1] - a;
    uint32_t chosen = lo;
    if (above_gap < below_gap || (above_gap == below_gap && (lo & 1u) != 0)) chosen = lo + 1;
    if (chosen + 1 == magnitudes.size()) return sign | overflow_code;
    return sign | chosen;
  }
};

// A mix of uniformly random fp32 bit patterns and patterns whose exponent lies near the range of
// the narrow formats, so both the wide and the interesting parts of the domain are hit.
std::vector<float> random_floats(size_t count, uint32_t seed, int low_exp, int high_exp) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<int> exponent(low_exp + 127, high_exp + 127);
  std::vector<float> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t b = any_bits(rng);
    if (i % 2 == 1) {
      b = (b & 0x807FFFFFu) | (static_cast<uint32_t>(std::max(exponent(rng), 0)) << 23);
    }
    out.push_back(float_of(b));
  }
  return out;
}

// Shared checks for formats whose positive codes 0..max_code are finite and ascending.
using Decoder = std::function<float(uint32_t)>;
using Encoder = std::function<uint32_t(float)>;

void expect_rne_between_adjacent_codes(const Layout& l, uint32_t max_code, const Decoder& decode,
                                       const Encoder& encode) {
  for (uint32_t lo = 0; lo < max_code; ++lo) {
    const uint32_t hi = lo + 1;
    const double mid_exact = (static_cast<double>(decode(lo)) + decode(hi)) / 2;
    const float mid = static_cast<float>(mid_exact);
    ASSERT_EQ(static_cast<double>(mid), mid_exact) << "midpoint not an fp32 value, code " << lo;
    const uint32_t even = (lo & 1u) == 0 ? lo : hi;
    for (const uint32_t sign : {0u, l.sign_bit()}) {
      const float s = sign ? -1.0f : 1.0f;
      EXPECT_EQ(encode(s * mid), sign | even) << "tie between codes " << lo << ", " << hi;
      EXPECT_EQ(encode(s * toward_zero(mid)), sign | lo) << "below tie, code " << lo;
      EXPECT_EQ(encode(s * next_up(mid)), sign | hi) << "above tie, code " << lo;
    }
  }
}

void expect_matches_oracle(const RneOracle& oracle, const std::vector<float>& xs,
                           const Encoder& encode) {
  int failures = 0;
  for (const float x : xs) {
    if (std::isnan(x) || std::isinf(x)) continue;
    const uint32_t expected = oracle.round(x);
    const uint32_t got = encode(x);
    if (got != expected) {
      ADD_FAILURE() << std::hex << "x bits 0x" << bits_of(x) << " got 0x" << got << " want 0x"
                    << expected;
      if (++failures > 10) return;
    }
  }
}

// ---------------------------------------------------------------- bf16

uint32_t bf16_encode(float x) { return f32_to_bf16(x); }
float bf16_decode(uint32_t c) { return bf16_to_f32(static_cast<uint16_t>(c)); }

TEST(FormatsBf16, DecodeIsTheUpperHalfOfFp32) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const float v = bf16_decode(c);
    const uint32_t magnitude = c & 0x7FFF;
    if (magnitude > 0x7F80) {
      ASSERT_TRUE(std::isnan(v)) << c;
    } else if (magnitude == 0x7F80) {
      ASSERT_EQ(v, (c & 0x8000) ? -kInf : kInf) << c;
    } else {
      ASSERT_EQ(static_cast<long double>(v), field_value(kBf16Layout, c)) << c;
    }
    ASSERT_EQ(bits_of(v) >> 16, c) << c;
    ASSERT_EQ(bits_of(v) & 0xFFFF, 0u) << c;
  }
}

TEST(FormatsBf16, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const bool is_nan = (c & 0x7FFF) > 0x7F80;
    const uint32_t expected = is_nan ? 0x7FFF : c;
    ASSERT_EQ(bf16_encode(bf16_decode(c)), expected) << std::hex << c;
  }
}

TEST(FormatsBf16, TiesRoundToEvenBetweenEveryAdjacentPair) {
  expect_rne_between_adjacent_codes(kBf16Layout, 0x7F7F, bf16_decode, bf16_encode);
}

TEST(FormatsBf16, OverflowGoesToInfinity) {
  const float max = bf16_decode(0x7F7F);
  const float mid_to_2_128 = float_of(0x7F7F8000);  // max + half an ulp
  EXPECT_EQ(f32_to_bf16(max), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(toward_zero(mid_to_2_128)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(mid_to_2_128), 0x7F80);  // tie: 0x7F7F is odd
  EXPECT_EQ(f32_to_bf16(kFltMax), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-kFltMax), 0xFF80);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xFF80);
}

TEST(FormatsBf16, NanBecomesCanonicalQuietNanKeepingSign) {
  for (const uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7F80FFFFu, 0x7FBF0000u}) {
    EXPECT_EQ(f32_to_bf16(float_of(nan_bits)), 0x7FFF) << std::hex << nan_bits;
    EXPECT_EQ(f32_to_bf16(float_of(nan_bits | 0x80000000u)), 0x7FFF) << std::hex << nan_bits;
  }
}

TEST(FormatsBf16, SignedZeroAndSubnormals) {
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(float_of(0x00000001)), 0x0000);  // 2^-149 far below 2^-133
  EXPECT_EQ(f32_to_bf16(float_of(0x80000001)), 0x8000);
  EXPECT_EQ(f32_to_bf16(float_of(0x00008000)), 0x0000);  // tie with 0x0001, to even
  EXPECT_EQ(f32_to_bf16(float_of(0x00008001)), 0x0001);
  EXPECT_EQ(f32_to_bf16(float_of(0x007FFFFF)), 0x0080);  // largest subnormal to smallest normal
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
}

TEST(FormatsBf16, Literals) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(float_of(0x3F808000)), 0x3F80);  // 1 + 2^-8: tie, down to even
  EXPECT_EQ(f32_to_bf16(float_of(0x3F818000)), 0x3F82);  // tie, up to even
  EXPECT_EQ(f32_to_bf16(3.14159265f), 0x4049);
}

TEST(FormatsBf16, RandomFp32MatchesLongDoubleOracle) {
  const RneOracle oracle(kBf16Layout, 0x7F80, 0x7F80);
  expect_matches_oracle(oracle, random_floats(1'000'000, 1, -140, 127), bf16_encode);
}

// ---------------------------------------------------------------- f16

uint32_t f16_encode(float x) { return f32_to_f16(x); }
float f16_decode(uint32_t c) { return f16_to_f32(static_cast<uint16_t>(c)); }

TEST(FormatsF16, DecodeMatchesFieldsForEveryCode) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const float v = f16_decode(c);
    const uint32_t magnitude = c & 0x7FFF;
    if (magnitude > 0x7C00) {
      ASSERT_TRUE(std::isnan(v)) << c;
      ASSERT_EQ(std::signbit(v), (c & 0x8000) != 0) << c;
    } else if (magnitude == 0x7C00) {
      ASSERT_EQ(v, (c & 0x8000) ? -kInf : kInf) << c;
    } else {
      ASSERT_EQ(static_cast<long double>(v), field_value(kF16Layout, c)) << c;
      ASSERT_EQ(std::signbit(v), (c & 0x8000) != 0) << c;
    }
  }
}

TEST(FormatsF16, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const bool is_nan = (c & 0x7FFF) > 0x7C00;
    const uint32_t expected = is_nan ? 0x7FFF : c;
    ASSERT_EQ(f16_encode(f16_decode(c)), expected) << std::hex << c;
  }
}

TEST(FormatsF16, TiesRoundToEvenBetweenEveryAdjacentPair) {
  expect_rne_between_adjacent_codes(kF16Layout, 0x7BFF, f16_decode, f16_encode);
}

TEST(FormatsF16, Literals) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f32_to_f16(0.1f), 0x2E66);
  EXPECT_EQ(f32_to_f16(-65504.0f), 0xFBFF);
}

TEST(FormatsF16, SubnormalRounding) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(tiny), 0x0001);
  EXPECT_EQ(f32_to_f16(tiny / 2), 0x0000);  // tie with zero, to even
  EXPECT_EQ(f32_to_f16(next_up(tiny / 2)), 0x0001);
  EXPECT_EQ(f32_to_f16(-tiny / 2), 0x8000);
  EXPECT_EQ(f32_to_f16(-next_up(tiny / 2)), 0x8001);
  EXPECT_EQ(f32_to_f16(3 * tiny / 2), 0x0002);  // tie between 1 and 2, to even
  EXPECT_EQ(f32_to_f16(5 * tiny / 2), 0x0002);  // tie between 2 and 3, to even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -40)), 0x0000);
  EXPECT_EQ(f32_to_f16(float_of(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_f16(float_of(0x80000001)), 0x8000);
  // Into the smallest normal: 1023.5 * 2^-24 is the tie between 0x03FF and 0x0400.
  EXPECT_EQ(f32_to_f16(1023.5f * tiny), 0x0400);
  EXPECT_EQ(f32_to_f16(toward_zero(1023.5f * tiny)), 0x03FF);
  EXPECT_EQ(f32_to_f16(1022.5f * tiny), 0x03FE);
}

TEST(FormatsF16, OverflowGoesToInfinity) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(toward_zero(65520.0f)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // tie: 0x7BFF is odd
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xFC00);
  EXPECT_EQ(f32_to_f16(1e30f), 0x7C00);
  EXPECT_EQ(f32_to_f16(kFltMax), 0x7C00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7C00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xFC00);
}

TEST(FormatsF16, NanBecomesCanonicalQuietNanKeepingSign) {
  for (const uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA00000u}) {
    EXPECT_EQ(f32_to_f16(float_of(nan_bits)), 0x7FFF) << std::hex << nan_bits;
    EXPECT_EQ(f32_to_f16(float_of(nan_bits | 0x80000000u)), 0x7FFF) << std::hex << nan_bits;
  }
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(FormatsF16, RandomFp32MatchesLongDoubleOracle) {
  const RneOracle oracle(kF16Layout, 0x7C00, 0x7C00);
  expect_matches_oracle(oracle, random_floats(1'000'000, 2, -27, 17), f16_encode);
}

#if defined(__FLT16_MAX__)
TEST(FormatsF16, AgreesWithCompilerFloat16) {
  for (const float x : random_floats(200'000, 3, -27, 17)) {
    if (std::isnan(x)) continue;
    const auto h = static_cast<_Float16>(x);
    ASSERT_EQ(f32_to_f16(x), std::bit_cast<uint16_t>(h)) << std::hex << bits_of(x);
  }
}
#endif

// ---------------------------------------------------------------- shared 8- and 4-bit checks

struct MiniCase {
  Layout layout;
  uint32_t max_code;  // largest finite positive code
  Decoder decode;
  Encoder encode;
};

MiniCase e4m3_case() {
  return {kE4m3Layout, 0x7E, [](uint32_t c) { return e4m3_to_f32(static_cast<uint8_t>(c)); },
          [](float x) { return static_cast<uint32_t>(f32_to_e4m3(x)); }};
}
MiniCase e5m2_case() {
  return {kE5m2Layout, 0x7B, [](uint32_t c) { return e5m2_to_f32(static_cast<uint8_t>(c)); },
          [](float x) { return static_cast<uint32_t>(f32_to_e5m2(x)); }};
}
MiniCase e2m1_case() {
  return {kE2m1Layout, 0x7, [](uint32_t c) { return e2m1_to_f32(static_cast<uint8_t>(c)); },
          [](float x) { return static_cast<uint32_t>(f32_to_e2m1(x)); }};
}

// Saturating oracle: the entry after max is the value the format would have with one more
// exponent step; anything rounding there writes max.
void expect_random_matches_saturating_oracle(const MiniCase& m, uint32_t seed, int low_exp,
                                             int high_exp) {
  RneOracle oracle(m.layout, m.max_code, m.max_code);
  // One more ulp at the top binade: 480 for e4m3, 65536 for e5m2, 8 for e2m1.
  oracle.magnitudes.push_back(2 * oracle.magnitudes[m.max_code] -
                              oracle.magnitudes[m.max_code - 1]);
  expect_matches_oracle(oracle, random_floats(200'000, seed, low_exp, high_exp), m.encode);
  std::vector<float> in_range;
  for (uint32_t c = 0; c < m.max_code; ++c) {
    const float lo = m.decode(c), hi = m.decode(c + 1);
    for (int k = 0; k <= 16; ++k) in_range.push_back(lo + (hi - lo) * static_cast<float>(k) / 16);
  }
  expect_matches_oracle(oracle, in_range, m.encode);
}

void expect_saturation(const MiniCase& m) {
  const float max = m.decode(m.max_code);
  const uint32_t sign = m.layout.sign_bit();
  for (const float big : {1e30f, kFltMax, kInf, 2 * max, next_up(max)}) {
    EXPECT_EQ(m.encode(big), m.max_code) << big;
    EXPECT_EQ(m.encode(-big), sign | m.max_code) << big;
  }
}

// ---------------------------------------------------------------- e4m3

TEST(FormatsE4m3, DecodeMatchesFieldsForEveryCode) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      ASSERT_TRUE(std::isnan(v)) << c;
    } else {
      ASSERT_EQ(static_cast<long double>(v), field_value(kE4m3Layout, c)) << c;
      ASSERT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
    }
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);  // exponent field 15 is finite in the fn variant
  EXPECT_EQ(e4m3_to_f32(0x7D), 416.0f);
}

TEST(FormatsE4m3, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    // 0x7F and 0xFF, the only NaN codes, are already the canonical ones.
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(FormatsE4m3, TiesRoundToEvenBetweenEveryAdjacentPair) {
  const MiniCase m = e4m3_case();
  expect_rne_between_adjacent_codes(m.layout, m.max_code, m.decode, m.encode);
}

TEST(FormatsE4m3, SaturatesToMax) {
  expect_saturation(e4m3_case());
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(463.99f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(toward_zero(464.0f)), 0x7E);
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7E);  // RNE gives 480, which saturates
  EXPECT_EQ(f32_to_e4m3(480.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-463.99f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(-464.0f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(-480.0f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(432.0f), 0x7E);  // tie 416/448 to even
  EXPECT_EQ(f32_to_e4m3(toward_zero(432.0f)), 0x7D);
}

TEST(FormatsE4m3, NanAndSignedZero) {
  for (const uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu}) {
    EXPECT_EQ(f32_to_e4m3(float_of(nan_bits)), 0x7F);
    EXPECT_EQ(f32_to_e4m3(float_of(nan_bits | 0x80000000u)), 0xFF);
  }
  EXPECT_EQ(f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);
  EXPECT_EQ(f32_to_e4m3(float_of(0x80000001)), 0x80);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie with 2^-9, to even
  EXPECT_EQ(f32_to_e4m3(next_up(std::ldexp(1.0f, -10))), 0x01);
  EXPECT_EQ(f32_to_e4m3(-std::ldexp(1.0f, -10)), 0x80);
  EXPECT_EQ(f32_to_e4m3(7.5f * std::ldexp(1.0f, -9)), 0x08);  // largest subnormal -> min normal
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));
}

TEST(FormatsE4m3, RandomFp32MatchesLongDoubleOracle) {
  expect_random_matches_saturating_oracle(e4m3_case(), 4, -12, 10);
}

// ---------------------------------------------------------------- e5m2

TEST(FormatsE5m2, DecodeMatchesFieldsForEveryCode) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const float v = e5m2_to_f32(static_cast<uint8_t>(c));
    const uint32_t magnitude = c & 0x7F;
    if (magnitude > 0x7C) {
      ASSERT_TRUE(std::isnan(v)) << c;
    } else if (magnitude == 0x7C) {
      ASSERT_EQ(v, (c & 0x80) ? -kInf : kInf) << c;
    } else {
      ASSERT_EQ(static_cast<long double>(v), field_value(kE5m2Layout, c)) << c;
      ASSERT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
    }
  }
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(0xFB), -57344.0f);
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2_to_f32(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(e5m2_to_f32(0x3C), 1.0f);
}

TEST(FormatsE5m2, EveryCodeRoundTrips) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const uint32_t sign = c & 0x80, magnitude = c & 0x7F;
    uint32_t expected = c;
    if (magnitude > 0x7C) expected = sign | 0x7F;   // every NaN code -> canonical
    if (magnitude == 0x7C) expected = sign | 0x7B;  // inf is clamped by satfinite
    EXPECT_EQ(f32_to_e5m2(e5m2_to_f32(static_cast<uint8_t>(c))), expected) << c;
  }
}

TEST(FormatsE5m2, TiesRoundToEvenBetweenEveryAdjacentPair) {
  const MiniCase m = e5m2_case();
  expect_rne_between_adjacent_codes(m.layout, m.max_code, m.decode, m.encode);
}

TEST(FormatsE5m2, SaturatesToMax) {
  expect_saturation(e5m2_case());
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(61439.0f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(61440.0f), 0x7B);  // RNE gives 65536 (inf), which saturates
  EXPECT_EQ(f32_to_e5m2(65536.0f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(-61439.0f), 0xFB);
  EXPECT_EQ(f32_to_e5m2(-61440.0f), 0xFB);
  EXPECT_EQ(f32_to_e5m2(53248.0f), 0x7A);  // tie 49152/57344 to even
}

TEST(FormatsE5m2, NanAndSignedZero) {
  for (const uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu}) {
    EXPECT_EQ(f32_to_e5m2(float_of(nan_bits)), 0x7F);
    EXPECT_EQ(f32_to_e5m2(float_of(nan_bits | 0x80000000u)), 0xFF);
  }
  EXPECT_EQ(f32_to_e5m2(0.0f), 0x00);
  EXPECT_EQ(f32_to_e5m2(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e5m2(-1e-30f), 0x80);
  EXPECT_EQ(f32_to_e5m2(std::ldexp(1.0f, -17)), 0x00);  // tie with 2^-16, to even
  EXPECT_EQ(f32_to_e5m2(next_up(std::ldexp(1.0f, -17))), 0x01);
  EXPECT_EQ(f32_to_e5m2(3.5f * std::ldexp(1.0f, -16)), 0x04);  // largest subnormal -> min normal
  EXPECT_TRUE(std::signbit(e5m2_to_f32(0x80)));
}

TEST(FormatsE5m2, RandomFp32MatchesLongDoubleOracle) {
  expect_random_matches_saturating_oracle(e5m2_case(), 5, -19, 17);
}

// ---------------------------------------------------------------- e2m1

TEST(FormatsE2m1, DecodeMatchesFieldsForEveryCode) {
  const float expected[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 16; ++c) {
    const float v = e2m1_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(static_cast<long double>(v), field_value(kE2m1Layout, c)) << c;
    EXPECT_EQ(v, (c & 8) ? -expected[c & 7] : expected[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), (c & 8) != 0) << c;
    EXPECT_EQ(bits_of(e2m1_to_f32(static_cast<uint8_t>(c | 0xA0))), bits_of(v)) << c;
  }
  EXPECT_EQ(e2m1_to_f32(0x7), 6.0f);
  EXPECT_EQ(e2m1_to_f32(0xF), -6.0f);
}

TEST(FormatsE2m1, EveryCodeRoundTripsIncludingNegativeZero) {
  for (uint32_t c = 0; c < 16; ++c) {
    EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(f32_to_e2m1(-0.0f), 0x8);
}

TEST(FormatsE2m1, TiesRoundToEvenBetweenEveryAdjacentPair) {
  const MiniCase m = e2m1_case();
  expect_rne_between_adjacent_codes(m.layout, m.max_code, m.decode, m.encode);
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(f32_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 0x4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 0x6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);
  EXPECT_EQ(f32_to_e2m1(-5.0f), 0xE);
}

TEST(FormatsE2m1, SaturatesToMax) {
  expect_saturation(e2m1_case());
  EXPECT_EQ(f32_to_e2m1(6.0f), 0x7);
  EXPECT_EQ(f32_to_e2m1(6.9f), 0x7);
  EXPECT_EQ(f32_to_e2m1(7.0f), 0x7);
  EXPECT_EQ(f32_to_e2m1(1e9f), 0x7);
  EXPECT_EQ(f32_to_e2m1(-6.9f), 0xF);
  EXPECT_EQ(f32_to_e2m1(-7.0f), 0xF);
  EXPECT_EQ(f32_to_e2m1(-1e9f), 0xF);
}

TEST(FormatsE2m1, NanBecomesPositiveMaxAndZeroKeepsSign) {
  for (const uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu}) {
    EXPECT_EQ(f32_to_e2m1(float_of(nan_bits)), 0x7);
    EXPECT_EQ(f32_to_e2m1(float_of(nan_bits | 0x80000000u)), 0x7);
  }
  EXPECT_EQ(f32_to_e2m1(0.0f), 0x0);
  EXPECT_EQ(f32_to_e2m1(-1e-30f), 0x8);
  EXPECT_EQ(f32_to_e2m1(-0.25f), 0x8);
  EXPECT_EQ(f32_to_e2m1(-next_up(0.25f)), 0x9);
}

TEST(FormatsE2m1, RandomFp32MatchesLongDoubleOracle) {
  expect_random_matches_saturating_oracle(e2m1_case(), 6, -3, 4);
}

TEST(FormatsE2m1, NibbleHelpers) {
  uint8_t packed[3] = {0, 0, 0xFF};
  for (int64_t i = 0; i < 4; ++i) set_nibble(packed, i, static_cast<uint8_t>(0x9 + i));
  EXPECT_EQ(packed[0], 0xA9);
  EXPECT_EQ(packed[1], 0xCB);
  EXPECT_EQ(packed[2], 0xFF);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(nibble_at(packed, i), 0x9 + i);
  set_nibble(packed, 1, 0x13);  // only the low 4 bits are stored
  EXPECT_EQ(packed[0], 0x39);
}

// ---------------------------------------------------------------- ue8m0

TEST(FormatsUe8m0, DecodeEveryCode) {
  for (uint32_t c = 0; c < 255; ++c) {
    const float v = ue8m0_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(static_cast<long double>(v), powl(2.0L, static_cast<long double>(c) - 127)) << c;
    EXPECT_EQ(bits_of(v), c == 0 ? 0x00400000u : c << 23) << c;
  }
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(255)));
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
}

TEST(FormatsUe8m0, ScaleForPowersOfTwoAndNeighbours) {
  for (const float max_elem : {1.0f, 6.0f, 448.0f, 57344.0f, 7.0f}) {
    for (int p = -126; p <= 127; ++p) {
      const float amax = max_elem * std::ldexp(1.0f, p);
      if (std::isinf(amax) || amax < std::numeric_limits<float>::min()) continue;
      const int exact = std::clamp(p + 127, 0, 254);
      EXPECT_EQ(ue8m0_scale_for(amax, max_elem), exact) << max_elem << " 2^" << p;
      EXPECT_EQ(ue8m0_scale_for(next_down(amax), max_elem), exact) << max_elem << " 2^" << p;
      if (std::isfinite(next_up(amax))) {
        EXPECT_EQ(ue8m0_scale_for(next_up(amax), max_elem), std::min(exact + 1, 254))
            << max_elem << " 2^" << p;
      }
      if (std::isfinite(1.5f * amax)) {
        EXPECT_EQ(ue8m0_scale_for(1.5f * amax, max_elem), std::min(exact + 1, 254)) << p;
      }
    }
  }
  EXPECT_EQ(ue8m0_scale_for(6.0f, 6.0f), 127);
  EXPECT_EQ(ue8m0_scale_for(3.0f, 6.0f), 126);
  EXPECT_EQ(ue8m0_scale_for(3.5f, 6.0f), 127);
  EXPECT_EQ(ue8m0_scale_for(12.5f, 6.0f), 129);
}

TEST(FormatsUe8m0, ScaleForSpecialInputs) {
  EXPECT_EQ(ue8m0_scale_for(0.0f, 6.0f), 0);
  EXPECT_EQ(ue8m0_scale_for(-0.0f, 6.0f), 0);
  EXPECT_EQ(ue8m0_scale_for(float_of(0x00000001), 6.0f), 0);  // ratio underflows to 0
  EXPECT_EQ(ue8m0_scale_for(float_of(0x00000001), 1.0f), 0);  // 2^-149
  EXPECT_EQ(ue8m0_scale_for(float_of(0x007FFFFF), 1.0f), 1);  // just below 2^-126
  EXPECT_EQ(ue8m0_scale_for(std::ldexp(1.0f, -127), 1.0f), 0);
  EXPECT_EQ(ue8m0_scale_for(next_up(std::ldexp(1.0f, -127)), 1.0f), 1);
  EXPECT_EQ(ue8m0_scale_for(std::ldexp(1.0f, -126), 1.0f), 1);
  EXPECT_EQ(ue8m0_scale_for(std::numeric_limits<float>::quiet_NaN(), 6.0f), 255);
  EXPECT_EQ(ue8m0_scale_for(-std::numeric_limits<float>::quiet_NaN(), 6.0f), 255);
  EXPECT_EQ(ue8m0_scale_for(kInf, 6.0f), 254);
  EXPECT_EQ(ue8m0_scale_for(kFltMax, 1.0f), 254);    // ceil(log2) = 128, clamped
  EXPECT_EQ(ue8m0_scale_for(kFltMax, 6.0f), 253);    // ~2^125.4, ceil 126
  EXPECT_EQ(ue8m0_scale_for(kFltMax, 0.25f), 254);   // ratio overflows to inf
  EXPECT_EQ(ue8m0_scale_for(std::ldexp(1.0f, 127), 1.0f), 254);
}

TEST(FormatsUe8m0, RandomScaleBracketsAmax) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7FFFFF);
  std::uniform_int_distribution<int> exponent(127 - 100, 127 + 100);
  for (const float max_elem : {6.0f, 448.0f, 57344.0f, 7.0f, 127.0f, 1.0f}) {
    for (int i = 0; i < 20'000; ++i) {
      const float amax = float_of((static_cast<uint32_t>(exponent(rng)) << 23) | mantissa(rng));
      const uint8_t code = ue8m0_scale_for(amax, max_elem);
      ASSERT_GT(code, 0);
      ASSERT_LT(code, 255);
      const float scale = ue8m0_to_f32(code);
      ASSERT_LE(amax / scale, max_elem) << amax << " " << max_elem;
      ASSERT_GT(amax / (scale / 2), max_elem) << amax << " " << max_elem;
    }
  }
}

}  // namespace
}  // namespace moeq::ref

namespace moeq::ref {
namespace {

TEST(FormatsIntegerCodes, EveryUint4AndUint8CodeRoundTrips) {
  for (int code = 0; code < 16; ++code) {
    EXPECT_EQ(uint4_value(static_cast<uint8_t>(code)), code - 8);
    EXPECT_EQ(uint4_code(uint4_value(static_cast<uint8_t>(code))), code);
    EXPECT_EQ(uint4_value(static_cast<uint8_t>(code | 0xF0)), code - 8) << "high nibble must be ignored";
  }
  for (int code = 0; code < 256; ++code) {
    EXPECT_EQ(uint8_value(static_cast<uint8_t>(code)), code - 128);
    EXPECT_EQ(uint8_code(uint8_value(static_cast<uint8_t>(code))), code);
  }
  EXPECT_EQ(uint4_code(-9), 0);
  EXPECT_EQ(uint4_code(100), 15);
  EXPECT_EQ(uint8_code(-1000), 0);
  EXPECT_EQ(uint8_code(128), 255);
}

}  // namespace
}  // namespace moeq::ref
