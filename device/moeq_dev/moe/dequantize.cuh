#pragma once
// Quantized activations (moe/quantize.cuh's codes and scales) back to 16-bit values, the A operand
// of the bf16 / f16 MoE GEMM: the quantized-activation pairs' path where the GEMM's MMAs are 16-bit
// (CONTRACT §5). The values are those the reference computes with (reference/quantize_activations.cpp
// dequantize_activation), not a re-rounding of the input:
//   MXFP8 / MXFP4: q * 2^(code - 127), exact in the dtype where it is in range: q has at most 4
//     significant bits, and |q * 2^(code - 127)| is at most about twice the block's amax (the code
//     rounds up), so only f16 blocks with an amax near its limit (>= 57344 / 63488 for MXFP4 /
//     MXFP8) can exceed 65504: those clamp to +-65504 (at most 0.05% off, where the reference's fp32
//     value is 65536).
//   FP8 per token: q alone (every e4m3 value is exact in bf16 and f16); the row's fp32 scale
//     multiplies the GEMM's accumulators in its epilogue (MoeGemmParams::a_row_scales).
// NOTE: exact as long as the value is not below the dtype's smallest subnormal grid: f16 blocks
// whose amax is under ~2^-7 (MXFP8) / 2^-21 (MXFP4) lose bits of their smallest codes (at most
// 2^-25 absolute); bf16 only for amax under ~2^-116. A NaN code stays NaN.
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/moe/activation.cuh"
#include "moeq_dev/moe/quantize.cuh"

namespace moeq_dev {

// The code of element (row, col) and, MX, its block's scale as a float.
template <QuantFormat kFormat>
__device__ __forceinline__ unsigned code_at(const unsigned char* codes, long long row, int cols, int col) {
  if constexpr (kFormat == QuantFormat::kMxfp4) {
    const unsigned byte = codes[row * (cols / 2) + col / 2];
    return (col & 1) ? byte >> 4 : byte & 0xFu;
  } else {
    return codes[row * static_cast<long long>(cols) + col];
  }
}

template <QuantFormat kFormat>
__device__ __forceinline__ float mx_scale_at(const unsigned char* mx_scales, long long row, int cols, int col) {
  if constexpr (kFormat == QuantFormat::kFp8Token) return 1.0f;
  return ue8m0_to_f32(mx_scales[row * (cols / kMxBlock) + col / kMxBlock]);
}

// out [rows, cols] with row stride out_row_stride (elements) from codes / scales as
// reference/quantize.hpp. kVec = 8: the host checked cols and the stride are multiples of 8 and
// out is 16-byte aligned (one 16-byte store per 8 elements; codes rows are dense, so 8 e4m3 codes
// are 8-byte and 8 e2m1 codes 4-byte aligned); else one element per item.
template <QuantFormat kFormat, bool kBf16, int kVec>
__device__ __forceinline__ void dequantize_rows(const unsigned char* codes, const void* scales, int rows, int cols,
                                                unsigned short* out, long long out_row_stride) {
  const unsigned char* mx_scales = static_cast<const unsigned char*>(scales);
  // PERF: 32-bit item arithmetic (the host keeps rows * cols below 2^31).
  const unsigned vecs_per_row = static_cast<unsigned>(cols / kVec);
  const unsigned num_items = static_cast<unsigned>(rows) * vecs_per_row;
  for (unsigned item = blockIdx.x * blockDim.x + threadIdx.x; item < num_items; item += gridDim.x * blockDim.x) {
    const unsigned row32 = item / vecs_per_row;
    const long long row = row32;
    const int col = static_cast<int>(item - row32 * vecs_per_row) * kVec;
    unsigned short v[kVec];
    // 8 columns from a multiple of 8 lie in one 32-column MX block: one scale.
    const float mx_scale = mx_scale_at<kFormat>(mx_scales, row, cols, col);
    if constexpr (kVec == 8) {
      // PERF: the 8 codes in one load (8 bytes e4m3, 4 bytes e2m1), not a byte load per element.
      if constexpr (kFormat == QuantFormat::kMxfp4) {
        const unsigned w = *reinterpret_cast<const unsigned*>(codes + row * (cols / 2) + col / 2);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = code_value_bits<kFormat, kBf16>((w >> (4 * i)) & 0xFu, mx_scale);
      } else {
        const uint2 w = *reinterpret_cast<const uint2*>(codes + row * static_cast<long long>(cols) + col);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          v[i] = code_value_bits<kFormat, kBf16>(((i < 4 ? w.x : w.y) >> (8 * (i % 4))) & 0xFFu, mx_scale);
      }
    } else {
      v[0] = code_value_bits<kFormat, kBf16>(code_at<kFormat>(codes, row, cols, col), mx_scale);
    }
    unsigned short* dst = out + row * out_row_stride + col;
    if constexpr (kVec == 8) {
      unsigned w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = v[2 * i] | (static_cast<unsigned>(v[2 * i + 1]) << 16);
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      *dst = v[0];
    }
  }
}

}  // namespace moeq_dev
