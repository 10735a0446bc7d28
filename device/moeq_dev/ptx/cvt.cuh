#pragma once
// Scalar conversions between fp32 and the 16-bit float formats, one PTX instruction each (sm_80+).
// Wrappers only: rounding is round-to-nearest-even, as the reference codecs
// (reference/formats.hpp) specify. 16-bit values travel as raw bits (unsigned short).
// NOTE: the hardware's NaN is the canonical 0x7FFF, sign dropped (seen on an H200); the reference
// codecs were set to the same bits, so GPU and reference outputs compare bit for bit.
// NOTE: NVRTC-safe on purpose: no standard headers and no <cuda_bf16.h>.

namespace moeq_dev {

// cvt.rn.bf16.f32: fp32 -> bf16 bits, round to nearest even; any NaN -> 0x7FFF.
__device__ __forceinline__ unsigned short f32_to_bf16_rn(float x) {
  unsigned short bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(x));
  return bits;
}

// mov.b32 {lo, hi}: exact, a bf16 is the upper half of the fp32 with the same value.
__device__ __forceinline__ float bf16_to_f32(unsigned short bits) {
  float x;
  const unsigned short zero = 0;
  asm("mov.b32 %0, {%1, %2};" : "=f"(x) : "h"(zero), "h"(bits));
  return x;
}

// cvt.rn.f16.f32: fp32 -> f16 bits, round to nearest even; overflow -> inf; any NaN -> 0x7FFF.
__device__ __forceinline__ unsigned short f32_to_f16_rn(float x) {
  unsigned short bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(x));
  return bits;
}

// cvt.f32.f16: exact, every f16 value is representable in fp32.
__device__ __forceinline__ float f16_to_f32(unsigned short bits) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(bits));
  return x;
}

}  // namespace moeq_dev
