#pragma once
// Thread-block clusters (sm_90): the CTA's rank in its cluster, the cluster-wide barrier and
// loads from another CTA's shared memory (distributed shared memory), one wrapper each.
// NOTE: NVRTC-safe: no standard headers. Every wrapper exists on every arch so that code paths
// that are never taken below sm_90 still compile; there they trap.

namespace moeq_dev {

__device__ __forceinline__ unsigned cluster_cta_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
#else
  return 0;
#endif
}

// Every thread of every CTA of the cluster arrives; the release / acquire pair orders the shared
// memory writes before the barrier with the other CTAs' reads after it.
__device__ __forceinline__ void cluster_sync_all() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// The shared::cluster address of `shared_address` (this CTA's shared window) in CTA `rank`.
__device__ __forceinline__ unsigned cluster_map_shared(unsigned shared_address, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  unsigned mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(shared_address), "r"(rank));
  return mapped;
#else
  __trap();
  return 0;
#endif
}

__device__ __forceinline__ float4 ld_cluster_f32x4(unsigned cluster_address) {
  float4 v;
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_address)
               : "memory");
#else
  __trap();
  v.x = v.y = v.z = v.w = 0.0f;
#endif
  return v;
}

}  // namespace moeq_dev
