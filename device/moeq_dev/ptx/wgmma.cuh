#pragma once
// Warpgroup MMA (wgmma.mma_async, sm_90a): the A operand from registers (each warp's 16 rows in
// the mma.sync m16n8k16 A-fragment layout), B from shared memory through a matrix descriptor,
// one wrapper each. Every wrapper exists on every arch so that code paths never taken below
// sm_90a still compile; there they trap.
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MOEQ_WGMMA_AVAILABLE 1
#else
#define MOEQ_WGMMA_AVAILABLE 0
#endif

// Orders this thread's register writes before the wgmma reads of them (A fragments, and the
// accumulators when other instructions wrote them).
__device__ __forceinline__ void wgmma_fence() {
#if MOEQ_WGMMA_AVAILABLE
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// Orders this thread's generic-proxy writes to shared memory (st.shared, cp.async once waited
// for) before later async-proxy reads of it (wgmma operands from descriptors).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if MOEQ_WGMMA_AVAILABLE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if MOEQ_WGMMA_AVAILABLE
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

// Waits until at most kPending committed wgmma groups of this warp are still in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if MOEQ_WGMMA_AVAILABLE
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}

// Shared-memory matrix descriptor without swizzling: the operand is made of core matrices of 8
// rows x 16 bytes (128 contiguous bytes each); `leading` is the byte distance between core
// matrices adjacent along K, `stride` between core matrices adjacent along M / N.
__device__ __forceinline__ unsigned long long wgmma_descriptor(unsigned shared_address, unsigned leading, unsigned stride) {
  return static_cast<unsigned long long>((shared_address >> 4) & 0x3FFFu) |
         static_cast<unsigned long long>((leading >> 4) & 0x3FFFu) << 16 |
         static_cast<unsigned long long>((stride >> 4) & 0x3FFFu) << 32;
}

// d (64 x 64, fp32, this thread's 32) += a (64 x 16, registers) * b (16 x 64, descriptor, K-major).
template <bool kBf16>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
#if MOEQ_WGMMA_AVAILABLE
  if constexpr (kBf16) {
    asm volatile(
        "{ .reg .pred accumulate; setp.ne.b32 accumulate, 1, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, accumulate, 1, 1, 0; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
  } else {
    asm volatile(
        "{ .reg .pred accumulate; setp.ne.b32 accumulate, 1, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, accumulate, 1, 1, 0; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
  }
#else
  __trap();
#endif
}

}  // namespace moeq_dev
