// Reference activations (CONTRACT §6) against float64 formulas written out independently here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "moeq/types.hpp"
#include "reference/activation.hpp"

namespace {

using moeq::Activation;
using moeq::ActivationParams;
using namespace moeq::ref;

double silu64(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid64(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_erf64(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh64(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double clamp64(double x, double limit) { return std::min(std::max(x, -limit), limit); }

double expected64(const ActivationParams& p, double g, double u) {
  const double limit = p.swiglu_limit, clamp = p.silu_clamp;
  switch (p.kind) {
    case Activation::silu:
      return clamp > 0 ? silu64(std::min(g, clamp)) * clamp64(u, clamp) : silu64(g) * u;
    case Activation::gelu: return gelu_erf64(g) * u;
    case Activation::gelu_tanh: return gelu_tanh64(g) * u;
    case Activation::swiglu_oai: {
      const double gc = std::min(g, limit);
      return (clamp64(u, limit) + 1.0) * gc * sigmoid64(double{p.swiglu_alpha} * gc);
    }
    case Activation::swiglu_step: return std::min(silu64(g), limit) * clamp64(u, limit);
    case Activation::silu_no_mul: return silu64(g);
    case Activation::gelu_no_mul: return gelu_erf64(g);
    case Activation::gelu_tanh_no_mul: return gelu_tanh64(g);
    case Activation::relu2_no_mul: return g > 0 ? g * g : 0.0;
  }
  return NAN;
}

// A few fp32 ulps of the result, widened where fp32 itself cannot do better: exp/erf/tanh of a
// rounded argument amplify its error by the argument's size, and 1 + erf (or 1 + tanh) cancels
// for negative x, leaving an absolute error of about eps * |x| in the GELUs.
double tolerance(const ActivationParams& p, double g, double u, double expected) {
  const double eps = std::numeric_limits<float>::epsilon();
  const bool gated = moeq::is_gated(p.kind);
  const double uu = gated ? std::fabs(u) + 1.0 : 1.0;
  const double argument = std::fabs(g) * (p.kind == Activation::swiglu_oai ? p.swiglu_alpha : 1.0);
  const bool gelu = p.kind == Activation::gelu || p.kind == Activation::gelu_tanh ||
                    p.kind == Activation::gelu_no_mul || p.kind == Activation::gelu_tanh_no_mul;
  return 4.0 * eps * (std::fabs(expected) * (2.0 + argument) + (gelu ? std::fabs(g) * uu : 0.0)) + 1e-30;
}

std::vector<ActivationParams> all_params() {
  std::vector<ActivationParams> out;
  for (Activation kind : moeq::all_values<Activation>()) {
    out.push_back(ActivationParams{kind, 1.702f, 7.0f, 0.0f});
    out.push_back(ActivationParams{kind, 1.0f, 3.5f, 4.0f});  // other alpha / limit / SILU clamp
  }
  return out;
}

std::string describe(const ActivationParams& p) {
  return std::string(moeq::to_string(p.kind)) + " alpha=" + std::to_string(p.swiglu_alpha) +
         " limit=" + std::to_string(p.swiglu_limit) + " clamp=" + std::to_string(p.silu_clamp);
}

TEST(Activation, EveryKindMatchesFloat64Formula) {
  std::vector<float> gates = {0.0f, 1e-3f, -1e-3f, 3.5f, -3.5f, 4.0f, 7.0f, -7.0f};
  for (float g = -10.0f; g <= 10.0f; g += 0.37f) gates.push_back(g);
  const std::vector<float> ups = {-9.0f, -7.0f, -2.5f, -0.3f, 0.0f, 0.7f, 3.0f, 7.0f, 8.5f};
  for (const ActivationParams& p : all_params()) {
    SCOPED_TRACE(describe(p));
    for (float g : gates)
      for (float u : ups) {
        const double expected = expected64(p, g, u);
        ASSERT_NEAR(activation_value(p, g, u), expected, tolerance(p, g, u, expected)) << "g=" << g << " u=" << u;
      }
  }
  EXPECT_NEAR(silu(1.5f), silu64(1.5), 1e-6);
  EXPECT_NEAR(gelu_erf(1.5f), gelu_erf64(1.5), 1e-6);
  EXPECT_NEAR(gelu_tanh(1.5f), gelu_tanh64(1.5), 1e-6);
}

TEST(Activation, SiluClampAtAndBeyondTheLimit) {
  const ActivationParams clamped{Activation::silu, 1.702f, 7.0f, 3.0f};
  EXPECT_EQ(activation_value(clamped, 3.0f, 1.0f), silu(3.0f));
  EXPECT_EQ(activation_value(clamped, 5.0f, 1.0f), silu(3.0f));    // gate capped above
  EXPECT_EQ(activation_value(clamped, -5.0f, 1.0f), silu(-5.0f));  // but not below
  EXPECT_EQ(activation_value(clamped, 1.0f, 10.0f), silu(1.0f) * 3.0f);
  EXPECT_EQ(activation_value(clamped, 1.0f, -10.0f), silu(1.0f) * -3.0f);
  EXPECT_EQ(activation_value(clamped, 1.0f, 2.5f), silu(1.0f) * 2.5f);
  const ActivationParams plain{Activation::silu, 1.702f, 7.0f, 0.0f};
  EXPECT_EQ(activation_value(plain, 5.0f, 10.0f), silu(5.0f) * 10.0f);
}

TEST(Activation, SwigluClampsAtAndBeyondTheLimit) {
  const ActivationParams oai{Activation::swiglu_oai, 1.702f, 7.0f, 0.0f};
  EXPECT_EQ(activation_value(oai, 100.0f, 0.5f), activation_value(oai, 7.0f, 0.5f));
  EXPECT_EQ(activation_value(oai, 2.0f, 100.0f), activation_value(oai, 2.0f, 7.0f));
  EXPECT_EQ(activation_value(oai, 2.0f, -100.0f), activation_value(oai, 2.0f, -7.0f));
  EXPECT_NE(activation_value(oai, -100.0f, 0.0f), activation_value(oai, -7.0f, 0.0f));  // no lower cap
  EXPECT_NE(activation_value(oai, 6.9f, 0.5f), activation_value(oai, 7.0f, 0.5f));
  const ActivationParams custom{Activation::swiglu_oai, 1.0f, 2.0f, 0.0f};
  EXPECT_NEAR(activation_value(custom, 3.0f, 5.0f), 3.0 * 2.0 * sigmoid64(2.0), 1e-6);

  const ActivationParams step{Activation::swiglu_step, 1.702f, 7.0f, 0.0f};
  EXPECT_EQ(activation_value(step, 100.0f, 1.0f), 7.0f);
  EXPECT_EQ(activation_value(step, 100.0f, 100.0f), 49.0f);
  EXPECT_EQ(activation_value(step, 2.0f, -100.0f), silu(2.0f) * -7.0f);
  EXPECT_EQ(activation_value(step, -100.0f, 1.0f), silu(-100.0f));  // silu is capped only above
  const ActivationParams step2{Activation::swiglu_step, 1.702f, 2.0f, 0.0f};
  EXPECT_EQ(activation_value(step2, 3.0f, 1.0f), 2.0f);
  EXPECT_EQ(activation_value(step2, 1.0f, 1.0f), silu(1.0f));
}

TEST(Activation, InterleavedAndSplitLayoutsAgree) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int64_t rows = 5, inter = 23, width = 2 * inter;
  std::vector<float> split(rows * width), interleaved(rows * width);
  for (auto& v : split) v = normal(rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < inter; ++j) {
      interleaved[r * width + 2 * j] = split[r * width + j];
      interleaved[r * width + 2 * j + 1] = split[r * width + inter + j];
    }
  for (const ActivationParams& p : all_params()) {
    SCOPED_TRACE(describe(p));
    std::vector<float> a(rows * inter), b(rows * inter), c(rows * inter);
    if (moeq::is_gated(p.kind)) {
      apply_activation(p, false, split.data(), rows, inter, a.data());
      apply_activation(p, true, interleaved.data(), rows, inter, b.data());
      apply_activation(p, true, split.data(), rows, inter, c.data());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
      EXPECT_NE(a, c);  // the flag is honoured
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < inter; ++j)
          ASSERT_EQ(a[r * inter + j], activation_value(p, split[r * width + j], split[r * width + inter + j]));
    } else {
      apply_activation(p, false, split.data(), rows, inter, a.data());
      apply_activation(p, true, split.data(), rows, inter, b.data());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);  // rows are I wide, no gate/up
      for (int64_t i = 0; i < rows * inter; ++i) ASSERT_EQ(a[i], activation_value(p, split[i], 0.0f));
    }
  }
}

TEST(Activation, Relu2SquaresPositivePartAndKeepsInput) {
  const std::vector<float> in = {-3.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e30f};
  const std::vector<float> before = in;
  std::vector<float> out(in.size(), NAN);
  apply_activation(ActivationParams{Activation::relu2_no_mul}, false, in.data(), 2, 3, out.data());
  EXPECT_EQ(std::memcmp(in.data(), before.data(), in.size() * 4), 0);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.25f, 9.0f, 0.0f}));
}

TEST(Activation, SpecialValuesDoNotCrash) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const ActivationParams& p : all_params()) {
    EXPECT_EQ(activation_value(p, 0.0f, 0.0f), 0.0f) << describe(p);
    for (float g : {1e30f, -1e30f, inf, -inf, nan, 3e38f})
      for (float u : {0.0f, 1.0f, -1e30f, nan}) (void)activation_value(p, g, u);
  }
  EXPECT_EQ(silu(1e30f), 1e30f);
  EXPECT_EQ(silu(-1e30f), 0.0f);
  EXPECT_EQ(gelu_erf(1e30f), 1e30f);
  EXPECT_EQ(gelu_erf(-1e30f), 0.0f);
  EXPECT_EQ(gelu_tanh(1e30f), 1e30f);
  EXPECT_EQ(gelu_tanh(-1e30f), 0.0f);
  EXPECT_TRUE(std::isnan(silu(nan)));
  EXPECT_TRUE(std::isnan(activation_value(ActivationParams{Activation::swiglu_oai}, nan, 1.0f)));
}

}  // namespace
