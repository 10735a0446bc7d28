#pragma once
// Dequantization of the canonical weight layouts (CONTRACT §4) by 16-byte chunks of codes:
// one chunk is 32 codes of a 4-bit format or 16 codes of an 8-bit one, along K of one row.
// Values are code value * scale (* global for NVFP4) in fp32, as reference/quantize_weights.cpp
// computes them; the GEMM rounds them once to the activation dtype.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/format/weights_fast.cuh"
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

// Formats with a fast bf16 path (format/weights_fast.cuh). INT8 keeps the fp32 path (bf16 cannot
// hold 128 + code exactly); INT4 takes it only with bf16 scales (checked at run time).
template <class Cfg>
struct FastBf16Dequant {
  static constexpr bool value = Cfg::kActBf16 && Cfg::kFormat != WeightFormatId::kInt8;
};
// FP8 per-channel scales are applied to the fp32 accumulators in the epilogue: exact per
// channel, and one multiply per output instead of one per weight.
template <class Cfg>
struct ScaleOnAccumulator {
  static constexpr bool value = FastBf16Dequant<Cfg>::value && Cfg::kFormat == WeightFormatId::kFp8Channel;
};

// One 16-byte chunk of codes -> bf16 in element order at dst (16 or 32 elements).
template <class Cfg>
__device__ __forceinline__ void dequant_chunk_bf16_fast(const unsigned (&words)[4], const ChunkScales& s, bool valid,
                                                        unsigned short* dst) {
  constexpr WeightFormatId F = Cfg::kFormat;
  constexpr int kStores = WeightFormatTraits<F>::kElemsPerChunk / 8;
  if (!valid) {
#pragma unroll
    for (int q = 0; q < kStores; ++q) *reinterpret_cast<uint4*>(dst + q * 8) = make_uint4(0, 0, 0, 0);
    return;
  }
  if constexpr (WeightFormatTraits<F>::kFourBit) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      unsigned o[4];
      if constexpr (F == WeightFormatId::kInt4) {
        int4_word_to_bf16(words[q], bf16x2_splat(f32_to_bf16_rn(-(s.zero_point + 128.0f))),
                          bf16x2_splat(f32_to_bf16_rn(s.scale0)), o);
      } else if constexpr (F == WeightFormatId::kMxfp4) {
        e2m1_word_to_bf16(words[q], bf16x2_splat(f32_to_bf16_rn(s.scale0)), o);
      } else {  // NVFP4: words 0-1 hold the first 16-code group, words 2-3 the second
        e2m1_word_to_bf16(words[q], bf16x2_splat(f32_to_bf16_rn((q < 2 ? s.scale0 : s.scale1) * s.zero_point)), o);
      }
      *reinterpret_cast<uint4*>(dst + q * 8) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  } else {
    const unsigned scale2 = ScaleOnAccumulator<Cfg>::value ? kBf16x2One : bf16x2_splat(f32_to_bf16_rn(s.scale0));
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      unsigned lo[2], hi[2];
      e4m3_word_to_bf16(words[2 * q], scale2, lo);
      e4m3_word_to_bf16(words[2 * q + 1], scale2, hi);
      *reinterpret_cast<uint4*>(dst + q * 8) = make_uint4(lo[0], lo[1], hi[0], hi[1]);
    }
  }
}

}  // namespace moeq_dev
