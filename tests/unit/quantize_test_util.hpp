#pragma once
// Helpers shared by the quantizer tests.
#include <cstring>
#include <random>
#include <vector>

#include "reference/quantize.hpp"

namespace moeq::ref::test_util {

inline WeightDesc make_desc(WeightFormat f, int64_t e, int64_t n, int64_t k, int group,
                            DType scale, bool zp = false, int globals = 0) {
  WeightDesc d;
  d.format = f;
  d.num_experts = e;
  d.n = n;
  d.k = k;
  d.group_size = group;
  d.scale_dtype = scale;
  d.has_zero_point = zp;
  d.num_global_scales = globals;
  return d;
}

inline std::vector<float> gaussian(size_t count, unsigned seed, float sigma = 0.02f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// Quantizes a single-expert weight matrix.
inline QuantizedWeights quantize_single(const WeightDesc& d, const std::vector<float>& w) {
  QuantizedWeights q(d);
  quantize_expert(w.data(), 0, q);
  return q;
}

inline std::vector<float> dequantize_single(const QuantizedWeights& q) {
  std::vector<float> out(static_cast<size_t>(q.desc.n * q.desc.k));
  dequantize_expert(q.desc, q.view(), 0, out.data());
  return out;
}

inline float f32_at(const std::vector<uint8_t>& bytes, size_t i) {
  float x;
  std::memcpy(&x, &bytes[i * 4], 4);
  return x;
}

inline uint16_t u16_at(const std::vector<uint8_t>& bytes, size_t i) {
  uint16_t x;
  std::memcpy(&x, &bytes[i * 2], 2);
  return x;
}

}  // namespace moeq::ref::test_util
