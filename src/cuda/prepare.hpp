#pragma once
// Host side of the code-layout transform (device/moeq_dev/format/prepared.cuh): canonical ->
// prepared codes on the GPU, one thread per output word. Enqueues only.
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

void prepare_codes(const WeightDesc& desc, const void* canonical, void* prepared, CUstream stream);
jit::KernelSpec prepare_kernel_spec();

}  // namespace moeq::cuda
