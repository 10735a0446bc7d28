#pragma once
// Host side of the code-layout transform (device/moeq_dev/format/prepared.cuh): canonical ->
// prepared codes on the GPU, one thread per output word. Enqueues only.
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

void prepare_codes(const WeightDesc& desc, const void* canonical, void* prepared, CUstream stream);
jit::KernelSpec prepare_kernel_spec();

// Whether `holds` is true of every chunk of `count` device bytes at `bytes`, read back after
// `stream`'s queued work (load-time checks of weights; synchronous, stops at the first false).
bool scan_device_bytes(const void* bytes, int64_t count, CUstream stream,
                       const std::function<bool(const uint8_t*, int64_t)>& holds);

}  // namespace moeq::cuda
