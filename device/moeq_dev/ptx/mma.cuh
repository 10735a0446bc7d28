#pragma once
// Tensor-core and shared-memory matrix instructions, one wrapper each (sm_80+).
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

// cvta.to.shared: the 32-bit shared-window address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned smem_address(const void* generic) {
  unsigned address;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(address) : "l"(generic));
  return address;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d += a (16x16, row) * b (16x8, col).
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+): d += a (16x32 e4m3, row) *
// b (32x8 e4m3, col). Fragments (PTX ISA, m16n8k32 8-bit types; g = lane / 4, t = lane % 4):
// a[0] row g, k 4t..4t+3 (byte j = k 4t + j); a[1] row g + 8, same k; a[2] row g, k 16 + 4t..;
// a[3] row g + 8, k 16 + 4t..; b0 column g, k 4t..4t+3; b1 column g, k 16 + 4t..; d as m16n8k16.
// Elsewhere it is not compiled (the caller checks the arch: tests/gpu/test_fp8_mma.cpp).
__device__ __forceinline__ void mma_m16n8k32_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// The bf16 or f16 form by the activation dtype.
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (kBf16) {
    mma_m16n8k16_bf16(d, a, b0, b1);
  } else {
    mma_m16n8k16_f16(d, a, b0, b1);
  }
}

}  // namespace moeq_dev
