// Reference activations (CONTRACT §6), in fp32 with the usual libm functions.
#include "reference/activation.hpp"

#include <cmath>
#include <string>

#include "moeq/error.hpp"

namespace moeq::ref {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluTanhCubic = 0.044715f;

// Written with comparisons (not std::min / std::clamp) so that a NaN input stays NaN and a
// caller-given limit with lo > hi is not undefined behaviour.
float cap_above(float x, float hi) { return x > hi ? hi : x; }
float clamp_both(float x, float limit) { return x < -limit ? -limit : cap_above(x, limit); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }

float gelu_tanh(float x) {
  const float cube = x * x * x;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluTanhCubic * cube)));
}

float activation_value(const ActivationParams& p, float g, float u) {
  switch (p.kind) {
    case Activation::silu:
      if (p.silu_clamp > 0.0f) {
        g = cap_above(g, p.silu_clamp);
        u = clamp_both(u, p.silu_clamp);
      }
      return silu(g) * u;
    case Activation::gelu: return gelu_erf(g) * u;
    case Activation::gelu_tanh: return gelu_tanh(g) * u;
    case Activation::swiglu_oai: {
      g = cap_above(g, p.swiglu_limit);
      u = clamp_both(u, p.swiglu_limit);
      // Grouped as vLLM's kernel does: glu = g * sigmoid(alpha g), then (u + 1) * glu.
      const float glu = g * sigmoid(p.swiglu_alpha * g);
      return (u + 1.0f) * glu;
    }
    case Activation::swiglu_step:
      return cap_above(silu(g), p.swiglu_limit) * clamp_both(u, p.swiglu_limit);
    case Activation::silu_no_mul: return silu(g);
    case Activation::gelu_no_mul: return gelu_erf(g);
    case Activation::gelu_tanh_no_mul: return gelu_tanh(g);
    case Activation::relu2_no_mul: {
      const float r = g > 0.0f ? g : 0.0f;
      return r * r;
    }
  }
  throw Error("activation = " + std::to_string(static_cast<int>(p.kind)) + " is not a known activation");
}

void apply_activation(const ActivationParams& p, bool interleaved, const float* in, int64_t rows,
                      int64_t intermediate, float* out) {
  if (rows < 0) throw Error("rows = " + std::to_string(rows) + " is negative");
  if (intermediate < 0) throw Error("intermediate = " + std::to_string(intermediate) + " is negative");
  const bool gated = is_gated(p.kind);
  const int64_t in_cols = gated ? 2 * intermediate : intermediate;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * in_cols;
    float* dst = out + r * intermediate;
    for (int64_t j = 0; j < intermediate; ++j) {
      if (!gated) {
        dst[j] = activation_value(p, row[j], 0.0f);
      } else if (interleaved) {
        dst[j] = activation_value(p, row[2 * j], row[2 * j + 1]);
      } else {
        dst[j] = activation_value(p, row[j], row[intermediate + j]);
      }
    }
  }
}

}  // namespace moeq::ref
