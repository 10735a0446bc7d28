#pragma once
// Reference quantizers (float -> canonical codes and scales) and dequantizers for the 7 weight
// formats (CONTRACT §4) and the 3 dynamic activation formats (CONTRACT §5). Rules in
// docs/numerics.md; the GPU quantizers must write exactly the codes and scales written here.
#include <cstdint>
#include <vector>

#include "moeq/types.hpp"
#include "moeq/weights.hpp"

namespace moeq::ref {

// Owning host storage for one GEMM's canonical weights, sized from a WeightDesc.
struct QuantizedWeights {
  WeightDesc desc;
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;        // raw bytes of desc.scale_dtype
  std::vector<float> global_scales;   // NVFP4 only
  std::vector<uint8_t> zero_points;   // INT4 with zero point only
  std::vector<uint8_t> bias;          // raw bytes of desc.bias_dtype

  // Zero-filled storage of the right sizes. Throws moeq::Error for a desc outside CONTRACT §4
  // (scale dtype, group size, k divisibility, global scale count, zero point on INT4 only).
  explicit QuantizedWeights(const WeightDesc& d);
  WeightView view() const;
};

// Quantizes expert e from float weights w [n, k] (row = output channel) into q.
// Rules: MX: scale 2^ceil(log2(amax/max_elem)) (ue8m0), codes RNE-satfinite of x/scale.
// NVFP4: ModelOpt two-level: g = amax/(6*448) per expert (per half with 2 global scales),
//   block scale e4m3(amax_blk/(6*g)) (1.0 when amax_blk is 0), codes e2m1(x/(s*g)), with 6*g
//   and s*g each rounded in fp32 first.
// FP8 channel / block: s = max(amax, 1e-12)/448 in fp32, codes e4m3(x/s).
// INT4: symmetric s = amax/7 rounded to scale_dtype, q = clamp(rne(x/s), -8, 7), code q+8;
//   with zero point: min/max of the group extended to include 0 (so zp stays in [0, 15] and 0 is
//   exact), s = (max-min)/15, zp = clamp(rne(-min/s), 0, 15), code = clamp(rne(x/s)+zp, 0, 15).
// INT8: s = amax/127 rounded to scale_dtype, q = clamp(rne(x/s), -128, 127), code q+128.
// All divisions are true fp32 divisions by the stored scale. amax skips NaN elements (fmax).
// A zero scale (all-zero group, or a scale that rounds to 0) encodes every element as value zero:
//   INT codes 8 / 128 (zero point: codes 0, zp 0), float codes 0.
void quantize_expert(const float* w, int64_t e, QuantizedWeights& q);

// Writes bias b [n] of expert e, rounded to desc.bias_dtype.
void set_bias(const float* b, int64_t e, QuantizedWeights& q);

// Dequantizes expert e of canonical weights into out [n, k] (fp32; exact for every format:
// every product code*scale*global below is exact or rounded once in fp32, as documented).
void dequantize_expert(const WeightDesc& d, const WeightView& v, int64_t e, float* out);

// Bias of expert e as float [n]; zeros when the desc has no bias.
void bias_expert(const WeightDesc& d, const WeightView& v, int64_t e, float* out);

// ---- Dynamic activation quantization (per row; garbage rows never affect valid ones) ----
// Bytes of the codes and of the scales for a [rows, cols] activation in format f. Throw
// moeq::Error for ActFormat::none and, for MX formats, for cols not a multiple of 32.
int64_t act_code_bytes(ActFormat f, int64_t rows, int64_t cols);
int64_t act_scale_bytes(ActFormat f, int64_t rows, int64_t cols);

// x [rows, cols] fp32 (decoded from the 16-bit buffer) -> codes and scales:
//   fp8_token: codes e4m3 [rows, cols], scales f32 [rows]: s = max(amax,1e-12)/448, q = e4m3(x/s)
//   mxfp8:     codes e4m3 [rows, cols], scales ue8m0 [rows, cols/32]
//   mxfp4:     codes e2m1 [rows, cols/2] (packed), scales ue8m0 [rows, cols/32]
// NOTE: x/s is a true IEEE division (not x * (1/s)); GPU kernels must do the same to match.
void quantize_activation(ActFormat f, const float* x, int64_t rows, int64_t cols, uint8_t* codes,
                         void* scales);
// Inverse: decoded values, fp32 [rows, cols].
void dequantize_activation(ActFormat f, const uint8_t* codes, const void* scales, int64_t rows,
                           int64_t cols, float* out);

}  // namespace moeq::ref
