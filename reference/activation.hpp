#pragma once
// Reference activations (CONTRACT §6), computed in fp32.
#include <cstdint>

#include "moeq/experts.hpp"

namespace moeq::ref {

float silu(float x);
float gelu_erf(float x);
float gelu_tanh(float x);

// in: [rows, n_in] with n_in = 2*I (gated) or I; out: [rows, I], fp32 before rounding.
// Gated: gate = first half, up = second half; interleaved: gate = column 2j, up = 2j+1.
// The input is never modified (RELU2 included).
void apply_activation(const ActivationParams& p, bool interleaved, const float* in, int64_t rows,
                      int64_t intermediate, float* out);

// One element of a gated activation (g, u) or a non-gated one (g; u ignored).
float activation_value(const ActivationParams& p, float g, float u);

}  // namespace moeq::ref
