#pragma once
// Shared-memory barriers for warp-specialized kernels (sm_90): mbarriers (init, arrive, wait on
// a phase's parity), named CTA barriers over part of the block, and setmaxnreg, one wrapper each.
// Every wrapper exists on every arch so that code paths never taken below sm_90a still compile;
// there they trap.
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}

// Makes this thread's mbarrier_init visible to the async proxy (cp.async.bulk's complete_tx),
// which the CTA barrier that follows the inits does not order.
__device__ __forceinline__ void fence_mbarrier_init() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  __trap();
#endif
}

// One arrival (release semantics at CTA scope: this thread's earlier shared-memory writes are
// visible to the threads that then see the phase complete).
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// One arrival that also expects `bytes` more of asynchronous copies (cp_async_bulk_to_shared)
// before the phase can complete.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
#else
  __trap();
#endif
}

// A bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to this
// CTA's shared memory through the async proxy, one instruction for the whole run; it completes
// `bytes` of the transactions that barrier `bar` expects.
__device__ __forceinline__ void cp_async_bulk_to_shared(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#else
  __trap();
#endif
}

// Waits until the phase of parity `parity` has completed (acquire semantics). A barrier starts in
// phase 0, so waiting on parity 0 blocks until the first `arrivals` arrivals.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{ .reg .pred done;\n\t"
      "wait_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
      "@!done bra wait_%=; }" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  __trap();
#endif
}

// bar.sync over `threads` threads (a multiple of 32) of the CTA on barrier `id` (1..15; 0 is
// __syncthreads).
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's register budget per thread, lowered or raised (a multiple of 8 in [24, 256]).
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

}  // namespace moeq_dev
