#pragma once
// Dequantization straight into mma.sync B fragments (GEMM v3). A lane owns 16 consecutive codes
// of one weight row per 64-wide K tile (kernels/moe_gemm.cuh explains the K order), so it needs
// one scale per row and K tile: every group (MX 32, NVFP4 16, INT 32/64/128, FP8 block 128)
// holds whole 16-code runs.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/weights.cuh"

namespace moeq_dev {

struct LaneScale {
  float scale = 0.0f;
  float zero_point = 0.0f;  // INT only: value = (code - zero_point) * scale
};

// Scale of the 16 codes of expert e, row n, columns [k, k + 16). Out-of-range rows and
// columns (zero-filled codes) get scale 0, so they contribute exact zeros.
// NOTE: the NVFP4 global scale and the FP8 per-channel scale are not here: they multiply the
// fp32 accumulators in the epilogue (exact per channel; the codes times the e4m3 block scale
// are exact in bf16 and f16).
template <class Cfg>
__device__ __forceinline__ LaneScale load_lane_scale(const WeightScaling& w, int e, int n, int k, int N, int K) {
  LaneScale s;
  constexpr WeightFormatId F = Cfg::kFormat;
  if (n >= N || k >= K) return s;
  const long long row = static_cast<long long>(e) * N + n;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kMxfp8) {
    s.scale = ue8m0_to_f32(__ldg(static_cast<const unsigned char*>(w.scales) + row * (K / 32) + k / 32));
  } else if constexpr (F == WeightFormatId::kNvfp4) {
    s.scale = e4m3_to_f32(__ldg(static_cast<const unsigned char*>(w.scales) + row * (K / 16) + k / 16));
  } else if constexpr (F == WeightFormatId::kFp8Channel) {
    s.scale = 1.0f;
  } else if constexpr (F == WeightFormatId::kFp8Block) {
    const int blocks_n = (N + 127) / 128, blocks_k = (K + 127) / 128;
    s.scale = __ldg(static_cast<const float*>(w.scales) + (static_cast<long long>(e) * blocks_n + n / 128) * blocks_k + k / 128);
  } else {  // INT4 / INT8
    const int groups = w.group_size > 0 ? K / w.group_size : 1;
    const long long index = row * groups + (w.group_size > 0 ? k / w.group_size : 0);
    s.scale = load_scale_value(w.scales, index, w.scale_dtype);
    if (w.zero_points != nullptr) {
      s.zero_point = static_cast<float>(__ldg(w.zero_points + index));
    } else {
      s.zero_point = F == WeightFormatId::kInt4 ? 8.0f : 128.0f;
    }
  }
  return s;
}

// fp32 value of one code (before the epilogue's accumulator scales).
template <class Cfg>
__device__ __forceinline__ float lane_code_value(unsigned code, const LaneScale& s) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (F == WeightFormatId::kMxfp4 || F == WeightFormatId::kNvfp4) return e2m1_to_f32(code) * s.scale;
  if constexpr (F == WeightFormatId::kMxfp8 || F == WeightFormatId::kFp8Channel || F == WeightFormatId::kFp8Block)
    return e4m3_to_f32(code) * s.scale;
  // NOTE: 2^23 + code as float bits, minus 2^23 + zero point: both exact, no int -> float convert.
  return (__uint_as_float(0x4B000000u | code) - (8388608.0f + s.zero_point)) * s.scale;
}

// Whether the bf16 fast paths (format/weights_fast.cuh) serve this config: INT8 cannot hold
// 128 + code in bf16; INT4 takes it only with bf16 scales (checked at run time by the caller).
template <class Cfg>
struct FragmentFastPath {
  static constexpr bool value = Cfg::kActBf16 && Cfg::kFormat != WeightFormatId::kInt8;
};

// One word of eight 4-bit codes (elements 0-7 in nibble order) -> four 16-bit pairs in element
// order: out[0] = (e0, e1), ..., out[3] = (e6, e7).
template <class Cfg>
__device__ __forceinline__ void dequant_word4(unsigned w, const LaneScale& s, bool int4_fast, unsigned (&out)[4]) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (FragmentFastPath<Cfg>::value) {
    if constexpr (F == WeightFormatId::kInt4) {
      if (int4_fast) {
        int4_word_to_bf16(w, bf16x2_splat(f32_to_bf16_rn(-(s.zero_point + 128.0f))), bf16x2_splat(f32_to_bf16_rn(s.scale)),
                          out);
        return;
      }
    } else {
      e2m1_word_to_bf16(w, bf16x2_splat(f32_to_bf16_rn(s.scale)), out);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = lane_code_value<Cfg>((w >> (8 * i)) & 0xFu, s);
    const float hi = lane_code_value<Cfg>((w >> (8 * i + 4)) & 0xFu, s);
    out[i] = Cfg::kActBf16 ? (f32_to_bf16_rn(lo) | (static_cast<unsigned>(f32_to_bf16_rn(hi)) << 16))
                           : (f32_to_f16_rn(lo) | (static_cast<unsigned>(f32_to_f16_rn(hi)) << 16));
  }
}

// One word of four 8-bit codes -> out[0] = (e0, e1), out[1] = (e2, e3).
// NOTE: the FP8-block fp32 scale is rounded to bf16 on the fast path (docs/numerics.md).
template <class Cfg>
__device__ __forceinline__ void dequant_word8(unsigned w, const LaneScale& s, unsigned (&out)[2]) {
  constexpr WeightFormatId F = Cfg::kFormat;
  if constexpr (FragmentFastPath<Cfg>::value) {
    const unsigned scale2 = F == WeightFormatId::kFp8Channel ? kBf16x2One : bf16x2_splat(f32_to_bf16_rn(s.scale));
    e4m3_word_to_bf16(w, scale2, out);
    return;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float lo = lane_code_value<Cfg>((w >> (16 * i)) & 0xFFu, s);
    const float hi = lane_code_value<Cfg>((w >> (16 * i + 8)) & 0xFFu, s);
    out[i] = Cfg::kActBf16 ? (f32_to_bf16_rn(lo) | (static_cast<unsigned>(f32_to_bf16_rn(hi)) << 16))
                           : (f32_to_f16_rn(lo) | (static_cast<unsigned>(f32_to_f16_rn(hi)) << 16));
  }
}

}  // namespace moeq_dev
