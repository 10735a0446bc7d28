// Weight quantizers: round-trip optimality against the stored scales for every format, and
// hand-computed codes and scales (CONTRACT §4). Scale rules and layouts: test_quantize_rules.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"
#include "tests/unit/quantize_test_util.hpp"

namespace moeq::ref {
namespace {
using namespace test_util;

bool is_4bit(WeightFormat f) {
  return f == WeightFormat::mxfp4 || f == WeightFormat::nvfp4 || f == WeightFormat::int4;
}

// The test's own reading of the canonical layout (weights.hpp), independent of the dequantizer.
struct Layout {
  const WeightDesc& d;
  const QuantizedWeights& q;

  int64_t groups() const {
    if (d.format == WeightFormat::fp8_block) return (d.k + 127) / 128;
    return d.group_size > 0 ? d.k / d.group_size : 1;
  }
  uint8_t code(int64_t e, int64_t r, int64_t c) const {
    if (!is_4bit(d.format)) return q.codes[(e * d.n + r) * d.k + c];
    const uint8_t byte = q.codes[(e * d.n + r) * (d.k / 2) + c / 2];
    return c % 2 == 0 ? byte & 0xF : byte >> 4;
  }
  int64_t scale_index(int64_t e, int64_t r, int64_t c) const {
    if (d.format == WeightFormat::fp8_block)
      return (e * ((d.n + 127) / 128) + r / 128) * groups() + c / 128;
    return (e * d.n + r) * groups() + (d.group_size > 0 ? c / d.group_size : 0);
  }
  float scale(int64_t e, int64_t r, int64_t c) const {
    const int64_t i = scale_index(e, r, c);
    switch (d.scale_dtype) {
      case DType::ue8m0: return ue8m0_to_f32(q.scales[i]);
      case DType::e4m3: return e4m3_to_f32(q.scales[i]);
      case DType::f32: { float s; std::memcpy(&s, &q.scales[i * 4], 4); return s; }
      default: {
        uint16_t b;
        std::memcpy(&b, &q.scales[i * 2], 2);
        return d.scale_dtype == DType::bf16 ? bf16_to_f32(b) : f16_to_f32(b);
      }
    }
  }
  float global(int64_t e, int64_t r) const {
    return q.global_scales[e * d.num_global_scales + (d.num_global_scales == 2 && r >= d.n / 2)];
  }
  int num_codes() const { return is_4bit(d.format) ? 16 : 256; }
  // Value of `code` at (e, r, c) under the stored scales, or NaN for e4m3's NaN codes.
  float value(int64_t e, int64_t r, int64_t c, int code) const {
    const float s = scale(e, r, c);
    switch (d.format) {
      case WeightFormat::mxfp4: return e2m1_to_f32(uint8_t(code)) * s;
      case WeightFormat::nvfp4: return e2m1_to_f32(uint8_t(code)) * s * global(e, r);
      case WeightFormat::int4: case WeightFormat::int8: {
        const float zp = d.has_zero_point ? q.zero_points[scale_index(e, r, c)]
                                          : (d.format == WeightFormat::int4 ? 8.0f : 128.0f);
        return (float(code) - zp) * s;
      }
      default:
        return (code & 0x7F) == 0x7F ? NAN : e4m3_to_f32(uint8_t(code)) * s;
    }
  }
  // Smallest |value(code) - x| over all codes; the per-code products are formed as in value().
  double nearest_error(int64_t e, int64_t r, int64_t c, float x) const {
    if (table.empty()) {
      for (int code = 0; code < num_codes(); ++code) {
        const bool fp4 = d.format == WeightFormat::mxfp4 || d.format == WeightFormat::nvfp4;
        const bool integer = d.format == WeightFormat::int4 || d.format == WeightFormat::int8;
        const float v = fp4 ? e2m1_to_f32(uint8_t(code)) : integer ? float(code)
                                                               : e4m3_to_f32(uint8_t(code));
        if (!std::isnan(v)) table.push_back(v);
      }
    }
    const float s = scale(e, r, c);
    double best = INFINITY;
    if (d.format == WeightFormat::int4 || d.format == WeightFormat::int8) {
      const float zp = d.has_zero_point ? q.zero_points[scale_index(e, r, c)]
                                        : (d.format == WeightFormat::int4 ? 8.0f : 128.0f);
      for (float t : table) best = std::min(best, std::fabs(double((t - zp) * s) - x));
    } else if (d.format == WeightFormat::nvfp4) {
      const float g = global(e, r);
      for (float t : table) best = std::min(best, std::fabs(double(t * s * g) - x));
    } else {
      for (float t : table) best = std::min(best, std::fabs(double(t * s) - x));
    }
    return best;
  }
  mutable std::vector<float> table;
};

// Quantizes every expert of random weights and checks that each dequantized element equals the
// stored code's value and is (up to fp32 rounding of x/s) the nearest value any code could give
// under the stored scales. Returns the relative Frobenius error.
double check_round_trip(const WeightDesc& d, unsigned seed) {
  const int64_t per_expert = d.n * d.k;
  const std::vector<float> w = gaussian(size_t(d.num_experts * per_expert), seed);
  QuantizedWeights q(d);
  for (int64_t e = 0; e < d.num_experts; ++e) quantize_expert(w.data() + e * per_expert, e, q);
  const Layout lay{d, q, {}};
  std::vector<float> deq(static_cast<size_t>(per_expert));
  double err2 = 0, ref2 = 0;
  int failures = 0;
  for (int64_t e = 0; e < d.num_experts; ++e) {
    dequantize_expert(d, q.view(), e, deq.data());
    for (int64_t r = 0; r < d.n; ++r)
      for (int64_t c = 0; c < d.k; ++c) {
        const float x = w[size_t(e * per_expert + r * d.k + c)];
        const float y = deq[size_t(r * d.k + c)];
        const double best = lay.nearest_error(e, r, c, x);
        const bool same_value = y == lay.value(e, r, c, lay.code(e, r, c));
        const bool nearest = std::fabs(double(y) - x) <= best + 1e-6 * std::fabs(x);
        if ((!same_value || !nearest) && failures++ < 5)
          ADD_FAILURE() << to_string(d.format) << " e=" << e << " r=" << r << " c=" << c
                        << " w=" << x << " deq=" << y << " best error=" << best;
        err2 += (double(y) - x) * (double(y) - x);
        ref2 += double(x) * x;
      }
  }
  EXPECT_EQ(failures, 0);
  return std::sqrt(err2 / ref2);
}

// Measured relative Frobenius errors on N(0, 0.02) weights (fixed seeds); bounds sit ~10-20% above:
//   int4 symmetric g32 0.098, g64 0.108, g128 0.120, channel (k = 256) 0.126;
//   int4 zero point g32 0.081 .. channel 0.109;  int8 0.0053 .. 0.0073 (any group, scale dtype);
//   mxfp4 0.119;  nvfp4 0.095 (1 or 2 global scales);  mxfp8 0.0265;  fp8 channel / block 0.026.
TEST(QuantizeWeights, Int4RoundTripAllGroupsZeroPointsAndScaleDtypes) {
  unsigned seed = 1;
  for (int g : {32, 64, 128, 0})
    for (bool zp : {false, true})
      for (DType s : {DType::bf16, DType::f16}) {
        SCOPED_TRACE("g=" + std::to_string(g) + " zp=" + std::to_string(zp) + " " +
                     std::string(to_string(s)));
        const double rel = check_round_trip(make_desc(WeightFormat::int4, 2, 24, 256, g, s, zp), seed++);
        EXPECT_LT(rel, 0.14);
      }
}

TEST(QuantizeWeights, Int8RoundTripChannelAndGrouped) {
  unsigned seed = 100;
  for (int g : {0, 32, 128})
    for (DType s : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE("g=" + std::to_string(g) + " " + std::string(to_string(s)));
      EXPECT_LT(check_round_trip(make_desc(WeightFormat::int8, 2, 16, 256, g, s), seed++), 0.0085);
    }
}

TEST(QuantizeWeights, FloatFormatsRoundTrip) {
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::mxfp4, 2, 32, 256, 32, DType::ue8m0), 7), 0.135);
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::mxfp8, 2, 32, 256, 32, DType::ue8m0), 8), 0.031);
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::nvfp4, 2, 32, 256, 16, DType::e4m3, false, 1), 9), 0.11);
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::nvfp4, 2, 32, 256, 16, DType::e4m3, false, 2), 10), 0.11);
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::fp8_channel, 2, 32, 256, 0, DType::f32), 11), 0.031);
  // n and k not multiples of 128: the last block row and column are partial.
  EXPECT_LT(check_round_trip(make_desc(WeightFormat::fp8_block, 2, 200, 320, 128, DType::f32), 12), 0.031);
}

// Hand-computed examples: scales and codes by value. e2m1 codes: 0 0.5 1 1.5 2 3 4 6 -> 0..7,
// bit 3 = sign; ties round to the even code.
TEST(QuantizeWeights, Mxfp4HandExample) {
  std::vector<float> w(64, 0.0f);
  // Row 0: amax 5 -> 2^ceil(log2(5/6)) = 1; 5 ties 4|6 -> 4; -0.75 ties -0.5|-1 -> -1; 1.25 -> 1.
  w[0] = 5.0f, w[1] = -0.75f, w[2] = 1.25f, w[3] = 0.2f;
  // Row 1: amax 7 -> scale 2; 7/2 = 3.5 ties 3|4 -> 4; -1/2 -> -0.5.
  w[32] = 7.0f, w[33] = -1.0f;
  const auto q = quantize_single(make_desc(WeightFormat::mxfp4, 1, 2, 32, 32, DType::ue8m0), w);
  EXPECT_EQ(q.scales, (std::vector<uint8_t>{127, 128}));
  EXPECT_EQ(q.codes[0], 0xA6);  // element 0 (code 6) in the low nibble, element 1 (0xA) high
  EXPECT_EQ(q.codes[1], 0x02);
  EXPECT_EQ(q.codes[16], 0x96);
  const auto d = dequantize_single(q);
  EXPECT_EQ(d[0], 4.0f);
  EXPECT_EQ(d[1], -1.0f);
  EXPECT_EQ(d[2], 1.0f);
  EXPECT_EQ(d[3], 0.0f);
  EXPECT_EQ(d[32], 8.0f);
  EXPECT_EQ(d[33], -1.0f);
}

TEST(QuantizeWeights, Mxfp8HandExample) {
  std::vector<float> w(32, 0.0f);
  w[0] = 100.0f, w[1] = 1.0f, w[2] = -0.3f;  // amax 100 -> 2^ceil(log2(100/448)) = 2^-2
  const auto q = quantize_single(make_desc(WeightFormat::mxfp8, 1, 1, 32, 32, DType::ue8m0), w);
  EXPECT_EQ(q.scales[0], 125);
  EXPECT_EQ(q.codes[0], 0x7C);  // 400 = 1.5625 * 2^8 ties 1.5|1.625 -> 384
  EXPECT_EQ(q.codes[1], 0x48);  // 4
  EXPECT_EQ(q.codes[2], 0xBA);  // -1.2 -> -1.25
  const auto d = dequantize_single(q);
  EXPECT_EQ(d[0], 96.0f);
  EXPECT_EQ(d[1], 1.0f);
  EXPECT_EQ(d[2], -0.3125f);
}

TEST(QuantizeWeights, Nvfp4HandExampleOneGlobalScale) {
  std::vector<float> w(48, 0.0f);
  w[0] = 2688.0f, w[1] = 1000.0f;  // expert amax 2688 -> g = 1; block scale 2688/6 = 448
  w[16] = 3.0f, w[17] = -1.0f;     // block scale 3/6 = 0.5; codes 6 and -2; row 2 stays zero
  const auto q = quantize_single(make_desc(WeightFormat::nvfp4, 1, 3, 16, 16, DType::e4m3, false, 1), w);
  EXPECT_EQ(q.global_scales, (std::vector<float>{1.0f}));
  EXPECT_EQ(q.scales, (std::vector<uint8_t>{0x7E, 0x30, 0x38}));  // 448, 0.5, 1.0 for a zero block
  EXPECT_EQ(q.codes[0], 0x47);  // 6 and 1000/448 = 2.23 -> 2
  EXPECT_EQ(q.codes[8], 0xC7);
  for (size_t i = 16; i < 24; ++i) EXPECT_EQ(q.codes[i], 0) << i;
  const auto d = dequantize_single(q);
  EXPECT_EQ(d[0], 2688.0f);
  EXPECT_EQ(d[1], 896.0f);
  EXPECT_EQ(d[16], 3.0f);
  EXPECT_EQ(d[17], -1.0f);
}

TEST(QuantizeWeights, Nvfp4HandExampleTwoGlobalScales) {
  std::vector<float> w(64, 0.0f);
  w[0] = 5376.0f, w[16] = -672.0f;  // gate rows: amax 5376 -> g0 = 2
  w[32] = 1344.0f, w[48] = 168.0f;  // up rows: amax 1344 -> g1 = 0.5, from these rows only
  const auto q = quantize_single(make_desc(WeightFormat::nvfp4, 1, 4, 16, 16, DType::e4m3, false, 2), w);
  EXPECT_EQ(q.global_scales, (std::vector<float>{2.0f, 0.5f}));
  EXPECT_EQ(q.scales, (std::vector<uint8_t>{0x7E, 0x66, 0x7E, 0x66}));  // 448, 56, 448, 56
  EXPECT_EQ(q.codes[0], 0x07);
  EXPECT_EQ(q.codes[8], 0x0F);
  EXPECT_EQ(q.codes[16], 0x07);
  EXPECT_EQ(q.codes[24], 0x07);
  const auto d = dequantize_single(q);
  EXPECT_EQ(d[0], 5376.0f);
  EXPECT_EQ(d[16], -672.0f);
  EXPECT_EQ(d[32], 1344.0f);
  EXPECT_EQ(d[48], 168.0f);
}

TEST(QuantizeWeights, Fp8ChannelHandExample) {
  const std::vector<float> w = {224.0f, 1.0f, -0.3f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -1792.0f, 3.0f, 0.0f, 0.0f};
  const auto q = quantize_single(make_desc(WeightFormat::fp8_channel, 1, 3, 4, 0, DType::f32), w);
  EXPECT_EQ(f32_at(q.scales, 0), 0.5f);
  EXPECT_EQ(f32_at(q.scales, 1), 1e-12f / 448.0f);  // an all-zero row keeps the 1e-12 floor
  EXPECT_EQ(f32_at(q.scales, 2), 4.0f);
  EXPECT_EQ(q.codes, (std::vector<uint8_t>{0x7E, 0x40, 0xB2, 0, 0, 0, 0, 0, 0xFE, 0x34, 0, 0}));
  const auto d = dequantize_single(q);
  EXPECT_EQ(d[2], -0.3125f);  // -0.6 -> -0.625 in e4m3
  EXPECT_EQ(d[9], 3.0f);
}

TEST(QuantizeWeights, Int4HandExamples) {
  std::vector<float> w(96, 0.0f);
  w[0] = 7.0f, w[1] = -6.6f, w[2] = 2.5f, w[3] = 3.5f, w[4] = -0.5f;  // s = 1; halves to even
  w[32] = 0.7f, w[33] = -0.25f;                                       // s = bf16(0.1)
  const auto sym = quantize_single(make_desc(WeightFormat::int4, 1, 1, 96, 32, DType::bf16), w);
  EXPECT_EQ(u16_at(sym.scales, 0), 0x3F80);
  EXPECT_EQ(u16_at(sym.scales, 1), 0x3DCD);  // 0.10009765625
  EXPECT_EQ(sym.codes[0], 0x1F);             // q 7, -7 -> codes 15, 1
  EXPECT_EQ(sym.codes[1], 0xCA);             // q 2, 4
  EXPECT_EQ(sym.codes[2], 0x88);             // q 0 (-0.5 -> 0), 0
  EXPECT_EQ(sym.codes[16], 0x6F);            // 6.99 -> 7, -2.5 -> -2
  EXPECT_EQ(u16_at(sym.scales, 2), 0);       // all-zero group: scale 0, every code the zero point
  EXPECT_EQ(sym.codes[32], 0x88);

  std::fill(w.begin(), w.end(), 0.0f);
  w[0] = -1.0f, w[1] = 14.0f, w[2] = 3.5f;  // s = 15/15 = 1, zp = 1
  w[32] = 2.0f, w[33] = 7.5f;               // positive group: range [0, 7.5] -> s = 0.5, zp = 0
  w[64] = -2.6f, w[65] = 12.4f;             // s = 1, zp = rne(2.6) = 3
  const auto zp = quantize_single(make_desc(WeightFormat::int4, 1, 1, 96, 32, DType::f16, true), w);
  EXPECT_EQ(u16_at(zp.scales, 0), 0x3C00);
  EXPECT_EQ(u16_at(zp.scales, 1), 0x3800);
  EXPECT_EQ(zp.zero_points, (std::vector<uint8_t>{1, 0, 3}));
  EXPECT_EQ(zp.codes[0], 0xF0);
  EXPECT_EQ(zp.codes[1], 0x15);  // 3.5 + 1 -> 4 + 1; 0 -> zp
  EXPECT_EQ(zp.codes[16], 0xF4);
  EXPECT_EQ(zp.codes[32], 0xF0);  // -2.6 -> -3 + 3, 12.4 -> 12 + 3
  const auto d = dequantize_single(zp);
  EXPECT_EQ(d[0], -1.0f);
  EXPECT_EQ(d[1], 14.0f);
  EXPECT_EQ(d[2], 4.0f);
  EXPECT_EQ(d[33], 7.5f);
  EXPECT_EQ(d[64], -3.0f);
  EXPECT_EQ(d[65], 12.0f);
}

TEST(QuantizeWeights, Int8HandExample) {
  const std::vector<float> w = {1.1f, -31.75f, 0.125f, 0.375f};  // s = 31.75/127 = 0.25
  const auto q = quantize_single(make_desc(WeightFormat::int8, 1, 1, 4, 0, DType::f32), w);
  EXPECT_EQ(f32_at(q.scales, 0), 0.25f);
  EXPECT_EQ(q.codes, (std::vector<uint8_t>{132, 1, 128, 130}));
  EXPECT_EQ(dequantize_single(q), (std::vector<float>{1.0f, -31.75f, 0.0f, 0.5f}));
}

}  // namespace
}  // namespace moeq::ref
