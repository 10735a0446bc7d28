#pragma once
// Dynamic activation quantizers (CONTRACT §5), codes and scales bit-exact with
// reference/quantize_activations.cpp:
//   FP8 per token: s = max(amax_row, 1e-12) / 448 (fp32 division), q = e4m3(x / s) (true division)
//   MXFP8 / MXFP4: per 32 columns, code = ue8m0_scale_for(amax, 448 | 6), q = enc(x * 2^(127-code))
// amax skips NaN (fmaxf), as the reference's `a > m ? a : m`.
// NOTE: a NaN input is encoded from x itself, not from x / s or x * inv: the GPU's arithmetic
// returns the canonical NaN (sign dropped) where x86 propagates the operand's sign, and the
// reference's code keeps that sign (0xFF for a negative NaN).
#include "moeq_dev/moe/quantize_common.cuh"
#include "moeq_dev/moe/quantize_fp8_token.cuh"
#include "moeq_dev/moe/quantize_mx.cuh"

namespace moeq_dev {

// The quantizer of Cfg (kFormat, kDtypeIsBf16, kValuesOut, kThreads = blockDim.x) over `source`'s
// rows, on the CTAs of `grid`; mma_order: CodeSink's.
template <class Cfg, class Source>
__device__ __forceinline__ void quantize_rows(const Source& source, int rows, int cols, unsigned char* codes,
                                              void* scales, int vectorized, int warps_per_row, GridSlice grid,
                                              int mma_order = 0) {
  constexpr bool kBf16 = Cfg::kDtypeIsBf16, kValues = Cfg::kValuesOut;
  if constexpr (Cfg::kFormat == QuantFormat::kFp8Token) {
    float* s = static_cast<float*>(scales);
    if (vectorized) {
      quantize_fp8_token_rows<kBf16, 8, Cfg::kThreads, kValues, fp8_token_slots<Cfg>(0)>(source, rows, cols, codes,
                                                                                            s, warps_per_row, grid, mma_order);
    } else {
      quantize_fp8_token_rows<kBf16, 1, Cfg::kThreads, kValues, fp8_token_slots<Cfg>(0)>(source, rows, cols, codes,
                                                                                            s, warps_per_row, grid, mma_order);
    }
  } else {
    unsigned char* s = static_cast<unsigned char*>(scales);
    if (vectorized) {
      quantize_mx_vec8<Cfg::kFormat, kBf16, kValues>(source, rows, cols, codes, s, grid, mma_order);
    } else {
      quantize_mx_scalar<Cfg::kFormat, kBf16, kValues>(source, rows, cols, codes, s, grid, mma_order);
    }
  }
}

}  // namespace moeq_dev
