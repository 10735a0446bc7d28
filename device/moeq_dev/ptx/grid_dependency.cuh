#pragma once
// Programmatic dependent launch (sm_90): a kernel launched with programmatic stream serialization
// may start before the kernel ahead of it in the stream has finished, once every CTA of that one
// has called launch_dependents (or exited). It must then wait for that kernel's completion and
// memory (griddepcontrol.wait) before it reads what that kernel wrote or writes what it reads.
// NOTE: NVRTC-safe: no standard headers. Below sm_90 both are no-ops, and the host launches
// without the attribute (src/cuda/launch.hpp).

namespace moeq_dev {

// Every moeq kernel calls this first: it lets the next kernel in the stream be launched (its CTAs
// become resident and wait as soon as every CTA of this grid has started), then waits for the
// kernel before this one. The next kernel waits in turn, so the order of the stream holds.
// PERF: what overlaps is the next grid's launch and CTA start-up with this grid's run, the
// launch gap of a step of 5-7 kernels (docs/perf-notes.md, "Programmatic dependent launch").
__device__ __forceinline__ void begin_dependent_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory");
#endif
}

// A self-routed GEMM1 (gemm_self_routed) splits the two: it lets the next kernel launch, works from the
// step's inputs alone, and waits for the routing kernel before its first global write (and before it exits), so the
// kernels after it still see the routing's outputs.
__device__ __forceinline__ void allow_dependent_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_prior_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The routing kernel a self-routed GEMM1 follows (route_fused): it waits for the kernel before it first, so the next
// one starts only once the step's inputs (topk_ids, hidden states) are complete and visible.
__device__ __forceinline__ void wait_then_allow_dependent_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace moeq_dev
