#pragma once
// Packed fp32 -> 8-bit float conversions, one PTX instruction each. Wrappers only: the NaN and
// saturation policy of moeq lives in format/fp8.cuh.
// NOTE: NVRTC-safe on purpose: no standard headers, no <cuda_fp8.h>.

namespace moeq_dev {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// cvt.rn.satfinite.e4m3x2.f32 (sm_89+, PTX 7.8): two fp32 -> two e4m3 codes, round to nearest even,
// finite overflow and +-inf saturate to +-448. `hi` lands in bits [15:8], `lo` in bits [7:0].
__device__ __forceinline__ unsigned short cvt_rn_satfinite_e4m3x2_f32(float hi, float lo) {
  unsigned short bits;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(bits) : "f"(hi), "f"(lo));
  return bits;
}
#endif

}  // namespace moeq_dev
