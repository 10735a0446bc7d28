#pragma once
// Internal to src/cuda/elementwise.cpp and quantizer.cpp: the work split they share, the names of
// the device enums in generated sources, the checks, and the per-entry-point function tables.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"

namespace moeq::cuda::elementwise_detail {

// PERF: 256 threads = 8 warps: a whole 32-row group of the FP8 row kernel fits in one block at
// 8 warps per row, and 8 resident blocks fill an SM's 2048 threads.
constexpr int kThreads = 256;
constexpr int kMxBlock = 32;
constexpr int kVecElems = 8;      // one 16-byte access of 16-bit elements
constexpr int kFp8TokenSlots = 8; // moeq_dev::kFp8TokenSlots: vectors a lane keeps per pass
constexpr int kMxItems = 4;        // moeq_dev::kMxItems: 16-byte vectors a lane loads per MX step

inline std::string str(int64_t v) { return std::to_string(v); }
inline const char* bool_str(bool b) { return b ? "true" : "false"; }
// The device enum's member for each host value; both throw for a value with no kernel.
const char* activation_enum(Activation a);
const char* format_enum(ActFormat f);
void check_dtype(DType dtype);

// Indices into the per-process function tables.
inline size_t activation_index(Activation kind, bool interleaved, DType dtype) {
  return (static_cast<size_t>(kind) * 2 + (interleaved ? 1 : 0)) * 2 + (dtype == DType::bf16 ? 1 : 0);
}
inline size_t quantize_index(ActFormat format, DType dtype) {
  return static_cast<size_t>(format) * 2 + (dtype == DType::bf16 ? 1 : 0);
}

// PERF: a lock-free table per entry point: after a config's first call (compile or disk load,
// module load) a launch costs one atomic load, no hashing of the source.
template <size_t kSize, typename MakeSpec>
CUfunction cached_function(std::array<std::atomic<CUfunction>, kSize>& table, size_t index,
                           MakeSpec make_spec) {
  if (CUfunction f = table[index].load(std::memory_order_acquire)) return f;
  CUfunction f = jit::kernel_cache().function(make_spec());  // thread-safe, loads a module once
  table[index].store(f, std::memory_order_release);
  return f;
}

// Blocks for a grid-stride loop: enough to cover the work, at most one full wave of resident
// blocks (2048 threads per SM on sm_80 .. sm_90), queried once.
unsigned grid_blocks(int64_t work_blocks);
inline bool aligned(CUdeviceptr p, unsigned bytes) { return p % bytes == 0; }

struct KernelActivationArgs {  // moeq_dev::ActivationArgs, passed by value
  float swiglu_alpha;
  float swiglu_limit;
  float silu_clamp;
};

}  // namespace moeq::cuda::elementwise_detail
