#pragma once
// Host side of the routing kernels (device/moeq_dev/kernels/routing.cuh): align (indexed),
// permute (contiguous), batched ranks and combine (masked), and the weighted top-k reduction.
// Every entry point takes device pointers and a stream, enqueues kernels and returns: no host
// sync, no allocation, no compile after a config's first use: CUDA-graph safe. Results equal
// reference/routing.cpp bit for bit (CONTRACT §3).
// Bad ids do not throw here (that would need a sync): the slot becomes non-local and a bit is
// ORed into *error_flags (kRoutingError*), which the caller zeroes beforehand and reads later.
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/folded_quantizer.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"
#include "reference/routing.hpp"

namespace moeq::cuda {

// Bits of the error word (the same values as moeq_dev::kError* in moe/errors.cuh).
constexpr int kRoutingErrorBadTopkId = 1;        // a topk id outside [-1, E_g)
constexpr int kRoutingErrorBadExpertMap = 2;     // expert_map[id] outside [-1, E)
constexpr int kRoutingErrorBatchedOverflow = 4;  // an expert received more than T rows, or a masked count is outside [0, T]
// "topk id outside [-1, E_g); ..." for the bits set; "" for 0.
std::string describe_routing_errors(int flags);

// The routing input shared by every layout.
struct RouteIds {
  CUdeviceptr topk_ids = 0;      // [M, top_k] int32 or int64, global ids, -1 = no expert
  DType ids_dtype = DType::i32;  // i32 or i64
  int64_t num_tokens = 0;        // M
  int64_t top_k = 1;
  int64_t num_global_experts = 0;  // E_g (must equal num_experts without expert_map)
  CUdeviceptr expert_map = 0;      // [E_g] int32 global -> local id (-1 = not here), or 0
  int64_t num_experts = 0;         // E
  CUdeviceptr error_flags = 0;     // int32 [1], bits ORed (kRoutingError*), or 0 to ignore
  int64_t num_slots() const { return num_tokens * top_k; }
};

// Which kernels map_and_align, permute_indices and batched_ranks launch. kAuto: one fused CTA
// while num_slots <= kFusedMaxSlots and E fits its shared memory (fused_path_fits; not batched);
// the chunked pair from kChunkedMinSlots where E fits (chunked_path_fits) and the outputs carry
// chunk_counts; else count + scatter (E + 1 CTAs). kFused, kTwoKernel and kChunked force a path
// (tests, timings); kFused and kChunked throw where E does not fit, kChunked without chunk_counts.
// The choice depends on host shapes only, so a captured graph replays the same path.
enum class RoutingPath { kAuto, kFused, kTwoKernel, kChunked };
// PERF: H200 (docs/perf-notes.md, "Routing: align"): fused align at 8 slots (M = 1, top_k 8)
// measured 6.3-6.5 us streamed vs 8.3-8.6 us for count + scatter (graph replay: 5.4-5.7 vs
// 4.7-5.5); a tie at 128 slots streamed and slower from 512 slots on, so only the smallest M.
constexpr int64_t kFusedMaxSlots = 8;
bool fused_path_fits(int64_t num_experts);
// The CTA size of the kernels a FoldedQuantizer joins (fold_quantizer's `threads`).
constexpr int kRouteFirstKernelThreads = 1024;

// The chunked pair (route_chunk_count, route_chunk_place): one CTA per chunk of slots, a multiple
// of kRouteChunkUnit, at most kMaxRouteChunks chunks (each CTA of the place kernel reads every
// chunk's counts). Its scratch, chunk_counts, holds route_chunk_counts_elems int32.
constexpr int64_t kRouteChunkUnit = 1024;
constexpr int64_t kMaxRouteChunks = 128;
// PERF: H200, graph replay of 20 calls (RoutingGpu.PrintsTimings, session 28; top_k 8, E = 128 / 256):
// align count + scatter 7.5 / 8.0 us at 4096 slots, 10.6 / 11.4 at 8192, 30.0 / 30.9 at 32768;
// chunked 8.3 / 8.8, 8.0 / 8.5 and 8.1 / 8.7 (flat: one CTA per chunk). At 2048 slots chunked lost
// 3.4 us (9.4 against 6.1), which Qwen3-30B-A3B's whole step at M = 256 showed (+2.4%). The
// crossover lies between 4096 and 8192 slots (count + scatter grows ~0.75 us per 1024 slots there).
constexpr int64_t kChunkedMinSlots = 6144;
bool chunked_path_fits(int64_t num_experts);
int64_t route_chunk_slots(int64_t num_slots);
int64_t route_num_chunks(int64_t num_slots);  // >= 1
int64_t route_chunk_counts_elems(int64_t num_slots, int64_t num_experts);
// Whether map_and_align / permute_indices take the chunked pair (kAuto, as they decide it).
bool takes_chunked_path(const RouteIds& ids, CUdeviceptr chunk_counts);

// ---- Indexed ----
// align_capacity(M*top_k, E, BM) entries of sorted_ids (reference/routing.hpp, the one
// formula); expert_ids has capacity / BM.
using ref::align_capacity;
struct AlignOutputs {
  CUdeviceptr local_ids = 0;          // int32 [M*top_k]: local expert per slot, -1 = none
  CUdeviceptr sorted_ids = 0;         // int32 [capacity]
  CUdeviceptr expert_ids = 0;         // int32 [capacity / BM]
  CUdeviceptr num_tokens_padded = 0;  // int32 [1]
  CUdeviceptr chunk_counts = 0;       // int32 [route_chunk_counts_elems], or 0: no chunked path
  FoldedQuantizer quantizer{};        // run by the first kernel's extra CTAs (fold_quantizer), if active
};
// One fused kernel (small M) or two: count (one CTA) and scatter (E + 1 CTAs), or the chunked pair.
void map_and_align(const RouteIds& ids, int64_t block_m, const AlignOutputs& out, CUstream stream,
                   RoutingPath path = RoutingPath::kAuto);
// Whether map_and_align with RoutingPath::kAuto launches the one route_fused kernel for these ids: the kernel a
// self-routed GEMM1 may follow (MoeGemmArgs::self_route), as it waits for its own predecessor before GEMM1 launches.
bool aligns_in_one_kernel(const RouteIds& ids);

// ---- Grouped contiguous ----
struct PermuteOutputs {
  CUdeviceptr local_ids = 0;         // int32 [M*top_k]
  CUdeviceptr offsets = 0;           // int64 [E+1] (expert_first_token_offset)
  CUdeviceptr inv_permuted_idx = 0;  // int32 [M*top_k]
  CUdeviceptr permuted_src = 0;      // int32 [M*top_k]
  CUdeviceptr chunk_counts = 0;      // int32 [route_chunk_counts_elems], or 0: no chunked path
  FoldedQuantizer quantizer{};       // run by the first kernel's extra CTAs (fold_quantizer), if active
};
struct PermuteRows {
  CUdeviceptr hidden = 0;  // [M, row_bytes] rows at hidden_row_stride_bytes
  int64_t hidden_row_stride_bytes = 0;
  int64_t row_bytes = 0;     // K * element size
  CUdeviceptr permuted = 0;  // [M*top_k, row_bytes]; rows at or past offsets[E] untouched
  int64_t permuted_row_stride_bytes = 0;
};
// Index kernels only (ref::permute_indices).
void permute_indices(const RouteIds& ids, const PermuteOutputs& out, CUstream stream,
                     RoutingPath path = RoutingPath::kAuto);
// Row copies only, from the indices of permute_indices (ref::permute_rows).
void permute_rows(const PermuteRows& rows, CUdeviceptr permuted_src, CUdeviceptr offsets, int64_t num_experts,
                  int64_t num_slots, int64_t top_k, CUstream stream);
// Both: indices, then rows.
void permute(const RouteIds& ids, const PermuteRows& rows, const PermuteOutputs& out, CUstream stream);

// ---- Grouped masked (batched) ----
struct BatchedOutputs {
  CUdeviceptr local_ids = 0;     // int32 [M*top_k]
  CUdeviceptr counts = 0;        // int32 [E] (expert_num_tokens), min(count, T)
  CUdeviceptr batched_rows = 0;  // int32 [M*top_k]: e*T + rank (ref::reduce_rows_batched), -1 = none
  CUdeviceptr slot_of_row = 0;   // int32 [E*T] (ref::batched_dispatch), or 0 to skip
  CUdeviceptr chunk_counts = 0;  // int32 [route_chunk_counts_elems], or 0: no chunked path
};
void batched_ranks(const RouteIds& ids, int64_t max_tokens_per_expert, const BatchedOutputs& out,
                   CUstream stream, RoutingPath path = RoutingPath::kAuto);

// ---- Weighted top-k reduction ----
struct ReduceArgs {
  CUdeviceptr down = 0;  // rows of down_dtype, down_row_stride elements apart
  int64_t down_row_stride = 0;
  DType dtype = DType::bf16;      // down and out: bf16 or f16
  CUdeviceptr local_ids = 0;      // int32 [M*top_k]: slots with -1 are skipped (never read)
  CUdeviceptr row_map = 0;        // int32 [M*top_k] source row of a local slot, or 0: row = slot
  CUdeviceptr weights = 0;        // [M, top_k]
  DType weights_dtype = DType::f32;  // f32, bf16 or f16
  int64_t num_tokens = 0;
  int64_t top_k = 1;
  int64_t cols = 0;               // K
  CUdeviceptr out = 0;            // [M, cols] at out_row_stride elements
  int64_t out_row_stride = 0;
};
// out[t,:] = sum over local k (increasing) of w[t,k] * down[row(t,k), :], fp32 fma, one rounding.
// row_map: 0 for indexed, inv_permuted_idx for contiguous, batched_rows for batched.
void topk_reduce(const ReduceArgs& args, CUstream stream);
// ref::combine_batched: down [E, T, cols] contiguous -> out [M, cols] contiguous, both `dtype`.
void combine_batched(CUdeviceptr down, DType dtype, int64_t max_tokens_per_expert, int64_t cols,
                     CUdeviceptr local_ids, CUdeviceptr batched_rows, CUdeviceptr weights, DType weights_dtype,
                     int64_t num_tokens, int64_t top_k, CUdeviceptr out, CUstream stream);

// Every routing kernel config the planner can emit (ids i32/i64, dtypes bf16/f16, weights
// f32/bf16/f16), for tests/jit and `moeq compile`.
std::vector<jit::KernelSpec> routing_kernel_specs();
// The first kernels (count, fused, chunk count; ids i32 / i64) with a quantizer of `format` on
// `dtype` input folded in (FoldedQuantizer; values_out: the codes' 16-bit values): a quantized
// layer's (cuda/layer_kernels.cpp).
std::vector<jit::KernelSpec> folded_routing_kernel_specs(ActFormat format, DType dtype, bool values_out);
// The same first kernels with the MMA-order copy of `dtype` rows folded in (fold_order_rows): a 16-bit layer's
// whose GEMM1 may run a `/t` tile.
std::vector<jit::KernelSpec> folded_order_routing_kernel_specs(DType dtype);

}  // namespace moeq::cuda
