#pragma once
// GEMM1's input quantizer (or, for 16-bit activations on a `/t` tile, the MMA-order copy) folded into the launch of
// the step's first routing kernel
// (device/moeq_dev/moe/folded_quantizer.cuh): route_count, route_fused or route_chunk_count runs
// `blocks` more CTAs, which quantize the rows as quantize_activation(_values) would, bit for bit.
// PERF: the quantizer does not depend on the routing, and its own launch was one more kernel
// boundary on the step's critical path at small M (docs/perf-notes.md, "The quantizer folded into
// the routing launch").
#include <cstdint>

#include "cuda/driver.hpp"
#include "moeq/types.hpp"

namespace moeq::cuda {

// moeq_dev::FoldedQuantizerArgs, passed by value: the same layout.
struct FoldedQuantizerArgs {
  CUdeviceptr in = 0;
  int64_t in_row_stride = 0;
  CUdeviceptr codes = 0;
  CUdeviceptr scales = 0;
  int32_t rows = 0, cols = 0;
  int32_t vectorized = 0, warps_per_row = 1;
  uint32_t first_block = 0;  // set by the routing launch: its own CTAs
  int32_t mma_order = 0;     // the values (or FP8 per-token codes) in the MMA's K order (CodeSink)
};
static_assert(sizeof(FoldedQuantizerArgs) == 56, "the device struct's layout");

// FP8 per-token vectors a lane of a folded quantizer keeps per pass (the generated RoutingCfg's
// kFoldFp8Slots, moeq_dev::FoldedQuantizerCfg; the quantizer's own launch keeps 8).
constexpr int kFoldedFp8TokenSlots = 2;

struct FoldedQuantizer {
  ActFormat format = ActFormat::none;  // none: nothing folded (unless order_rows)
  DType dtype = DType::bf16;           // the input's (bf16, f16)
  bool values_out = false;             // the codes' 16-bit values instead of the codes
  // Not a quantizer: the 16-bit rows copied into the MMA's K order (order_rows_for_mma, fold_order_rows).
  bool order_rows = false;
  int64_t blocks = 0;  // the folded CTAs
  FoldedQuantizerArgs args{};
  bool active() const { return (format != ActFormat::none || order_rows) && blocks > 0; }
};

// The CTAs of `threads` threads a fold launches for `work_blocks` CTAs of work: at most a full GPU of them (2048
// threads per SM, as grid_blocks), at least one; the folded bodies loop over the rest.
int64_t folded_blocks(int64_t work_blocks, int threads);

// quantize_activation (values_out false) or quantize_activation_values (true) of in [rows, cols]
// (row stride in_row_stride elements) into out and scales, checked as they check (moeq::Error),
// on CTAs of `threads` threads, for a routing launch to run. rows = 0: nothing to fold (inactive).
FoldedQuantizer fold_quantizer(ActFormat format, DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows,
                               int64_t cols, CUdeviceptr out, CUdeviceptr scales, bool values_out, int threads,
                               bool mma_order = false);

// order_rows_for_mma of in [rows, cols] (row stride in_row_stride elements) into out [rows, cols] (dense), checked
// as it checks, on CTAs of `threads` threads, for a routing launch to run. rows = 0: inactive.
// PERF: the order pass reads only the hidden states, so it needs no order with the routing; its own launch was a
// kernel boundary between the routing and GEMM1 (5.3 / 7.2 us of kernel at gpt-oss-120b M = 640 / 1024, ncu,
// session 55).
FoldedQuantizer fold_order_rows(DType dtype, CUdeviceptr in, int64_t in_row_stride, int64_t rows, int64_t cols,
                                CUdeviceptr out, int threads);
// The most slots (M * top_k) at which apply folds the order pass (MOEQ_FOLD_ORDER=1, the default).
// PERF: H100, whole steps, folded against the pass alone (session 58, bench/results/2026-12-06-h100-s58-fold-order-
// side-by-side.md): -0.7% to -1.1% at 2048-2560 slots (Qwen3-30B-A3B MXFP4 / INT4-g128 M = 256, gpt-oss-120b M = 640)
// but +0.6% at 4096 (gpt-oss-120b M = 1024) and +1.4% / 0.0% at 5120 (Qwen3 MXFP4 / INT4 M = 640); on the chunked
// path (8192 slots, MOEQ_FOLD_ORDER=2) within the spread. Why the larger counts lose was not measured.
constexpr int64_t kFoldOrderMaxSlots = 3072;

}  // namespace moeq::cuda
