#pragma once
// Internal to src/cuda/routing*.cpp: the routing kernels' configs (one generated module each), their
// CTA sizes and shared memory, the per-process table of loaded functions, and the checks the
// launchers share.
#include <cstdint>
#include <limits>
#include <string>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"

namespace moeq::cuda::routing_detail {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// NOTE: the default dynamic shared-memory limit, never raised here (no cuFuncSetAttribute).
constexpr int64_t kMaxSmemBytes = 48 * 1024;

enum class Kernel : uint8_t {
  kRouteCount, kRouteScatter, kPermuteRows, kTopkReduce, kRouteFused, kRouteChunkCount, kRouteChunkPlace
};

// Fields a kernel does not use keep their defaults, so each distinct module is compiled once.
struct Config {
  Kernel kernel = Kernel::kRouteCount;
  bool ids_int64 = false;
  DType dtype = DType::bf16;
  DType weights_dtype = DType::f32;
  // A quantizer folded into route_count, route_fused or route_chunk_count (FoldedQuantizer); its
  // input dtype is `dtype`.
  ActFormat fold_format = ActFormat::none;
  bool fold_values_out = false;
  bool fold_order_rows = false;  // the MMA-order copy folded there instead (FoldedQuantizer::order_rows)
  uint32_t key() const {
    return static_cast<uint32_t>(kernel) | (ids_int64 ? 1u << 8 : 0u) | static_cast<uint32_t>(fold_format) << 9 |
           (fold_values_out ? 1u << 11 : 0u) | (fold_order_rows ? 1u << 12 : 0u) | static_cast<uint32_t>(dtype) << 16 |
           static_cast<uint32_t>(weights_dtype) << 24;
  }
};

int threads_of(Kernel kernel);
// Dynamic shared memory of route_fused: counts (E), 32 warp sums, offsets (E + 1), and one row
// of E + 1 bucket counts per warp. route_chunk_place needs E ints less.
int64_t fused_smem_bytes(int64_t num_experts);
int64_t chunk_place_smem_bytes(int64_t num_experts);
// The generated source of config's module, and its function (compiled or loaded on first use).
jit::KernelSpec spec_of(const Config& config);
CUfunction function_of(const Config& config);

void require(bool ok, const std::string& message);
void require_ptr(CUdeviceptr ptr, const char* name);
inline unsigned ceil_div(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }
// Smallest power of two >= work, in [32, cap]: the threads that share one row or token.
int threads_for(int64_t work, int cap);

}  // namespace moeq::cuda::routing_detail
