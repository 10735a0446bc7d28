#pragma once
// Packed 16x2 instructions on 32-bit registers (two 16-bit lanes), one PTX instruction each
// where the arch has it. Wrappers only: the activation quantizers' policy lives in moe/quantize*.cuh.
// NOTE: NVRTC-safe on purpose: no standard headers, no <cuda_bf16.h>.

namespace moeq_dev {

// max.u16x2 (sm_90+, PTX 8.0): per-lane unsigned maximum; two-lane emulation on older archs.
__device__ __forceinline__ unsigned max_u16x2(unsigned a, unsigned b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const unsigned lo = (a & 0xFFFFu) > (b & 0xFFFFu) ? (a & 0xFFFFu) : (b & 0xFFFFu);
  const unsigned hi = (a >> 16) > (b >> 16) ? (a & 0xFFFF0000u) : (b & 0xFFFF0000u);
  return hi | lo;
#endif
}

// fma.rn.bf16x2 (sm_80+): per-lane a * b + c, one rounding to nearest even.
__device__ __forceinline__ unsigned fma_rn_bf16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// fma.rn.f16x2 (sm_53+): per-lane a * b + c, one rounding to nearest even.
__device__ __forceinline__ unsigned fma_rn_f16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// lop3.b32 (a & mask) | bits in one instruction.
// PERF: written as C++, ptxas splits it into two LOP3s with immediate operands (SASS of the
// INT4 dequantization, GEMM v3); the constants as register operands keep it one.
__device__ __forceinline__ unsigned and_or_b32(unsigned a, unsigned mask, unsigned bits) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// max.bf16x2 (sm_80+): per-lane maximum (a NaN lane returns the other operand's lane).
__device__ __forceinline__ unsigned max_bf16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

}  // namespace moeq_dev

namespace moeq_dev {

// prmt.b32: byte permute of {b, a} (a = bytes 0-3, b = bytes 4-7) by the selector's nibbles.
__device__ __forceinline__ unsigned prmt_b32(unsigned a, unsigned b, unsigned selector) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

}  // namespace moeq_dev
