#pragma once
// Host side of the code-layout transform (device/moeq_dev/format/prepared.cuh): canonical ->
// prepared codes on the GPU, one thread per output word. Enqueues only.
#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

void prepare_codes(const WeightDesc& desc, const void* canonical, void* prepared, CUstream stream);
jit::KernelSpec prepare_kernel_spec();

// The largest of `count` device bytes at `bytes` (0 for none), read back in chunks after
// `stream`'s queued work: a load-time check of weights, synchronous.
uint8_t max_device_byte(const void* bytes, int64_t count, CUstream stream);

}  // namespace moeq::cuda
