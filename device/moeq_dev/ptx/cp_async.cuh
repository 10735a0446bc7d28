#pragma once
// Asynchronous global -> shared copies (cp.async, sm_80+) and vector shared-memory loads and
// stores by 32-bit shared-window address, one wrapper each.
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

// cp.async.cg.shared.global, 16 bytes; src_bytes = 0 writes 16 zero bytes and reads nothing
// (the GEMM's running pointers rely on this: in a partial last K tile they may point up to 48
// bytes past the end of a row, see kernels/moe_gemm_sync.cuh).
__device__ __forceinline__ void cp_async_16(unsigned smem_dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_dst), "l"(src), "r"(src_bytes) : "memory");
}

// cp.async.ca.shared.global, 4 bytes of which the first src_bytes (0, 2 or 4) are read and the rest
// zero-filled; src 4-byte aligned.
__device__ __forceinline__ void cp_async_4(unsigned smem_dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most kPending committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// An arrival on the mbarrier at `bar` once all of this thread's earlier cp.async have completed
// (.noinc: the barrier's expected count includes this arrival).
__device__ __forceinline__ void cp_async_mbarrier_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ uint4 lds_128(unsigned address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}

__device__ __forceinline__ uint2 lds_64(unsigned address) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(address));
  return v;
}

__device__ __forceinline__ unsigned lds_u8(unsigned address) {
  unsigned v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(address));
  return v;
}

__device__ __forceinline__ void sts_128(unsigned address, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

}  // namespace moeq_dev
