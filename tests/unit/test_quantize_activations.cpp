// Dynamic activation quantization (CONTRACT §5): per-row independence, the fp8 per-token rule
// against an independent encoder, the MX scale rule, inverse bounds and argument checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"

namespace moeq::ref {
namespace {

struct ActQuant {
  std::vector<uint8_t> codes, scales;
};

ActQuant quantize(ActFormat f, const std::vector<float>& x, int64_t rows, int64_t cols) {
  ActQuant q{std::vector<uint8_t>(static_cast<size_t>(act_code_bytes(f, rows, cols))),
             std::vector<uint8_t>(static_cast<size_t>(act_scale_bytes(f, rows, cols)))};
  quantize_activation(f, x.data(), rows, cols, q.codes.data(), q.scales.data());
  return q;
}

std::vector<float> random_rows(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)  // rows of very different magnitudes
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = dist(gen) * std::ldexp(1.0f, static_cast<int>(r % 9) * 3 - 12);
  return x;
}

// e4m3 RNE-satfinite by nearest search over the finite magnitudes; ties go to the even code.
uint8_t e4m3_by_search(float x) {
  static const std::vector<float> magnitudes = [] {
    std::vector<float> m;
    for (int c = 0; c < 127; ++c) m.push_back(e4m3_to_f32(static_cast<uint8_t>(c)));
    return m;
  }();
  const double a = std::fabs(x);
  int best = 0;
  double best_dist = INFINITY;
  for (int c = 0; c < 127; ++c) {
    const double dist = std::fabs(magnitudes[c] - a);
    if (dist < best_dist || (dist == best_dist && c % 2 == 0)) best = c, best_dist = dist;
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(QuantizeActivations, BufferSizes) {
  EXPECT_EQ(act_code_bytes(ActFormat::fp8_token, 3, 100), 300);
  EXPECT_EQ(act_scale_bytes(ActFormat::fp8_token, 3, 100), 12);
  EXPECT_EQ(act_code_bytes(ActFormat::mxfp8, 3, 64), 192);
  EXPECT_EQ(act_scale_bytes(ActFormat::mxfp8, 3, 64), 6);
  EXPECT_EQ(act_code_bytes(ActFormat::mxfp4, 3, 64), 96);
  EXPECT_EQ(act_scale_bytes(ActFormat::mxfp4, 3, 64), 6);
}

TEST(QuantizeActivations, Fp8TokenMatchesIndependentReimplementation) {
  const int64_t rows = 9, cols = 200;
  auto x = random_rows(rows, cols, 1);
  std::fill(x.begin() + 4 * cols, x.begin() + 5 * cols, 0.0f);  // all-zero row: the 1e-12 floor
  const auto q = quantize(ActFormat::fp8_token, x, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
    const float s = std::max(amax, 1e-12f) / 448.0f;
    float stored;
    std::memcpy(&stored, &q.scales[r * 4], 4);
    EXPECT_EQ(stored, s) << "row " << r;
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(q.codes[r * cols + c], e4m3_by_search(x[r * cols + c] / s)) << r << ", " << c;
  }
}

// x / s and x * (1 / s) differ by an ulp now and then; at an e4m3 tie that changes the code.
// Finds such an element and checks that the quantizer divides.
TEST(QuantizeActivations, Fp8TokenDividesByTheScale) {
  for (float amax : {3.0f, 5.0f, 7.0f, 10.0f, 0.3f, 11.0f, 13.0f})
    for (float tie : {1.0625f, 1.1875f, 17.0f, 2.375f, 40.0f, 100.0f, 0.3125f}) {
      const float s = amax / 448.0f;
      float x = tie * s;
      for (int step = 0; step < 8; ++step, x = std::nextafter(x, INFINITY)) {
        if (x / s != tie || f32_to_e4m3(x * (1.0f / s)) == f32_to_e4m3(tie)) continue;
        const std::vector<float> row = {amax, x};
        const auto q = quantize(ActFormat::fp8_token, row, 1, 2);
        EXPECT_EQ(q.codes[1], e4m3_by_search(tie)) << "amax " << amax << " x " << x;
        return;
      }
    }
  FAIL() << "no element found where x / s and x * (1 / s) round to different codes";
}

TEST(QuantizeActivations, GarbageRowDoesNotChangeOtherRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  for (ActFormat f : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
    const int64_t rows = 6, cols = 64;
    auto x = random_rows(rows, cols, 2);
    const auto clean = quantize(f, x, rows, cols);
    for (int64_t c = 0; c < cols; ++c) x[3 * cols + c] = c % 4 == 0 ? nan : c % 4 == 1 ? inf : c % 4 == 2 ? -1e38f : 1e30f;
    const auto dirty = quantize(f, x, rows, cols);
    const size_t code_row = clean.codes.size() / rows, scale_row = clean.scales.size() / rows;
    for (int64_t r = 0; r < rows; ++r) {
      if (r == 3) continue;
      for (size_t i = r * code_row; i < (r + 1) * code_row; ++i) ASSERT_EQ(clean.codes[i], dirty.codes[i]) << to_string(f);
      for (size_t i = r * scale_row; i < (r + 1) * scale_row; ++i) ASSERT_EQ(clean.scales[i], dirty.scales[i]) << to_string(f);
    }
    std::vector<float> out(x.size());
    dequantize_activation(f, dirty.codes.data(), dirty.scales.data(), rows, cols, out.data());
  }
}

TEST(QuantizeActivations, MxScaleIsCeilLog2OfAmaxOverMaxElement) {
  for (ActFormat f : {ActFormat::mxfp8, ActFormat::mxfp4}) {
    const float max_elem = f == ActFormat::mxfp4 ? 6.0f : 448.0f;
    const std::vector<float> amax = {max_elem, std::nextafter(max_elem, INFINITY), 0.0f, 1.0f, 3e5f, 1e-30f};
    std::vector<float> x(amax.size() * 32, 0.0f);
    for (size_t b = 0; b < amax.size(); ++b) {
      x[b * 32 + 3] = -amax[b];
      x[b * 32 + 4] = amax[b] / 3;
    }
    const int64_t cols = static_cast<int64_t>(x.size());
    const auto q = quantize(f, x, 1, cols);
    for (size_t b = 0; b < amax.size(); ++b) {
      const int expected = amax[b] == 0.0f ? 0 : 127 + static_cast<int>(std::ceil(std::log2(double(amax[b]) / max_elem)));
      EXPECT_EQ(q.scales[b], expected) << to_string(f) << " amax " << amax[b];
    }
    EXPECT_EQ(q.scales[0], 127);
    EXPECT_EQ(q.scales[1], 128);
    const size_t bytes_per_block = f == ActFormat::mxfp4 ? 16 : 32;  // the amax-0 block: zero codes
    for (size_t i = 2 * bytes_per_block; i < 3 * bytes_per_block; ++i) EXPECT_EQ(q.codes[i] & 0x77, 0) << i;
    std::vector<float> out(x.size());
    dequantize_activation(f, q.codes.data(), q.scales.data(), 1, cols, out.data());
    EXPECT_EQ(out[3], -max_elem);  // an amax that is max_elem * 2^p is exact
  }
}

// Measured relative Frobenius errors (rows of N(0, 1) * 2^(3j - 12)): fp8_token 0.025,
// mxfp8 0.027, mxfp4 0.107; bounds ~15% above.
TEST(QuantizeActivations, DequantizeIsWithinHalfAStepOfTheGrid) {
  const int64_t rows = 16, cols = 256;
  const auto x = random_rows(rows, cols, 3);
  for (ActFormat f : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4}) {
    const auto q = quantize(f, x, rows, cols);
    std::vector<float> out(x.size());
    dequantize_activation(f, q.codes.data(), q.scales.data(), rows, cols, out.data());
    double err2 = 0, ref2 = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float s;
        if (f == ActFormat::fp8_token) std::memcpy(&s, &q.scales[r * 4], 4);
        else s = ue8m0_to_f32(q.scales[r * (cols / 32) + c / 32]);
        const double xi = x[r * cols + c], err = std::fabs(out[r * cols + c] - xi);
        // e4m3: half an ulp is 2^-4 of the value (2^-10 in the subnormals); e2m1: a quarter.
        const double bound = f == ActFormat::mxfp4 ? std::max(0.25 * s, 0.25 * std::fabs(xi))
                                                   : std::max(std::ldexp(double(s), -10), std::ldexp(std::fabs(xi), -4));
        ASSERT_LE(err, bound * (1 + 1e-6)) << to_string(f) << " " << r << ", " << c;
        err2 += err * err;
        ref2 += xi * xi;
      }
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LT(rel, f == ActFormat::mxfp4 ? 0.125 : 0.031) << to_string(f);
  }
}

TEST(QuantizeActivations, MxRejectsColsNotMultipleOf32) {
  using ::testing::HasSubstr;
  const std::vector<float> x(200, 1.0f);
  std::vector<uint8_t> codes(400), scales(400);
  for (ActFormat f : {ActFormat::mxfp8, ActFormat::mxfp4}) {
    try {
      quantize_activation(f, x.data(), 2, 100, codes.data(), scales.data());
      ADD_FAILURE() << "no error for " << to_string(f);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("cols = 100"));
    }
    EXPECT_THROW(act_scale_bytes(f, 2, 100), Error);
  }
  EXPECT_NO_THROW(quantize_activation(ActFormat::fp8_token, x.data(), 2, 100, codes.data(), scales.data()));
}

}  // namespace
}  // namespace moeq::ref
