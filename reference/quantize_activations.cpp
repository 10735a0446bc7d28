// Reference dynamic activation quantization (CONTRACT §5). Every row is quantized on its own, so
// a garbage row (NaN, inf, huge values) never changes another row's codes or scales.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "moeq/error.hpp"
#include "reference/formats.hpp"
#include "reference/quantize.hpp"

namespace moeq::ref {
namespace {

constexpr int64_t kMxBlock = 32;

void check_shape(ActFormat f, int64_t rows, int64_t cols) {
  if (f == ActFormat::none)
    throw Error("activation format " + std::string(to_string(f)) + " has no quantized codes");
  if (rows < 0 || cols < 0)
    throw Error("activation shape [rows = " + std::to_string(rows) + ", cols = " +
                std::to_string(cols) + "] has a negative dimension");
  if ((f == ActFormat::mxfp8 || f == ActFormat::mxfp4) && cols % kMxBlock != 0)
    throw Error("cols = " + std::to_string(cols) + " is not a multiple of 32, required by " +
                std::string(to_string(f)) + " activation scales");
}

// NaN elements are skipped (fmax semantics), as the GPU's fmaxf does.
float abs_max(const float* x, int64_t len) {
  float m = 0.0f;
  for (int64_t j = 0; j < len; ++j) {
    const float a = std::fabs(x[j]);
    m = a > m ? a : m;
  }
  return m;
}

// 2^(127 - code) is exact for codes 0..254, so x * it rounds exactly like x / 2^(code - 127).
float mx_inverse_scale(uint8_t code) {
  return code == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, 127 - code);
}

}  // namespace

int64_t act_code_bytes(ActFormat f, int64_t rows, int64_t cols) {
  check_shape(f, rows, cols);
  return rows * dtype_bytes(act_format_code_dtype(f), cols);
}

int64_t act_scale_bytes(ActFormat f, int64_t rows, int64_t cols) {
  check_shape(f, rows, cols);
  return f == ActFormat::fp8_token ? rows * 4 : rows * (cols / kMxBlock);
}

void quantize_activation(ActFormat f, const float* x, int64_t rows, int64_t cols, uint8_t* codes,
                         void* scales) {
  check_shape(f, rows, cols);
  uint8_t* scale_bytes = static_cast<uint8_t*>(scales);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    if (f == ActFormat::fp8_token) {
      const float s = std::max(abs_max(xr, cols), 1e-12f) / kE4m3Max;
      std::memcpy(scale_bytes + r * 4, &s, 4);
      uint8_t* out = codes + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = f32_to_e4m3(xr[c] / s);
      continue;
    }
    const bool fp4 = f == ActFormat::mxfp4;
    const int64_t blocks = cols / kMxBlock;
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = xr + b * kMxBlock;
      const uint8_t code = ue8m0_scale_for(abs_max(xb, kMxBlock), fp4 ? kE2m1Max : kE4m3Max);
      scale_bytes[r * blocks + b] = code;
      const float inv = mx_inverse_scale(code);
      if (fp4) {
        uint8_t* out = codes + r * (cols / 2) + b * (kMxBlock / 2);
        for (int64_t j = 0; j < kMxBlock; j += 2)
          out[j / 2] = static_cast<uint8_t>(f32_to_e2m1(xb[j] * inv) | (f32_to_e2m1(xb[j + 1] * inv) << 4));
      } else {
        uint8_t* out = codes + r * cols + b * kMxBlock;
        for (int64_t j = 0; j < kMxBlock; ++j) out[j] = f32_to_e4m3(xb[j] * inv);
      }
    }
  }
}

void dequantize_activation(ActFormat f, const uint8_t* codes, const void* scales, int64_t rows,
                           int64_t cols, float* out) {
  check_shape(f, rows, cols);
  const uint8_t* scale_bytes = static_cast<const uint8_t*>(scales);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    if (f == ActFormat::fp8_token) {
      float s;
      std::memcpy(&s, scale_bytes + r * 4, 4);
      for (int64_t c = 0; c < cols; ++c) o[c] = e4m3_to_f32(codes[r * cols + c]) * s;
      continue;
    }
    const int64_t blocks = cols / kMxBlock;
    for (int64_t c = 0; c < cols; ++c) {
      const float s = ue8m0_to_f32(scale_bytes[r * blocks + c / kMxBlock]);
      const float q = f == ActFormat::mxfp4 ? e2m1_to_f32(nibble_at(codes + r * (cols / 2), c))
                                            : e4m3_to_f32(codes[r * cols + c]);
      o[c] = q * s;
    }
  }
}

}  // namespace moeq::ref
