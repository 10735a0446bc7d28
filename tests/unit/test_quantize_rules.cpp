// Weight quantizers: exactly representable inputs, the MX / NVFP4 scale rules, canonical layouts,
// expert isolation, argument checks and bias storage (CONTRACT §4).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"
#include "tests/unit/quantize_test_util.hpp"

namespace moeq::ref {
namespace {
using namespace test_util;

// Random finite e4m3 code (0x7F / 0xFF are NaN).
uint8_t random_e4m3(std::mt19937& gen) {
  for (;;) {
    const auto c = static_cast<uint8_t>(gen() & 0xFF);
    if ((c & 0x7F) != 0x7F) return c;
  }
}

// Weights that are code * 2^p with one element per scale block at +-max_elem * 2^p, so the
// quantizer's scale is exactly 2^p and every element must survive bit-exactly.
TEST(QuantizeWeights, ExactlyRepresentableMxAndFp8SurviveBitExactly) {
  std::mt19937 gen(42);
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::mxfp8, WeightFormat::fp8_channel,
                         WeightFormat::fp8_block}) {
    SCOPED_TRACE(std::string(to_string(f)));
    const bool fp4 = f == WeightFormat::mxfp4;
    const bool block = f == WeightFormat::fp8_block;
    const int64_t n = block ? 200 : 8, k = block ? 320 : 128;
    const int group = f == WeightFormat::fp8_channel ? 0 : block ? 128 : 32;
    const auto d = make_desc(f, 1, n, k, group, fp4 || f == WeightFormat::mxfp8 ? DType::ue8m0 : DType::f32);
    // Block of element (r, c) and its exponent p in [-20, 5].
    auto block_of = [&](int64_t r, int64_t c) {
      if (block) return (r / 128) * 3 + c / 128;
      return group == 0 ? r : r * (k / group) + c / group;
    };
    std::vector<int> exponent(64);
    for (int& p : exponent) p = static_cast<int>(gen() % 26) - 20;
    std::vector<float> w(static_cast<size_t>(n * k));
    std::vector<bool> seen(64, false);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const int64_t b = block_of(r, c);
        uint8_t code = fp4 ? static_cast<uint8_t>(gen() & 0xF) : random_e4m3(gen);
        if (!seen[b]) code = static_cast<uint8_t>((fp4 ? 0x7 : 0x7E) | (gen() & 1 ? 0x80 >> (fp4 ? 4 : 0) : 0));
        seen[b] = true;
        const float v = fp4 ? e2m1_to_f32(code) : e4m3_to_f32(code);
        w[r * k + c] = std::ldexp(v, exponent[b]);
      }
    const auto q = quantize_single(d, w);
    const auto deq = dequantize_single(q);
    int mismatches = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      if (deq[i] != w[i] && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << w[i] << " -> " << deq[i];
    }
    if (group == 32) {
      for (size_t b = 0; b < q.scales.size(); ++b) EXPECT_EQ(q.scales[b], 127 + exponent[b]) << b;
    }
  }
}

// With a block scale of exactly 1 the codes must be the codecs' own codes, ties included
// (the quantizer may encode faster than a codec call per element, never differently).
TEST(QuantizeWeights, MxCodesEqualTheCodecsIncludingTies) {
  std::mt19937 gen(9);
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::mxfp8}) {
    const bool fp4 = f == WeightFormat::mxfp4;
    const float max_elem = fp4 ? 6.0f : 448.0f;
    std::vector<float> grid;
    for (int c = 0; c < (fp4 ? 8 : 127); ++c) grid.push_back(fp4 ? e2m1_to_f32(uint8_t(c)) : e4m3_to_f32(uint8_t(c)));
    std::vector<float> probes;
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      const float mid = (grid[i] + grid[i + 1]) / 2;
      for (float v : {grid[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        probes.push_back(v);
        probes.push_back(-v);
      }
    }
    for (int i = 0; i < 4000; ++i) {  // random magnitudes over the whole range, subnormals too
      const float v = std::ldexp(1.0f + float(gen() % (1u << 23)) / float(1u << 23), int(gen() % 40) - 32);
      probes.push_back(std::min(v, max_elem) * (gen() & 1 ? -1.0f : 1.0f));
    }
    std::vector<float> w;
    for (size_t i = 0; i < probes.size(); ++i) {
      if (w.size() % 32 == 0) w.push_back(max_elem);  // scale exactly 2^0
      w.push_back(probes[i]);
    }
    w.resize((w.size() + 31) / 32 * 32, 0.0f);
    const auto q = quantize_single(make_desc(f, 1, 1, int64_t(w.size()), 32, DType::ue8m0), w);
    for (uint8_t s : q.scales) ASSERT_EQ(s, 127);
    for (size_t i = 0; i < w.size(); ++i) {
      const uint8_t code = fp4 ? nibble_at(q.codes.data(), int64_t(i)) : q.codes[i];
      ASSERT_EQ(code, fp4 ? f32_to_e2m1(w[i]) : f32_to_e4m3(w[i])) << to_string(f) << " x = " << w[i];
    }
  }
}

TEST(QuantizeWeights, MxScaleIsCeilLog2OfAmaxOverMaxElement) {
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::mxfp8}) {
    const float max_elem = f == WeightFormat::mxfp4 ? 6.0f : 448.0f;
    const std::vector<float> amax = {max_elem * 8, std::nextafter(max_elem * 8, INFINITY), 0.0f,
                                     1.0f, max_elem * 0.99f, 1e-6f, 3e-39f};
    std::vector<float> w(amax.size() * 32, 0.0f);
    for (size_t b = 0; b < amax.size(); ++b) {
      w[b * 32 + 5] = amax[b];
      w[b * 32 + 9] = amax[b] * 0.5f;
    }
    const auto q = quantize_single(make_desc(f, 1, 1, static_cast<int64_t>(w.size()), 32, DType::ue8m0), w);
    for (size_t b = 0; b < amax.size(); ++b) {
      const int expected = amax[b] == 0.0f ? 0
          : std::clamp(127 + static_cast<int>(std::ceil(std::log2(double(amax[b]) / max_elem))), 0, 254);
      EXPECT_EQ(q.scales[b], expected) << to_string(f) << " amax " << amax[b];
    }
    EXPECT_EQ(q.scales[0], 130);
    EXPECT_EQ(q.scales[1], 131);
    EXPECT_EQ(q.scales[2], 0);  // amax 0: the smallest scale and all-zero codes
    const int64_t row_bytes = f == WeightFormat::mxfp4 ? 16 : 32;
    for (int64_t i = 2 * row_bytes; i < 3 * row_bytes; ++i) EXPECT_EQ(q.codes[i], 0) << i;
  }
}

TEST(QuantizeWeights, Nvfp4GlobalIsAmaxOver2688AndZeroBlocksGetScaleOne) {
  for (int globals : {1, 2}) {
    const int64_t E = 2, n = 8, k = 64;
    auto w = gaussian(E * n * k, 5 + globals);
    std::fill(w.begin() + 16, w.begin() + 32, 0.0f);  // expert 0, row 0, block 1
    const auto d = make_desc(WeightFormat::nvfp4, E, n, k, 16, DType::e4m3, false, globals);
    QuantizedWeights q(d);
    for (int64_t e = 0; e < E; ++e) quantize_expert(w.data() + e * n * k, e, q);
    for (int64_t e = 0; e < E; ++e)
      for (int h = 0; h < globals; ++h) {
        const int64_t r0 = h * n / globals, r1 = (h + 1) * n / globals;
        float amax = 0.0f;
        for (int64_t i = (e * n + r0) * k; i < (e * n + r1) * k; ++i) amax = std::max(amax, std::fabs(w[i]));
        const float g = amax / (6.0f * 448.0f);
        EXPECT_EQ(q.global_scales[e * globals + h], g) << "expert " << e << " half " << h;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t b = 0; b < k / 16; ++b) {
            float bmax = 0.0f;
            for (int64_t c = b * 16; c < b * 16 + 16; ++c) bmax = std::max(bmax, std::fabs(w[(e * n + r) * k + c]));
            const uint8_t expected = bmax == 0.0f ? 0x38 : f32_to_e4m3(bmax / (6.0f * g));
            EXPECT_EQ(q.scales[(e * n + r) * (k / 16) + b], expected) << e << " " << r << " " << b;
          }
      }
    for (int64_t i = 8; i < 16; ++i) EXPECT_EQ(q.codes[i], 0) << i;
  }
}

TEST(QuantizeWeights, PackedNibbleOrderPutsEvenElementsLow) {
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::nvfp4, WeightFormat::int4}) {
    std::vector<float> w(32, 0.0f);
    for (size_t j = 0; j < 32; j += 2) w[j] = 6.0f;
    const DType s = f == WeightFormat::mxfp4 ? DType::ue8m0 : f == WeightFormat::nvfp4 ? DType::e4m3 : DType::bf16;
    const auto q = quantize_single(make_desc(f, 1, 1, 32, f == WeightFormat::nvfp4 ? 16 : 32, s, false,
                                             f == WeightFormat::nvfp4 ? 1 : 0), w);
    const uint8_t expected = f == WeightFormat::int4 ? 0x8F : 0x07;  // high nibble: the zero code
    for (size_t j = 0; j < 16; ++j) EXPECT_EQ(q.codes[j], expected) << to_string(f) << " byte " << j;
  }
}

TEST(QuantizeWeights, IntScaleAndZeroPointIndexIsExpertRowGroup) {
  const int64_t E = 2, n = 3, k = 128, G = 4;
  std::vector<float> w(E * n * k, 0.0f);
  auto unit = [](int64_t e, int64_t r, int64_t g) { return static_cast<float>(1 + e * 12 + r * 4 + g); };
  auto zero = [](int64_t e, int64_t r, int64_t g) { return static_cast<int>((e + r + g) % 16); };
  // Range [-z u, (15 - z) u] gives scale u and zero point z.
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < G; ++g) {
        w[(e * n + r) * k + g * 32] = -zero(e, r, g) * unit(e, r, g);
        w[(e * n + r) * k + g * 32 + 1] = (15 - zero(e, r, g)) * unit(e, r, g);
      }
  const auto d = make_desc(WeightFormat::int4, E, n, k, 32, DType::bf16, true);
  QuantizedWeights q(d);
  for (int64_t e = 0; e < E; ++e) quantize_expert(w.data() + e * n * k, e, q);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < G; ++g) {
        const size_t i = static_cast<size_t>((e * n + r) * G + g);
        EXPECT_EQ(bf16_to_f32(u16_at(q.scales, i)), unit(e, r, g)) << i;
        EXPECT_EQ(q.zero_points[i], zero(e, r, g)) << i;
      }
}

TEST(QuantizeWeights, Fp8BlockScaleIndexIsExpertRowBlockColBlock) {
  const int64_t E = 2, n = 130, k = 130;  // 2 x 2 blocks, the second of each partial
  std::vector<float> w(E * n * k, 0.0f);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t bn = 0; bn < 2; ++bn)
      for (int64_t bk = 0; bk < 2; ++bk)  // corners of the partial blocks: rows / cols 129
        w[(e * n + bn * 129) * k + bk * 129] = std::ldexp(448.0f, static_cast<int>(e * 4 + bn * 2 + bk));
  const auto d = make_desc(WeightFormat::fp8_block, E, n, k, 128, DType::f32);
  QuantizedWeights q(d);
  for (int64_t e = 0; e < E; ++e) quantize_expert(w.data() + e * n * k, e, q);
  ASSERT_EQ(q.scales.size(), 8u * 4u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(f32_at(q.scales, i), std::ldexp(1.0f, static_cast<int>(i))) << i;
  for (size_t i = 0; i < q.codes.size(); ++i) EXPECT_EQ(q.codes[i], w[i] != 0.0f ? 0x7E : 0) << i;
}

TEST(QuantizeWeights, QuantizingOneExpertLeavesOtherExpertsUntouched) {
  const std::vector<WeightDesc> descs = {
      make_desc(WeightFormat::mxfp4, 3, 16, 64, 32, DType::ue8m0),
      make_desc(WeightFormat::nvfp4, 3, 16, 64, 16, DType::e4m3, false, 2),
      make_desc(WeightFormat::mxfp8, 3, 16, 64, 32, DType::ue8m0),
      make_desc(WeightFormat::fp8_channel, 3, 16, 64, 0, DType::f32),
      make_desc(WeightFormat::fp8_block, 3, 200, 160, 128, DType::f32),
      make_desc(WeightFormat::int4, 3, 16, 64, 32, DType::f16, true),
      make_desc(WeightFormat::int8, 3, 16, 64, 0, DType::bf16)};
  for (const auto& d : descs) {
    SCOPED_TRACE(std::string(to_string(d.format)));
    QuantizedWeights q(d);
    const auto w = gaussian(d.n * d.k, 3);
    quantize_expert(w.data(), 1, q);
    auto check = [](const auto& v, const char* what) {
      const size_t third = v.size() / 3;
      for (size_t i = 0; i < v.size(); ++i) {
        if (i < third || i >= 2 * third) {
          ASSERT_EQ(v[i], 0) << what << "[" << i << "]";
        }
      }
      EXPECT_TRUE(v.empty() || std::any_of(v.begin() + third, v.begin() + 2 * third, [](auto x) { return x != 0; })) << what;
    };
    check(q.codes, "codes");
    check(q.scales, "scales");
    check(q.zero_points, "zero_points");
    check(q.global_scales, "global_scales");
  }
}

TEST(QuantizeWeights, InvalidDescriptionsAreRejectedByName) {
  using ::testing::HasSubstr;
  auto message = [](const WeightDesc& d) {
    try {
      QuantizedWeights q(d);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(make_desc(WeightFormat::int4, 1, 4, 128, 48, DType::bf16)), HasSubstr("group_size = 48"));
  EXPECT_THAT(message(make_desc(WeightFormat::mxfp4, 1, 4, 100, 32, DType::ue8m0)), HasSubstr("k = 100"));
  EXPECT_THAT(message(make_desc(WeightFormat::fp8_channel, 1, 4, 64, 0, DType::f16)), HasSubstr("scale_dtype = f16"));
  EXPECT_THAT(message(make_desc(WeightFormat::nvfp4, 1, 4, 64, 16, DType::e4m3, false, 3)), HasSubstr("num_global_scales = 3"));
  EXPECT_THAT(message(make_desc(WeightFormat::int8, 1, 4, 64, 0, DType::f32, true)), HasSubstr("has_zero_point"));
  QuantizedWeights q(make_desc(WeightFormat::int8, 2, 4, 64, 0, DType::f32));
  const std::vector<float> w(4 * 64, 1.0f);
  EXPECT_THROW(quantize_expert(w.data(), 2, q), Error);
}

TEST(QuantizeWeights, BiasIsStoredInBiasDtype) {
  const std::vector<float> b = {1.0f, 0.1f, -3.0f};
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    auto d = make_desc(WeightFormat::int8, 2, 3, 32, 0, DType::f32);
    d.bias_dtype = t;
    QuantizedWeights q(d);
    set_bias(b.data(), 1, q);
    std::vector<float> out(3, -1.0f);
    bias_expert(d, q.view(), 0, out.data());
    EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 0.0f}));
    bias_expert(d, q.view(), 1, out.data());
    const float tenth = t == DType::f32 ? 0.1f : t == DType::bf16 ? bf16_to_f32(0x3DCD) : f16_to_f32(0x2E66);
    EXPECT_EQ(out, (std::vector<float>{1.0f, tenth, -3.0f})) << to_string(t);
  }
  const auto d = make_desc(WeightFormat::int8, 1, 3, 32, 0, DType::f32);
  QuantizedWeights q(d);
  EXPECT_THROW(set_bias(b.data(), 0, q), Error);
  std::vector<float> out(3, -1.0f);
  bias_expert(d, q.view(), 0, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

}  // namespace
}  // namespace moeq::ref
