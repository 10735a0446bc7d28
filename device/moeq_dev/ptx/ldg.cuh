#pragma once
// Predicated vector loads from global memory: read-only (ld.global.nc), zeros where !valid (no
// access then), either kept out of L1 (streamed weights, read once) or through it (data several
// warps of a CTA read).
// NOTE: .nc (the read-only path) assumes nothing writes the data while the kernel runs: true for
// inputs written by earlier kernels of the same stream; not if a kernel ever overlaps its
// producer (programmatic dependent launch) or a caller aliases an input with the output.
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

template <bool kThroughL1>
__device__ __forceinline__ uint4 ldg_128(const void* p, bool valid) {
  uint4 v;
  if constexpr (kThroughL1) {
    asm volatile(
        "{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
        " @q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "r"(static_cast<int>(valid)));
  } else {
    asm volatile(
        "{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
        " @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "r"(static_cast<int>(valid)));
  }
  return v;
}

// 8 bytes, kept out of L1.
__device__ __forceinline__ uint2 ldg_stream_64(const void* p, bool valid) {
  uint2 v;
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.b32 q, %3, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
      " @q ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n}"
      : "=r"(v.x), "=r"(v.y)
      : "l"(p), "r"(static_cast<int>(valid)));
  return v;
}

}  // namespace moeq_dev
