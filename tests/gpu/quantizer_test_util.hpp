#pragma once
// Helpers of the GPU quantizer tests (test_elementwise_kernels.cpp, test_folded_quantizer.cpp):
// poisoned outputs with a guard tail, and the quantizers' input rows with every special class.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/driver.hpp"
#include "moeq/types.hpp"
#include "reference/formats.hpp"

namespace moeq::test {

namespace cu = moeq::cuda;
using moeq::DType;

constexpr size_t kGuardBytes = 64;

// A device buffer of `bytes` (+ guard) filled with 0xFF.
inline cu::DeviceBuffer poisoned(size_t bytes) {
  cu::DeviceBuffer b(bytes + kGuardBytes);
  b.fill_bytes(0xFF);
  return b;
}
inline std::vector<uint8_t> download(const cu::DeviceBuffer& b) { return b.to_host<uint8_t>(b.num_bytes()); }
inline void expect_guard_intact(const std::vector<uint8_t>& bytes, size_t payload, const std::string& what) {
  for (size_t i = payload; i < bytes.size(); ++i) {
    if (bytes[i] != 0xFF) {
      ADD_FAILURE() << what << ": wrote past the end, byte " << i << " (payload " << payload << ")";
      return;
    }
  }
}

inline uint16_t to_half(DType dt, float x) {
  return dt == DType::bf16 ? moeq::ref::f32_to_bf16(x) : moeq::ref::f32_to_f16(x);
}
// Random rows in [-range, range] with special rows: 0 all NaN (both signs), 1 all zero, 2 huge
// (max finite and +-inf), 3 tiny, 4 one NaN among normal values, 5 mixed scales per 32 columns.
inline std::vector<uint16_t> quantize_input(DType dt, int64_t rows, int64_t stride, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const float big = dt == DType::bf16 ? 3.3e38f : 65504.0f;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint16_t> v(static_cast<size_t>(rows * stride), to_half(dt, 12345.0f));  // padding: not read
  for (int64_t r = 0; r < rows; ++r) {
    const float range = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    for (int64_t c = 0; c < cols; ++c) {
      float x = uni(rng) * range;
      switch (r) {
        case 0: x = (c % 2) ? -std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::quiet_NaN(); break;
        case 1: x = 0.0f; break;
        case 2: x = (c % 5 == 0) ? ((c % 10 == 0) ? inf : -inf) : uni(rng) * big; break;
        case 3: x = uni(rng) * 1e-30f; break;
        case 4: x = (c == cols / 2) ? -std::numeric_limits<float>::quiet_NaN() : x; break;
        case 5: x = uni(rng) * std::ldexp(1.0f, static_cast<int>((c / 32) % 30) - 15); break;
        default: break;
      }
      v[static_cast<size_t>(r * stride + c)] = to_half(dt, x);
    }
  }
  return v;
}

}  // namespace moeq::test
