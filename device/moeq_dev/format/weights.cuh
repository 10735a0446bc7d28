#pragma once
// Dequantization of the canonical weight layouts (CONTRACT §4) by 16-byte chunks of codes:
// one chunk is 32 codes of a 4-bit format or 16 codes of an 8-bit one, along K of one row.
// Values are code value * scale (* global for NVFP4) in fp32, as reference/quantize_weights.cpp
// computes them; the GEMM rounds them once to the activation dtype.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/ptx/cvt.cuh"

namespace moeq_dev {

// The same order as moeq::WeightFormat.
enum class WeightFormatId : int { kMxfp4 = 0, kNvfp4, kMxfp8, kFp8Channel, kFp8Block, kInt4, kInt8 };
// Scale storage of INT formats (the others are fixed by the format).
enum class ScaleDtypeId : int { kBf16 = 0, kF16, kF32 };

template <WeightFormatId F>
struct WeightFormatTraits {
  static constexpr bool kFourBit = F == WeightFormatId::kMxfp4 || F == WeightFormatId::kNvfp4 || F == WeightFormatId::kInt4;
  static constexpr int kCodeBits = kFourBit ? 4 : 8;
  static constexpr int kElemsPerChunk = 128 / kCodeBits;  // 32 or 16
};

__device__ __forceinline__ float load_scale_value(const void* base, long long index, ScaleDtypeId dtype) {
  if (dtype == ScaleDtypeId::kF32) return static_cast<const float*>(base)[index];
  const unsigned short bits = static_cast<const unsigned short*>(base)[index];
  return dtype == ScaleDtypeId::kBf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// Scales of one chunk of expert e, row n, columns [k, k + elems): the chunk never straddles a
// group (groups are multiples of the chunk: MX 32, INT >= 32, FP8 block 128), except NVFP4's
// 16-element groups: a 32-code chunk holds two (scale0 for codes 0-15, scale1 for 16-31).
struct ChunkScales {
  float scale0 = 1.0f;
  float scale1 = 1.0f;
  float zero_point = 0.0f;  // INT: value = (code - zero_point) * scale
};

// How a GEMM's weights are scaled: run-time values (one compiled kernel serves them all).
struct WeightScaling {
  const void* scales;
  const float* global_scales;        // NVFP4
  const unsigned char* zero_points;  // INT4 with zero points, else null
  int group_size;                    // INT4 / INT8: K per scale, 0 = per channel
  ScaleDtypeId scale_dtype;          // INT4 / INT8
  int num_global_scales;             // NVFP4: 1 or 2 ([gate; up] halves)
};

template <class Cfg>
__device__ __forceinline__ ChunkScales load_chunk_scales(const WeightScaling& w, int e, int n, int k, int N, int K) {
  ChunkScales s;
  constexpr WeightFormatId F = Cfg::kFormat;
  const long long row = static_cast<long long>(e) * N + n;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) {
    s.scale0 = ue8m0_to_f32(static_cast<const unsigned char*>(w.scales)[row * (K / 32) + k / 32]);
  } else if constexpr (F == WeightFormatId::kNvfp4) {
    const float g = w.global_scales[e * w.num_global_scales + (w.num_global_scales == 2 && n >= N / 2 ? 1 : 0)];
    const unsigned char* s8 = static_cast<const unsigned char*>(w.scales) + row * (K / 16) + k / 16;
    // PERF: (code * s) * g as two fp32 products, like the reference dequantizer.
    s.scale0 = e4m3_to_f32(s8[0]);
    s.scale1 = e4m3_to_f32(s8[1]);
    s.zero_point = g;  // NOTE: reused as the second-level scale for NVFP4
  } else if constexpr (F == WeightFormatId::kFp8Channel) {
    s.scale0 = static_cast<const float*>(w.scales)[row];
  } else if constexpr (F == WeightFormatId::kFp8Block) {
    const int blocks_n = (N + 127) / 128, blocks_k = (K + 127) / 128;
    s.scale0 = static_cast<const float*>(w.scales)[(static_cast<long long>(e) * blocks_n + n / 128) * blocks_k + k / 128];
  } else {  // INT4 / INT8
    const int groups = w.group_size > 0 ? K / w.group_size : 1;
    const long long index = row * groups + (w.group_size > 0 ? k / w.group_size : 0);
    s.scale0 = load_scale_value(w.scales, index, w.scale_dtype);
    if (w.zero_points != nullptr) {
      s.zero_point = static_cast<float>(w.zero_points[index]);
    } else {
      s.zero_point = F == WeightFormatId::kInt4 ? 8.0f : 128.0f;
    }
  }
  return s;
}

// Value of code i (0-based within the chunk) given its raw bits.
template <class Cfg>
__device__ __forceinline__ float dequant_code(unsigned code, int i, const ChunkScales& s) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kMxfp4) return e2m1_to_f32(code) * s.scale0;
  if constexpr (F == WeightFormatId::kNvfp4) return (e2m1_to_f32(code) * (i < 16 ? s.scale0 : s.scale1)) * s.zero_point;
  if constexpr (F == WeightFormatId::kMxfp8 || F == WeightFormatId::kFp8Channel || F == WeightFormatId::kFp8Block)
    return e4m3_to_f32(code) * s.scale0;
  return (static_cast<float>(code) - s.zero_point) * s.scale0;  // INT4 / INT8
}

}  // namespace moeq_dev
