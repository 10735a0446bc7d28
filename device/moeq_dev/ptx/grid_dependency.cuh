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

}  // namespace moeq_dev
